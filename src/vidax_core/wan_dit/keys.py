"""diffusers ``WanTransformer3DModel`` checkpoint -> :class:`vidax_core.wan_dit.model.WanDiT` parameters."""

from __future__ import annotations

import numpy as np

from vidax_core.io.convert import KeyRule, conv, squeeze
from vidax_core.io.diffusers_rules import (
    attention_rules,
    feedforward_rules,
    linear_rules,
    norm_rules,
)
from vidax_core.io.load import dit_loader

from .model import WanDiT

_B = r"blocks\.(\d+)\."


def _drop_lead(w: np.ndarray) -> np.ndarray:
    """(1, L, D) -> (L, D) (the FLF2V image pos_embed; ``squeeze`` would also drop a length-1 L or D)."""
    return w.reshape(w.shape[-2:])


def _block_rules() -> list[KeyRule]:
    qk = dict(qk_norm="rms_norm_across_heads")
    rules = attention_rules(rf"{_B}attn1", "blocks/attn1", 1, **qk)
    # I2V: image key/value projections of the cross-attention (absent, and so unexpected, in T2V models).
    rules += attention_rules(rf"{_B}attn2", "blocks/attn2", 1, added_kv=True, **qk)
    rules += norm_rules(rf"{_B}norm2", "blocks/norm2", 1)
    rules.append(KeyRule(rf"{_B}scale_shift_table", "blocks/scale_shift_table", squeeze, 1))
    rules += feedforward_rules(rf"{_B}ffn", "blocks/ffn", 1)
    return rules


DIT_RULES: list[KeyRule] = [
    KeyRule(r"patch_embedding\.weight", "patch_kernel", conv),
    KeyRule(r"patch_embedding\.bias", "patch_bias"),
    *linear_rules(r"condition_embedder\.time_embedder\.linear_1", "time_linear_1"),
    *linear_rules(r"condition_embedder\.time_embedder\.linear_2", "time_linear_2"),
    *linear_rules(r"condition_embedder\.time_proj", "time_proj"),
    *linear_rules(r"condition_embedder\.text_embedder\.linear_1", "text_linear_1"),
    *linear_rules(r"condition_embedder\.text_embedder\.linear_2", "text_linear_2"),
    # I2V image embedder (WanImageEmbedding): norm1 -> ff (GELU proj, Linear) -> norm2, FLF2V pos_embed (1, L, D).
    KeyRule(r"condition_embedder\.image_embedder\.norm1\.weight", "image_norm1/scale"),
    KeyRule(r"condition_embedder\.image_embedder\.norm1\.bias", "image_norm1/bias"),
    *linear_rules(r"condition_embedder\.image_embedder\.ff\.net\.0\.proj", "image_linear_1"),
    *linear_rules(r"condition_embedder\.image_embedder\.ff\.net\.2", "image_linear_2"),
    KeyRule(r"condition_embedder\.image_embedder\.norm2\.weight", "image_norm2/scale"),
    KeyRule(r"condition_embedder\.image_embedder\.norm2\.bias", "image_norm2/bias"),
    KeyRule(r"condition_embedder\.image_embedder\.pos_embed", "image_pos_embed", _drop_lead),
    *_block_rules(),
    *linear_rules(r"proj_out", "proj_out"),
    KeyRule(r"scale_shift_table", "scale_shift_table", squeeze),
]

#: Source keys dropped on purpose: diffusers' ``_keys_to_ignore_on_load_unexpected = ["norm_added_q"]`` (some I2V
#: checkpoints carry an unused image query norm). Pass as ``convert(..., ignore=DIT_IGNORE)``.
DIT_IGNORE: tuple[str, ...] = (r"(.*\.)?norm_added_q\.(weight|bias)",)


load_dit = dit_loader(WanDiT, DIT_RULES, component="Wan DiT (transformer)", ignore=DIT_IGNORE)
