"""diffusers ``WanTransformer3DModel`` checkpoint -> :class:`vidax_wan.dit.WanDiT` parameters."""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np
from flax import nnx

from vidax_core.convert import KeyRule, conv, convert, linear, squeeze
from vidax_core.nnx_util import abstract_model, materialize

from .dit import WanDiT, WanDiTConfig

_B = r"blocks\.(\d+)\."


def _linear_rules(src: str, dst: str, layer_group: int | None = None) -> list[KeyRule]:
    return [
        KeyRule(src + r"\.weight", dst + "/kernel", linear, layer_group),
        KeyRule(src + r"\.bias", dst + "/bias", None, layer_group),
    ]


def _block_rules() -> list[KeyRule]:
    rules: list[KeyRule] = []
    for attn in ("attn1", "attn2"):
        for proj in ("to_q", "to_k", "to_v"):
            rules += _linear_rules(rf"{_B}{attn}\.{proj}", f"blocks/{attn}/{proj}", layer_group=1)
        rules += _linear_rules(rf"{_B}{attn}\.to_out\.0", f"blocks/{attn}/to_out", layer_group=1)
        for norm in ("norm_q", "norm_k"):
            rules.append(KeyRule(rf"{_B}{attn}\.{norm}\.weight", f"blocks/{attn}/{norm}/scale", None, 1))
    rules += [
        KeyRule(rf"{_B}norm2\.weight", "blocks/norm2/scale", None, 1),
        KeyRule(rf"{_B}norm2\.bias", "blocks/norm2/bias", None, 1),
        KeyRule(rf"{_B}scale_shift_table", "blocks/scale_shift_table", squeeze, 1),
    ]
    rules += _linear_rules(rf"{_B}ffn\.net\.0\.proj", "blocks/ffn/proj_in", layer_group=1)
    rules += _linear_rules(rf"{_B}ffn\.net\.2", "blocks/ffn/proj_out", layer_group=1)
    return rules


DIT_RULES: list[KeyRule] = [
    KeyRule(r"patch_embedding\.weight", "patch_kernel", conv),
    KeyRule(r"patch_embedding\.bias", "patch_bias"),
    *_linear_rules(r"condition_embedder\.time_embedder\.linear_1", "time_linear_1"),
    *_linear_rules(r"condition_embedder\.time_embedder\.linear_2", "time_linear_2"),
    *_linear_rules(r"condition_embedder\.time_proj", "time_proj"),
    *_linear_rules(r"condition_embedder\.text_embedder\.linear_1", "text_linear_1"),
    *_linear_rules(r"condition_embedder\.text_embedder\.linear_2", "text_linear_2"),
    *_block_rules(),
    *_linear_rules(r"proj_out", "proj_out"),
    KeyRule(r"scale_shift_table", "scale_shift_table", squeeze),
]


def load_dit(
    cfg: WanDiTConfig,
    tensors: Mapping[str, Any],
    *,
    put: Callable[[tuple, np.ndarray], Any] | None = None,
    on_tensor: Callable[[str, int], None] | None = None,
) -> WanDiT:
    """Build a :class:`WanDiT` from diffusers-named tensors (arrays or zero-arg loaders) without random init."""
    graphdef, abstract_state, flat = abstract_model(lambda: WanDiT(cfg, rngs=nnx.Rngs(0)))
    values = convert(tensors, DIT_RULES, flat, component="Wan DiT (transformer)", on_tensor=on_tensor)
    return materialize(graphdef, abstract_state, values, put=put)
