"""The toy prompt encoder: UTF-8 bytes -> embedding table -> tanh(Linear), one vector per token, padding zeroed.

Real families reuse the core's encoders (``vidax_core.encoders``: UMT5, CLIP, decoder LLMs) and its tokenizer
(``vidax_core.encoders.tokenizer``); the toy has a byte tokenizer of its own so it needs no vocabulary file. It
runs in numpy: the encoder runs once per video, before the denoiser is placed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from jax import ShapeDtypeStruct

from vidax_core import KeyRule, convert, linear

PAD_ID = 0  # token id = byte value + 1; 0 is padding

TEXT_RULES = [
    KeyRule(r"embed_tokens\.weight", "embed_tokens"),
    KeyRule(r"proj\.weight", "proj/kernel", linear),
    KeyRule(r"proj\.bias", "proj/bias"),
]


def tokenize(prompts: Sequence[str], max_length: int) -> tuple[np.ndarray, np.ndarray]:
    """Prompts -> (ids, mask), int32 (len(prompts), max_length): UTF-8 bytes + 1, truncated, right-padded."""
    ids = np.full((len(prompts), max_length), PAD_ID, np.int32)
    for row, text in enumerate(prompts):
        data = np.frombuffer(text.encode("utf-8"), np.uint8)[:max_length]
        ids[row, : len(data)] = data.astype(np.int32) + 1
    return ids, (ids != PAD_ID).astype(np.int32)


def checkpoint_shapes(config: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    v, d = config["vocab_size"], config["hidden_size"]
    return {"embed_tokens.weight": (v, d), "proj.weight": (d, d), "proj.bias": (d,)}


@dataclass(frozen=True)
class ByteTextEncoder:
    embed_tokens: np.ndarray  # (vocab, dim)
    kernel: np.ndarray  # (dim, dim)
    bias: np.ndarray  # (dim,)

    @classmethod
    def load(cls, config: Mapping[str, Any], tensors: Mapping[str, Any]) -> ByteTextEncoder:
        # convert() also serves components that are not NNX modules: describe the expected arrays as an
        # abstract tree and every missing / unexpected / mis-shaped tensor is reported at once.
        v, d = config["vocab_size"], config["hidden_size"]
        abstract = {
            ("embed_tokens",): ShapeDtypeStruct((v, d), np.float32),
            ("proj", "kernel"): ShapeDtypeStruct((d, d), np.float32),
            ("proj", "bias"): ShapeDtypeStruct((d,), np.float32),
        }
        w = convert(tensors, TEXT_RULES, abstract, component="text_encoder")
        return cls(w[("embed_tokens",)], w[("proj", "kernel")], w[("proj", "bias")])

    def __call__(self, prompts: Sequence[str], max_length: int) -> np.ndarray:
        """(len(prompts), max_length, dim) float32."""
        ids, mask = tokenize(prompts, max_length)
        h = np.tanh(self.embed_tokens[ids] @ self.kernel + self.bias)
        return (h * mask[..., None]).astype(np.float32)
