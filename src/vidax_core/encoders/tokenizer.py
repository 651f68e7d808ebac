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
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from tokenizers import Tokenizer

from vidax_core.errors import UserError


def _read_json(path: str) -> dict[str, Any]:
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return data if isinstance(data, dict) else {}


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
        tokenizer = Tokenizer.from_file(tok_file)
        config = _read_json(os.path.join(path, "tokenizer_config.json"))
        special = _read_json(os.path.join(path, "special_tokens_map.json"))
        with open(tok_file, encoding="utf-8") as f:
            padding_cfg = json.load(f).get("padding") or {}

        candidates = [_token_content(config.get("pad_token")), _token_content(special.get("pad_token"))]
        candidates.append(padding_cfg.get("pad_token"))
        pad_token = pad_id = None
        for cand in candidates:
            if cand is not None and tokenizer.token_to_id(cand) is not None:
                pad_token, pad_id = cand, tokenizer.token_to_id(cand)
                break
        if pad_token is None:
            raise UserError(
                f"tokenizer folder {path!r} names no pad token known to its tokenizer.json "
                "(looked at tokenizer_config.json, special_tokens_map.json and tokenizer.json's padding)"
            )
        padding_side = config.get("padding_side", "right")
        truncation_side = config.get("truncation_side", "right")
        for name, side in (("padding_side", padding_side), ("truncation_side", truncation_side)):
            if side not in ("left", "right"):
                raise UserError(f"tokenizer folder {path!r}: {name} must be 'left' or 'right', got {side!r}")
        return cls(tokenizer, int(pad_id), pad_token, padding_side, truncation_side)

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    def __call__(self, texts: str | Sequence[str], max_length: int) -> tuple[np.ndarray, np.ndarray]:
        """Tokenize ``texts`` to ``(ids, mask)``, both int32 of shape (batch, max_length)."""
        if isinstance(texts, str):
            texts = [texts]
        tok = self.tokenizer  # configured per call: Tokenizer settings are cheap to set and per-instance
        tok.enable_truncation(max_length, stride=0, strategy="longest_first", direction=self.truncation_side)
        tok.enable_padding(
            direction=self.padding_side, pad_id=self.pad_id, pad_token=self.pad_token, length=max_length
        )
        encodings = tok.encode_batch(list(texts), add_special_tokens=True)
        ids = np.asarray([e.ids for e in encodings], dtype=np.int32).reshape(len(encodings), max_length)
        mask = np.asarray([e.attention_mask for e in encodings], dtype=np.int32).reshape(len(encodings), max_length)
        return ids, mask
