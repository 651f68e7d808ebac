"""Text tokenization from a checkpoint's ``tokenizer.json`` with the ``tokenizers`` library (no transformers).

:class:`TextTokenizer` reproduces what transformers' fast tokenizer returns for
``padding="max_length", max_length=N, truncation=True, add_special_tokens=True, return_attention_mask=True``:
the post-processor from ``tokenizer.json`` adds the special tokens (T5 appends ``</s>``), truncation keeps room for
them, and every row is padded to exactly ``N`` with the pad token named by ``tokenizer_config.json`` /
``special_tokens_map.json`` (or, failing those, by ``tokenizer.json``'s own padding settings).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
from tokenizers import Tokenizer

from vidax_core.errors import UserError
from vidax_core.io.checkpoint import read_json_file


def _read_json(path: str) -> dict[str, Any]:
    if not os.path.lexists(path):
        return {}
    data = read_json_file(path)
    return data if isinstance(data, dict) else {}


def _native(fn: Callable[[], Any], what: str) -> Any:
    """Run a call into the Rust ``tokenizers`` library; any failure of it, a panic included, is one UserError.

    A Rust panic prints its message and backtrace straight to file descriptor 2 before Python sees it, so fd 2
    is pointed at a scratch file for the duration of the call (and shown only as the error's first line).
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as scratch:
        os.dup2(scratch.fileno(), 2)
        try:
            return fn()
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # pyo3's PanicException derives from BaseException
            detail = " ".join(str(exc).split())[:160] or type(exc).__name__
            raise UserError(f"{what}: {detail}: fix or re-download the tokenizer files") from None
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def _check_tokenizer_json(path: str, data: Any) -> None:
    """The parts of tokenizer.json the Rust loader trusts: checked here so a bad value is a clear line."""
    if not isinstance(data, dict):
        raise UserError(f"{path} must hold a JSON object (a fast-tokenizer tokenizer.json)")
    if not isinstance(data.get("model"), dict):
        raise UserError(f"{path} has no tokenizer model (key 'model' must be an object): re-download it")
    added = data.get("added_tokens", [])
    if added is not None and (not isinstance(added, list) or not all(
        isinstance(t, dict) and isinstance(t.get("content"), str) and type(t.get("id")) is int and t["id"] >= 0
        for t in added
    )):
        raise UserError(f"{path}: added_tokens must be a list of {{id, content, ...}} objects")
    for key in ("truncation", "padding"):
        sub = data.get(key)
        if sub is None:
            continue
        if not isinstance(sub, dict):
            raise UserError(f"{path}: {key} must be null or an object")
        for k, v in sub.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and not 0 <= v < 2**31:
                raise UserError(f"{path}: {key}.{k} must be a non-negative integer, got {str(v)[:40]}")


def _token_content(tok: Any) -> str | None:
    """A special-token entry is either a string or an AddedToken dict ``{"content": ...}``."""
    if isinstance(tok, str):
        return tok
    if isinstance(tok, dict) and isinstance(tok.get("content"), str):
        return tok["content"]
    return None


@dataclass
class TextTokenizer:
    """A ``tokenizers.Tokenizer`` plus the pad token and padding/truncation sides a checkpoint asks for."""

    tokenizer: Tokenizer
    pad_id: int
    pad_token: str
    padding_side: str = "right"
    truncation_side: str = "right"

    @classmethod
    def from_dir(cls, path: str | os.PathLike) -> "TextTokenizer":
        path = os.fspath(path)
        tok_file = os.path.join(path, "tokenizer.json")
        config = _read_json(os.path.join(path, "tokenizer_config.json"))  # every reader below trusts it: checked here
        special = _read_json(os.path.join(path, "special_tokens_map.json"))
        if not os.path.isfile(tok_file):  # byT5 (bytes) or a bare SentencePiece model (T5 v1.1 repos)
            from vidax_core.encoders.byte_tokenizer import ByteTokenizer, is_byte_tokenizer_dir
            from vidax_core.encoders.spiece_tokenizer import SpieceTokenizer

            if is_byte_tokenizer_dir(path):
                return ByteTokenizer.from_dir(path)  # type: ignore[return-value]
            if os.path.isfile(os.path.join(path, "spiece.model")):
                return SpieceTokenizer.from_dir(path)  # type: ignore[return-value]
            raise UserError(
                f"no tokenizer.json in tokenizer folder {path!r}: the folder must hold a fast-tokenizer "
                "tokenizer.json, a SentencePiece spiece.model, or a tokenizer_config.json naming ByT5Tokenizer"
            )
        data = read_json_file(tok_file)
        return cls.from_json(data, config, special, where=tok_file)

    @classmethod
    def from_json(cls, data: Any, config: dict[str, Any], special: dict[str, Any], *, where: str) -> "TextTokenizer":
        """From a parsed ``tokenizer.json`` with its ``tokenizer_config.json`` / ``special_tokens_map.json`` dicts
        (a release that packs them elsewhere than a folder); ``where`` names them in errors."""
        _check_tokenizer_json(where, data)
        tokenizer = _native(lambda: Tokenizer.from_str(json.dumps(data)), f"{where} cannot be loaded")
        tokenizer.no_padding()  # each call sets its own padding and truncation (a file's length may be absurd)
        tokenizer.no_truncation()
        _native(lambda: tokenizer.encode("A probe, 123 ü.", add_special_tokens=True), f"{where} cannot tokenize")
        padding_cfg = data.get("padding") if isinstance(data.get("padding"), dict) else {}

        candidates = [_token_content(config.get("pad_token")), _token_content(special.get("pad_token"))]
        candidates.append(padding_cfg.get("pad_token"))
        pad_token = pad_id = None
        for cand in candidates:
            if isinstance(cand, str) and tokenizer.token_to_id(cand) is not None:
                pad_token, pad_id = cand, tokenizer.token_to_id(cand)
                break
        if pad_token is None:
            raise UserError(
                f"tokenizer {where!r} names no pad token known to its tokenizer.json "
                "(looked at tokenizer_config.json, special_tokens_map.json and tokenizer.json's padding)"
            )
        padding_side = config.get("padding_side", "right")
        truncation_side = config.get("truncation_side", "right")
        for name, side in (("padding_side", padding_side), ("truncation_side", truncation_side)):
            if side not in ("left", "right"):
                raise UserError(f"tokenizer {where!r}: {name} must be 'left' or 'right', got {side!r}")
        return cls(tokenizer, int(pad_id), pad_token, padding_side, truncation_side)

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    def encode_ids(self, text: str) -> list[int]:
        """The token ids of ``text`` with the special tokens the post-processor adds, neither truncated nor padded
        (transformers' ``tokenizer(text)["input_ids"]``)."""
        tok = self.tokenizer
        tok.no_truncation()
        tok.no_padding()
        return list(_native(lambda: tok.encode(text, add_special_tokens=True), "the prompt cannot be tokenized").ids)

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids``, special tokens kept (transformers' ``decode`` without tokenization-space clean-up)."""
        return _native(lambda: self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=False),
                       "the token ids cannot be decoded")

    def __call__(self, texts: str | Sequence[str], max_length: int) -> tuple[np.ndarray, np.ndarray]:
        """Tokenize ``texts`` to ``(ids, mask)``, both int32 of shape (batch, max_length)."""
        if isinstance(texts, str):
            texts = [texts]
        tok = self.tokenizer  # configured per call: Tokenizer settings are cheap to set and per-instance
        tok.enable_truncation(max_length, stride=0, strategy="longest_first", direction=self.truncation_side)
        tok.enable_padding(
            direction=self.padding_side, pad_id=self.pad_id, pad_token=self.pad_token, length=max_length
        )
        encodings = _native(lambda: tok.encode_batch(list(texts), add_special_tokens=True),
                            "the prompt cannot be tokenized")
        ids = np.asarray([e.ids for e in encodings], dtype=np.int32).reshape(len(encodings), max_length)
        mask = np.asarray([e.attention_mask for e in encodings], dtype=np.int32).reshape(len(encodings), max_length)
        return ids, mask
