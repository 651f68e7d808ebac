"""Tokenizer from a SentencePiece ``spiece.model`` (T5 v1.1 / UMT5 repos that ship no ``tokenizer.json``).

Reproduces transformers' ``T5Tokenizer`` called with ``padding="max_length", max_length=N, truncation=True``:

* special tokens written in the text (``</s>``, ``<pad>``, ``<unk>``, ``<extra_id_K>`` and any entry of
  ``tokenizer_config.json``'s ``added_tokens_decoder``) are cut out first and map to their ids; each piece of text
  between them is encoded by SentencePiece on its own (which normalises it and prepends ``▁``);
* the ``extra_ids`` sentinels (default 100) come after the SentencePiece vocabulary in reverse order:
  ``<extra_id_0>`` is the last id;
* ``</s>`` is appended, truncation keeps room for it, rows are padded to exactly ``N`` with ``<pad>`` on
  ``padding_side``.

The padding / truncation / special-token helpers here are shared with the byte-level tokenizer.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from vidax_core.errors import UserError


def read_json(path: str) -> dict[str, Any]:
    """A JSON object from ``path``, ``{}`` if the file is absent or not an object."""
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return data if isinstance(data, dict) else {}


def token_text(tok: Any, default: str) -> str:
    """A special-token entry is a string or an AddedToken dict ``{"content": ...}``."""
    if isinstance(tok, str):
        return tok
    if isinstance(tok, dict) and isinstance(tok.get("content"), str):
        return tok["content"]
    return default


def split_on_specials(text: str, specials: Mapping[str, int], strip: Sequence[str] = ()) -> list[str | int]:
    """``text`` cut at every occurrence of a special token (longest match first): a list of text pieces and ids.

    Whitespace next to a token named in ``strip`` is dropped (transformers' ``lstrip``/``rstrip`` AddedTokens).
    """
    if not specials:
        return [text]
    pattern = re.compile("|".join(re.escape(t) for t in sorted(specials, key=len, reverse=True)))
    out: list[str | int] = []
    pos = 0
    for m in pattern.finditer(text):
        piece = text[pos : m.start()]
        if m.group() in strip:
            piece = piece.rstrip()
        if out and isinstance(out[-1], int) and _strip_after(out, specials, strip):
            piece = piece.lstrip()
        out.append(piece)
        out.append(specials[m.group()])
        pos = m.end()
    piece = text[pos:]
    if out and _strip_after(out, specials, strip):
        piece = piece.lstrip()
    out.append(piece)
    return [p for p in out if not (isinstance(p, str) and p == "")]


def _strip_after(out: list[str | int], specials: Mapping[str, int], strip: Sequence[str]) -> bool:
    last = out[-1]
    return isinstance(last, int) and any(specials.get(t) == last for t in strip)


def pad_batch(
    rows: Sequence[list[int]],
    max_length: int,
    *,
    eos_id: int | None,
    pad_id: int,
    padding_side: str,
    truncation_side: str,
    skip_eos_if_present: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Append ``eos_id`` (room kept by truncating on ``truncation_side``; None: nothing appended), pad to
    ``max_length`` on ``padding_side``: ``(ids, mask)`` int32 (batch, max_length)."""
    ids = np.full((len(rows), max_length), pad_id, np.int32)
    mask = np.zeros((len(rows), max_length), np.int32)
    for i, row in enumerate(rows):
        keep = max(max_length - (eos_id is not None), 0)
        if len(row) > keep:
            row = row[:keep] if truncation_side == "right" else row[len(row) - keep :]
        if eos_id is not None and not (skip_eos_if_present and row and row[-1] == eos_id):
            row = row + [eos_id]
        row = row[:max_length]
        n = len(row)
        if padding_side == "right":
            ids[i, :n], mask[i, :n] = row, 1
        else:
            ids[i, max_length - n :], mask[i, max_length - n :] = row, 1
    return ids, mask


def sides(path: str, config: Mapping[str, Any]) -> tuple[str, str]:
    """(padding_side, truncation_side) from a ``tokenizer_config.json``, checked."""
    out = []
    for name in ("padding_side", "truncation_side"):
        side = config.get(name, "right")
        if side not in ("left", "right"):
            raise UserError(f"tokenizer folder {path!r}: {name} must be 'left' or 'right', got {side!r}")
        out.append(side)
    return out[0], out[1]


MAX_EXTRA_IDS = 65536  # T5 has 100 sentinels, ByT5 125: far more is a broken config, not a vocabulary


def extra_ids(path: str, config: Mapping[str, Any], default: int) -> int:
    """``extra_ids`` of a ``tokenizer_config.json`` (the sentinel count), checked: a whole number from 0 up."""
    value = config.get("extra_ids", default)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_EXTRA_IDS:
        raise UserError(f"tokenizer folder {path!r}: extra_ids in tokenizer_config.json must be a whole number from 0 "
                        f"to {MAX_EXTRA_IDS}, got {value!r}")
    return value


def added_tokens(path: str, config: Mapping[str, Any]) -> list[tuple[int, Any]]:
    """(id, entry) of a ``tokenizer_config.json``'s ``added_tokens_decoder`` (keys are the ids), checked."""
    added = config.get("added_tokens_decoder") or {}
    if not isinstance(added, Mapping):
        raise UserError(f"tokenizer folder {path!r}: added_tokens_decoder in tokenizer_config.json must be an object "
                        f"of id -> token, got {type(added).__name__}")
    out = []
    for tid, entry in added.items():
        if not str(tid).isdigit():
            raise UserError(f"tokenizer folder {path!r}: added_tokens_decoder key {tid!r} is not a token id")
        out.append((int(tid), entry))
    return out


@dataclass
class SpieceTokenizer:
    """SentencePiece model plus T5's special tokens; ``__call__(texts, max_length) -> (ids, mask)``.

    A ``tokenizer_config.json`` with ``add_bos_token: true`` / ``add_eos_token: false`` (and ``extra_ids: 0``) makes
    it Gemma's (transformers' ``GemmaTokenizer``): ``<bos>`` first, nothing appended."""

    encode_piece: Callable[[str], list[int]]
    specials: dict[str, int]
    pad_id: int
    eos_id: int
    vocab_size: int
    padding_side: str = "right"
    truncation_side: str = "right"
    strip: tuple[str, ...] = field(default=())
    bos_id: int | None = None  # prepended to every row (Gemma)
    add_eos: bool = True

    @classmethod
    def from_dir(cls, path: str | os.PathLike) -> "SpieceTokenizer":
        import sentencepiece as spm

        path = os.fspath(path)
        model_file = os.path.join(path, "spiece.model")
        if not os.path.isfile(model_file):
            raise UserError(f"no spiece.model in tokenizer folder {path!r}")
        try:
            sp = spm.SentencePieceProcessor(model_file=model_file)
        except (OSError, RuntimeError) as e:
            raise UserError(f"tokenizer folder {path!r}: spiece.model is not a SentencePiece model ({e})") from None
        config = read_json(os.path.join(path, "tokenizer_config.json"))
        special_map = read_json(os.path.join(path, "special_tokens_map.json"))
        n = sp.get_piece_size()
        sentinels = extra_ids(path, config, 100)
        specials = {f"<extra_id_{i}>": n + sentinels - 1 - i for i in range(sentinels)}
        names = {}
        add_bos = bool(config.get("add_bos_token", False))
        roles = [("pad_token", "<pad>"), ("eos_token", "</s>"), ("unk_token", "<unk>")]
        for role, default in roles + ([("bos_token", "<s>")] if add_bos else []):
            text = token_text(config.get(role, special_map.get(role)), default)
            tid = sp.piece_to_id(text)
            if tid == sp.unk_id() and text != sp.id_to_piece(sp.unk_id()):
                raise UserError(f"tokenizer folder {path!r}: {role} {text!r} is not in spiece.model")
            specials[text] = tid
            names[role] = text
        for tid, entry in added_tokens(path, config):
            specials[token_text(entry, "")] = tid
        specials.pop("", None)
        padding_side, truncation_side = sides(path, config)
        return cls(
            encode_piece=lambda s: list(sp.encode(s)),
            specials=specials,
            pad_id=specials[names["pad_token"]],
            eos_id=specials[names["eos_token"]],
            vocab_size=max(n + sentinels, max(specials.values()) + 1),
            padding_side=padding_side,
            truncation_side=truncation_side,
            bos_id=specials[names["bos_token"]] if add_bos else None,
            add_eos=bool(config.get("add_eos_token", True)),
        )

    def encode(self, text: str) -> list[int]:
        """Token ids of one text without the appended ``</s>``."""
        ids: list[int] = []
        for piece in split_on_specials(text, self.specials, self.strip):
            ids.extend([piece] if isinstance(piece, int) else self.encode_piece(piece))
        return ids

    def __call__(self, texts: str | Sequence[str], max_length: int) -> tuple[np.ndarray, np.ndarray]:
        """Tokenize ``texts`` to ``(ids, mask)``, both int32 of shape (batch, max_length)."""
        if isinstance(texts, str):
            texts = [texts]
        bos = [] if self.bos_id is None else [self.bos_id]
        return pad_batch([bos + self.encode(t) for t in texts], max_length,
                         eos_id=self.eos_id if self.add_eos else None, pad_id=self.pad_id,
                         padding_side=self.padding_side, truncation_side=self.truncation_side)
