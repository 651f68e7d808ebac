"""Byte-level tokenizer of byT5 (transformers' ``ByT5Tokenizer``): UTF-8 bytes offset by 3 special ids.

Ids 0, 1, 2 are ``<pad>``, ``</s>``, ``<unk>``; byte ``b`` is id ``b + 3``; the ``extra_ids`` sentinels (default
125) follow in order: ``<extra_id_0>`` = 259 ... ``<extra_id_124>`` = 383, so the vocabulary has 384 ids.
Special tokens written in the text map to their ids (whitespace next to ``<pad>``, ``</s>``, ``<unk>`` is
dropped, as their AddedTokens strip), ``</s>`` is appended unless the text already ends with it, truncation
keeps room for it and rows are padded to exactly ``max_length`` on ``padding_side``.

A byT5 tokenizer folder holds only ``tokenizer_config.json`` (``"tokenizer_class": "ByT5Tokenizer"``) and
maybe ``special_tokens_map.json`` / ``added_tokens.json``: :func:`is_byte_tokenizer_dir` recognises it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from vidax_core.encoders.spiece_tokenizer import (added_tokens, extra_ids, pad_batch, read_json, sides,
                                                  split_on_specials, token_text)

OFFSET = 3
NUM_BYTES = 256


def is_byte_tokenizer_dir(path: str | os.PathLike) -> bool:
    """True when ``path``'s ``tokenizer_config.json`` names ``ByT5Tokenizer``."""
    config = read_json(os.path.join(os.fspath(path), "tokenizer_config.json"))
    return str(config.get("tokenizer_class", "")).startswith("ByT5Tokenizer")


@dataclass
class ByteTokenizer:
    """``__call__(texts, max_length) -> (ids, mask)`` like ``ByT5Tokenizer(padding="max_length", truncation=True)``."""

    specials: dict[str, int]
    strip: tuple[str, ...]
    pad_id: int = 0
    eos_id: int = 1
    padding_side: str = "right"
    truncation_side: str = "right"

    @classmethod
    def from_dir(cls, path: str | os.PathLike) -> "ByteTokenizer":
        path = os.fspath(path)
        config = read_json(os.path.join(path, "tokenizer_config.json"))
        added = added_tokens(path, config)
        tok = cls.create(
            # a saved ByT5Tokenizer writes extra_ids=0 and lists its sentinels in added_tokens_decoder instead
            extra_ids=extra_ids(path, config, 0 if added else 125),
            pad_token=token_text(config.get("pad_token"), "<pad>"),
            eos_token=token_text(config.get("eos_token"), "</s>"),
            unk_token=token_text(config.get("unk_token"), "<unk>"),
            sides=sides(path, config),
        )
        for tid, entry in added:
            text = token_text(entry, "")
            if text:
                tok.specials[text] = tid
                if isinstance(entry, dict) and (entry.get("lstrip") or entry.get("rstrip")):
                    tok.strip = tuple(dict.fromkeys(tok.strip + (text,)))
        return tok

    @classmethod
    def create(cls, extra_ids: int = 125, pad_token: str = "<pad>", eos_token: str = "</s>",
               unk_token: str = "<unk>", sides: tuple[str, str] = ("right", "right")) -> "ByteTokenizer":
        specials = {pad_token: 0, eos_token: 1, unk_token: 2}
        specials.update({f"<extra_id_{i}>": OFFSET + NUM_BYTES + i for i in range(extra_ids)})
        return cls(specials, (pad_token, eos_token, unk_token), padding_side=sides[0], truncation_side=sides[1])

    @property
    def vocab_size(self) -> int:
        return max(OFFSET + NUM_BYTES, max(self.specials.values()) + 1)

    def encode(self, text: str) -> list[int]:
        """Token ids of one text without the appended ``</s>``."""
        ids: list[int] = []
        for piece in split_on_specials(text, self.specials, self.strip):
            ids.extend([piece] if isinstance(piece, int) else [b + OFFSET for b in piece.encode("utf-8")])
        return ids

    def __call__(self, texts: str | Sequence[str], max_length: int) -> tuple[np.ndarray, np.ndarray]:
        """Tokenize ``texts`` to ``(ids, mask)``, both int32 of shape (batch, max_length)."""
        if isinstance(texts, str):
            texts = [texts]
        return pad_batch([self.encode(t) for t in texts], max_length, eos_id=self.eos_id, pad_id=self.pad_id,
                         padding_side=self.padding_side, truncation_side=self.truncation_side,
                         skip_eos_if_present=True)
