"""Wan's prompt encoding: the reference's prompt cleaning, then UMT5-XXL in fp32 (the reference's precision) with
the mask, the padding zeroed (:func:`vidax_core.encode_text`)."""

from __future__ import annotations

import numpy as np

from vidax_core.encoders.prompt_clean import prompt_clean


def encode(text, prompts, max_len: int) -> np.ndarray:
    """``text`` is the :class:`vidax_core.T5Text` of ``load_t5_text(ckpt, mesh, model_type="umt5")``."""
    from vidax_core import encode_text

    ids, mask = text.tokenizer([prompt_clean(p) for p in prompts], max_len)
    return np.asarray(encode_text(text.encoder, ids, mask, max_len), np.float32)
