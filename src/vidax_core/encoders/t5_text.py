"""A T5 prompt encoder as families use it: the checkpoint's tokenizer and ``text_encoder`` T5 tower together.

CogVideoX and LTX-Video encode the padded prompt WITHOUT the attention mask (the reference pipelines do; LTX hands
the mask to its DiT instead); Wan encodes with the mask and zeroes the padding (:func:`encode_text`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np


@dataclass
class T5Text:
    tokenizer: Any  # a vidax_core.encoders.tokenizer.TextTokenizer
    encoder: Any  # a vidax_core.encoders.t5.T5Encoder


def load_t5_text(ckpt: Any, mesh: Any = None, **config: Any) -> T5Text:
    """The checkpoint's ``tokenizer`` and ``text_encoder`` (in the run's encoder dtype, tensor-parallel over
    ``mesh``'s tp axis when it has one);
    ``config`` gives defaults for keys config.json may lack (Wan: ``model_type="umt5"``)."""
    from vidax_core.encoders.t5 import T5Config, load_t5
    from vidax_core.encoders.tokenizer import TextTokenizer

    tok = TextTokenizer.from_dir(ckpt.require("tokenizer"))
    cfg = T5Config.from_config({**config, **ckpt.config("text_encoder")})
    return T5Text(tok, load_t5(cfg, ckpt.tensors("text_encoder"), mesh=mesh))


def encode_unmasked(text: T5Text, prompts: Sequence[str], max_length: int) -> tuple[np.ndarray, np.ndarray]:
    """``(hidden (B, max_length, D) float32, mask (B, max_length) bool)``: the prompts padded to ``max_length``
    and encoded without the attention mask, as ``_get_t5_prompt_embeds`` of CogVideoX and LTX-Video."""
    from vidax_core.encoders.t5 import call_encoder  # jitted once per process

    ids, mask = text.tokenizer(list(prompts), int(max_length))
    hidden = call_encoder(text.encoder, ids)
    return np.asarray(hidden, np.float32), np.asarray(mask).astype(bool)
