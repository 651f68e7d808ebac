"""Motif-Video's prompt encoder, as the pipelines' ``_get_prompt_embeds``: the checkpoint's tokenizer (padded to
``max_sequence_length`` on its padding side, truncated, special tokens added) and T5Gemma2's encoder
(:mod:`vidax_core.encoders.t5gemma2`); the context is its ``last_hidden_state`` with the tokenizer's mask, which
the DiT uses as the text's key mask."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np


@dataclass
class MotifText:
    tokenizer: Any
    model: Any


def load(ckpt: Any, *, dtype: Any = None, mesh: Any = None) -> MotifText:
    """The tokenizer and the T5Gemma2 text tower in ``dtype`` (None: the run's encoder dtype; tensor-parallel over
    ``mesh``'s tp axis)."""
    from vidax_core.encoders.t5gemma2 import load_text
    from vidax_core.encoders.towers import load_tokenizer

    return MotifText(load_tokenizer(ckpt, "tokenizer"),
                     load_text(ckpt.config("text_encoder"), ckpt.tensors("text_encoder"), dtype=dtype, mesh=mesh))


def encode(encoder: MotifText, prompts: Sequence[str], max_length: int) -> dict[str, np.ndarray]:
    """``{"hidden": (B, max_length, hidden) float32, "mask": (B, max_length) int32}``."""
    from vidax_core.encoders.towers import encode_llm

    ids, mask = encoder.tokenizer(list(prompts), int(max_length))
    hidden, mask = encode_llm(encoder.model, ids, mask, layers=-1)
    return {"hidden": hidden, "mask": mask}
