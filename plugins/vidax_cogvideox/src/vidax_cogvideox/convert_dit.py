"""diffusers ``CogVideoXTransformer3DModel`` checkpoint keys -> :class:`vidax_cogvideox.dit.CogVideoXDiT`
parameters."""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np
from flax import nnx

from vidax_core.io.convert import KeyRule, convert, linear
from vidax_core.nn.state import abstract_model, materialize

from .dit import CogVideoXDiT, CogVideoXDiTConfig

_B = r"transformer_blocks\.(\d+)\."


def patch_kernel(w: np.ndarray) -> np.ndarray:
    """The 1.0 Conv2d patch weight (D, C, p, p) or the 1.5 Linear weight (D, C*pt*p*p) -> kernel (C*pt*p*p, D)."""
    return w.reshape(w.shape[0], -1).T


def _linear(src: str, dst: str, layer_group: int | None = None) -> list[KeyRule]:
    return [KeyRule(src + r"\.weight", dst + "/kernel", linear, layer_group),
            KeyRule(src + r"\.bias", dst + "/bias", None, layer_group)]


def _norm(src: str, dst: str, layer_group: int | None = None) -> list[KeyRule]:
    return [KeyRule(src + r"\.weight", dst + "/scale", None, layer_group),
            KeyRule(src + r"\.bias", dst + "/bias", None, layer_group)]


def _block_rules() -> list[KeyRule]:
    rules: list[KeyRule] = []
    for norm in ("norm1", "norm2"):
        rules += _linear(rf"{_B}{norm}\.linear", f"blocks/{norm}/linear", 1)
        rules += _norm(rf"{_B}{norm}\.norm", f"blocks/{norm}/norm", 1)
    for proj in ("to_q", "to_k", "to_v"):
        rules += _linear(rf"{_B}attn1\.{proj}", f"blocks/attn1/{proj}", 1)
    rules += _linear(rf"{_B}attn1\.to_out\.0", "blocks/attn1/to_out", 1)
    for norm in ("norm_q", "norm_k"):
        rules += _norm(rf"{_B}attn1\.{norm}", f"blocks/attn1/{norm}", 1)
    rules += _linear(rf"{_B}ff\.net\.0\.proj", "blocks/ff/proj_in", 1)
    rules += _linear(rf"{_B}ff\.net\.2", "blocks/ff/proj_out", 1)
    return rules


DIT_RULES: list[KeyRule] = [
    KeyRule(r"patch_embed\.proj\.weight", "patch_proj/kernel", patch_kernel),
    KeyRule(r"patch_embed\.proj\.bias", "patch_proj/bias"),
    *_linear(r"patch_embed\.text_proj", "text_proj"),
    KeyRule(r"patch_embed\.pos_embedding", "pos_embedding"),
    *_linear(r"time_embedding\.linear_1", "time_embedding/linear_1"),
    *_linear(r"time_embedding\.linear_2", "time_embedding/linear_2"),
    *_linear(r"ofs_embedding\.linear_1", "ofs_embedding/linear_1"),
    *_linear(r"ofs_embedding\.linear_2", "ofs_embedding/linear_2"),
    *_block_rules(),
    *_norm(r"norm_final", "norm_final"),
    *_linear(r"norm_out\.linear", "norm_out_linear"),
    *_norm(r"norm_out\.norm", "norm_out"),
    *_linear(r"proj_out", "proj_out"),
]


def load_dit(cfg: CogVideoXDiTConfig, tensors: Mapping[str, Any], *,
             put: Callable[[tuple, np.ndarray], Any] | None = None) -> CogVideoXDiT:
    """Build a :class:`CogVideoXDiT` from diffusers-named tensors (arrays or lazy loaders) without random init."""
    graphdef, abstract_state, flat = abstract_model(lambda: CogVideoXDiT(cfg, rngs=nnx.Rngs(0)))
    values = convert(tensors, DIT_RULES, flat, component="CogVideoX DiT (transformer)")
    return materialize(graphdef, abstract_state, values, put=put)
