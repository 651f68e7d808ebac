"""Wan's prompt encoding: the reference's prompt cleaning, then UMT5-XXL in fp32 (the reference's precision)."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np


def prompt_clean(text: str) -> str:
    """The reference pipeline's prompt cleaning (HTML unescape twice, collapse whitespace)."""
    return re.sub(r"\s+", " ", html.unescape(html.unescape(text)).strip()).strip()


@dataclass
class WanTextEncoder:
    tokenizer: Any
    encoder: Any
    encode_fn: Callable


def load(ckpt, mesh) -> WanTextEncoder:
    """UMT5-XXL, tensor-parallel over the run's ``tp`` axis when tp > 1."""
    from vidax_core import T5Config, TextTokenizer, encode_text, load_t5

    tok = TextTokenizer.from_dir(ckpt.require("tokenizer"))
    cfg = T5Config.from_config({"model_type": "umt5", **ckpt.config("text_encoder")})
    return WanTextEncoder(tok, load_t5(cfg, ckpt.tensors("text_encoder"), mesh=mesh), encode_text)


def encode(encoder: WanTextEncoder, prompts, max_len: int) -> np.ndarray:
    ids, mask = encoder.tokenizer([prompt_clean(p) for p in prompts], max_len)
    return np.asarray(encoder.encode_fn(encoder.encoder, ids, mask, max_len), np.float32)
