"""diffusers ``WanTransformer3DModel`` checkpoint -> :class:`vidax_wan.dit.WanDiT` parameters."""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np
from flax import nnx

from vidax_core.io.convert import KeyRule, conv, convert, linear, squeeze
from vidax_core.nn.state import abstract_model, materialize

from .dit import WanDiT, WanDiTConfig

_B = r"blocks\.(\d+)\."


def _drop_lead(w: np.ndarray) -> np.ndarray:
    """(1, L, D) -> (L, D) (the FLF2V image pos_embed; ``squeeze`` would also drop a length-1 L or D)."""
    return w.reshape(w.shape[-2:])


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
    # I2V: image key/value projections of the cross-attention (absent, and so unexpected, in T2V models).
    for proj in ("add_k_proj", "add_v_proj"):
        rules += _linear_rules(rf"{_B}attn2\.{proj}", f"blocks/attn2/{proj}", layer_group=1)
    rules.append(KeyRule(rf"{_B}attn2\.norm_added_k\.weight", "blocks/attn2/norm_added_k/scale", None, 1))
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
    # I2V image embedder (WanImageEmbedding): norm1 -> ff (GELU proj, Linear) -> norm2, FLF2V pos_embed (1, L, D).
    KeyRule(r"condition_embedder\.image_embedder\.norm1\.weight", "image_norm1/scale"),
    KeyRule(r"condition_embedder\.image_embedder\.norm1\.bias", "image_norm1/bias"),
    *_linear_rules(r"condition_embedder\.image_embedder\.ff\.net\.0\.proj", "image_linear_1"),
    *_linear_rules(r"condition_embedder\.image_embedder\.ff\.net\.2", "image_linear_2"),
    KeyRule(r"condition_embedder\.image_embedder\.norm2\.weight", "image_norm2/scale"),
    KeyRule(r"condition_embedder\.image_embedder\.norm2\.bias", "image_norm2/bias"),
    KeyRule(r"condition_embedder\.image_embedder\.pos_embed", "image_pos_embed", _drop_lead),
    *_block_rules(),
    *_linear_rules(r"proj_out", "proj_out"),
    KeyRule(r"scale_shift_table", "scale_shift_table", squeeze),
]

#: Source keys dropped on purpose: diffusers' ``_keys_to_ignore_on_load_unexpected = ["norm_added_q"]`` (some I2V
#: checkpoints carry an unused image query norm). Pass as ``convert(..., ignore=DIT_IGNORE)``.
DIT_IGNORE: tuple[str, ...] = (r"(.*\.)?norm_added_q\.(weight|bias)",)


def load_dit(
    cfg: WanDiTConfig,
    tensors: Mapping[str, Any],
    *,
    put: Callable[[tuple, np.ndarray], Any] | None = None,
    on_tensor: Callable[[str, int], None] | None = None,
) -> WanDiT:
    """Build a :class:`WanDiT` from diffusers-named tensors (arrays or zero-arg loaders) without random init."""
    graphdef, abstract_state, flat = abstract_model(lambda: WanDiT(cfg, rngs=nnx.Rngs(0)))
    values = convert(
        tensors, DIT_RULES, flat, component="Wan DiT (transformer)", ignore=DIT_IGNORE, on_tensor=on_tensor
    )
    return materialize(graphdef, abstract_state, values, put=put)
