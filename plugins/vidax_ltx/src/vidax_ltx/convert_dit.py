"""diffusers ``LTXVideoTransformer3DModel`` checkpoint keys -> :class:`vidax_ltx.dit.LTXDiT` parameters."""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np
from flax import nnx

from vidax_core.io.convert import KeyRule, convert, linear
from vidax_core.nn.state import abstract_model, materialize

from .dit import LTXDiT, LTXDiTConfig

_B = r"transformer_blocks\.(\d+)\."


def _linear(src: str, dst: str, layer_group: int | None = None) -> list[KeyRule]:
    return [KeyRule(src + r"\.weight", dst + "/kernel", linear, layer_group),
            KeyRule(src + r"\.bias", dst + "/bias", None, layer_group)]


def _block_rules() -> list[KeyRule]:
    rules: list[KeyRule] = []
    for attn in ("attn1", "attn2"):
        for proj in ("to_q", "to_k", "to_v"):
            rules += _linear(rf"{_B}{attn}\.{proj}", f"blocks/{attn}/{proj}", 1)
        rules += _linear(rf"{_B}{attn}\.to_out\.0", f"blocks/{attn}/to_out", 1)
        for norm in ("norm_q", "norm_k"):
            rules.append(KeyRule(rf"{_B}{attn}\.{norm}\.weight", f"blocks/{attn}/{norm}/scale", None, 1))
    rules += _linear(rf"{_B}ff\.net\.0\.proj", "blocks/ff/proj_in", 1)
    rules += _linear(rf"{_B}ff\.net\.2", "blocks/ff/proj_out", 1)
    rules.append(KeyRule(rf"{_B}scale_shift_table", "blocks/scale_shift_table", None, 1))
    return rules


DIT_RULES: list[KeyRule] = [
    *_linear(r"proj_in", "proj_in"),
    *_linear(r"time_embed\.emb\.timestep_embedder\.linear_1", "time_embed/timestep_embedder/linear_1"),
    *_linear(r"time_embed\.emb\.timestep_embedder\.linear_2", "time_embed/timestep_embedder/linear_2"),
    *_linear(r"time_embed\.linear", "time_embed/linear"),
    *_linear(r"caption_projection\.linear_1", "caption_linear_1"),
    *_linear(r"caption_projection\.linear_2", "caption_linear_2"),
    *_block_rules(),
    *_linear(r"proj_out", "proj_out"),
    KeyRule(r"scale_shift_table", "scale_shift_table"),
]


def load_dit(cfg: LTXDiTConfig, tensors: Mapping[str, Any], *, put: Callable[[tuple, np.ndarray], Any] | None = None
             ) -> LTXDiT:
    """Build an :class:`LTXDiT` from diffusers-named tensors (arrays or lazy loaders) without random init."""
    graphdef, abstract_state, flat = abstract_model(lambda: LTXDiT(cfg, rngs=nnx.Rngs(0)))
    values = convert(tensors, DIT_RULES, flat, component="LTX-Video DiT (transformer)")
    return materialize(graphdef, abstract_state, values, put=put)
