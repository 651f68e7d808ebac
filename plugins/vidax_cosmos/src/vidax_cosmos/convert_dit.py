"""diffusers ``CosmosTransformer3DModel`` checkpoint keys -> :class:`vidax_cosmos.dit.CosmosDiT` parameters."""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np
from flax import nnx

from vidax_core.io.convert import KeyRule, convert, linear
from vidax_core.nn.state import abstract_model, materialize

from .dit import CosmosDiT, CosmosDiTConfig

_B = r"transformer_blocks\.(\d+)\."


def _linear(src: str, dst: str, layer_group: int | None = None, bias: bool = False) -> list[KeyRule]:
    rules = [KeyRule(src + r"\.weight", dst + "/kernel", linear, layer_group)]
    if bias:
        rules.append(KeyRule(src + r"\.bias", dst + "/bias", None, layer_group))
    return rules


def _block_rules() -> list[KeyRule]:
    rules: list[KeyRule] = []
    for norm in ("norm1", "norm2", "norm3"):
        for lin in ("linear_1", "linear_2"):
            rules += _linear(rf"{_B}{norm}\.{lin}", f"blocks/{norm}/{lin}", 1)
    for attn in ("attn1", "attn2"):
        for proj in ("to_q", "to_k", "to_v"):
            rules += _linear(rf"{_B}{attn}\.{proj}", f"blocks/{attn}/{proj}", 1)
        rules += _linear(rf"{_B}{attn}\.to_out\.0", f"blocks/{attn}/to_out", 1)
        for norm in ("norm_q", "norm_k"):
            rules.append(KeyRule(rf"{_B}{attn}\.{norm}\.weight", f"blocks/{attn}/{norm}/scale", None, 1))
    rules += _linear(rf"{_B}ff\.net\.0\.proj", "blocks/ff/proj_in", 1)
    rules += _linear(rf"{_B}ff\.net\.2", "blocks/ff/proj_out", 1)
    return rules


DIT_RULES: list[KeyRule] = [
    *_linear(r"patch_embed\.proj", "patch_embed"),
    *_linear(r"time_embed\.t_embedder\.linear_1", "time_linear_1"),
    *_linear(r"time_embed\.t_embedder\.linear_2", "time_linear_2"),
    KeyRule(r"time_embed\.norm\.weight", "time_norm/scale"),
    *_linear(r"crossattn_proj\.0", "crossattn_proj", bias=True),
    *_block_rules(),
    *_linear(r"norm_out\.linear_1", "norm_out/linear_1"),
    *_linear(r"norm_out\.linear_2", "norm_out/linear_2"),
    *_linear(r"proj_out", "proj_out"),
]


def load_dit(cfg: CosmosDiTConfig, tensors: Mapping[str, Any], *,
             put: Callable[[tuple, np.ndarray], Any] | None = None) -> CosmosDiT:
    """Build a :class:`CosmosDiT` from diffusers-named tensors (arrays or lazy loaders) without random init."""
    graphdef, abstract_state, flat = abstract_model(lambda: CosmosDiT(cfg, rngs=nnx.Rngs(0)))
    values = convert(tensors, DIT_RULES, flat, component="Cosmos DiT (transformer)")
    return materialize(graphdef, abstract_state, values, put=put)
