"""diffusers ``CogVideoXTransformer3DModel`` checkpoint keys -> :class:`vidax_cogvideox.dit.CogVideoXDiT`
parameters."""

from __future__ import annotations

import numpy as np

from vidax_core.io.convert import KeyRule
from vidax_core.io.diffusers_rules import (
    attention_rules,
    feedforward_rules,
    linear_rules,
    norm_rules,
)
from vidax_core.io.load import dit_loader

from .dit import CogVideoXDiT

_B = r"transformer_blocks\.(\d+)\."


def patch_kernel(w: np.ndarray) -> np.ndarray:
    """The 1.0 Conv2d patch weight (D, C, p, p) or the 1.5 Linear weight (D, C*pt*p*p) -> kernel (C*pt*p*p, D)."""
    return w.reshape(w.shape[0], -1).T


def _block_rules() -> list[KeyRule]:
    rules: list[KeyRule] = []
    for norm in ("norm1", "norm2"):
        rules += linear_rules(rf"{_B}{norm}\.linear", f"blocks/{norm}/linear", 1)
        rules += norm_rules(rf"{_B}{norm}\.norm", f"blocks/{norm}/norm", 1)
    rules += attention_rules(rf"{_B}attn1", "blocks/attn1", 1, qk_norm="layer_norm")
    rules += feedforward_rules(rf"{_B}ff", "blocks/ff", 1)
    return rules


DIT_RULES: list[KeyRule] = [
    KeyRule(r"patch_embed\.proj\.weight", "patch_proj/kernel", patch_kernel),
    KeyRule(r"patch_embed\.proj\.bias", "patch_proj/bias"),
    *linear_rules(r"patch_embed\.text_proj", "text_proj"),
    KeyRule(r"patch_embed\.pos_embedding", "pos_embedding"),
    *linear_rules(r"time_embedding\.linear_1", "time_embedding/linear_1"),
    *linear_rules(r"time_embedding\.linear_2", "time_embedding/linear_2"),
    *linear_rules(r"ofs_embedding\.linear_1", "ofs_embedding/linear_1"),
    *linear_rules(r"ofs_embedding\.linear_2", "ofs_embedding/linear_2"),
    *_block_rules(),
    *norm_rules(r"norm_final", "norm_final"),
    *linear_rules(r"norm_out\.linear", "norm_out_linear"),
    *norm_rules(r"norm_out\.norm", "norm_out"),
    *linear_rules(r"proj_out", "proj_out"),
]


load_dit = dit_loader(CogVideoXDiT, DIT_RULES, component="CogVideoX DiT (transformer)")
