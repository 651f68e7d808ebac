"""diffusers ``LTXVideoTransformer3DModel`` checkpoint keys -> :class:`vidax_ltx.dit.LTXDiT` parameters."""

from __future__ import annotations

from vidax_core.io.convert import KeyRule
from vidax_core.io.diffusers_rules import (
    attention_rules,
    feedforward_rules,
    linear_rules,
)
from vidax_core.io.load import dit_loader

from .dit import LTXDiT

_B = r"transformer_blocks\.(\d+)\."


def _block_rules() -> list[KeyRule]:
    rules: list[KeyRule] = []
    for attn in ("attn1", "attn2"):
        rules += attention_rules(rf"{_B}{attn}", f"blocks/{attn}", 1, qk_norm="rms_norm_across_heads")
    rules += feedforward_rules(rf"{_B}ff", "blocks/ff", 1)
    rules.append(KeyRule(rf"{_B}scale_shift_table", "blocks/scale_shift_table", None, 1))
    return rules


DIT_RULES: list[KeyRule] = [
    *linear_rules(r"proj_in", "proj_in"),
    *linear_rules(r"time_embed\.emb\.timestep_embedder\.linear_1", "time_embed/timestep_embedder/linear_1"),
    *linear_rules(r"time_embed\.emb\.timestep_embedder\.linear_2", "time_embed/timestep_embedder/linear_2"),
    *linear_rules(r"time_embed\.linear", "time_embed/linear"),
    *linear_rules(r"caption_projection\.linear_1", "caption_linear_1"),
    *linear_rules(r"caption_projection\.linear_2", "caption_linear_2"),
    *_block_rules(),
    *linear_rules(r"proj_out", "proj_out"),
    KeyRule(r"scale_shift_table", "scale_shift_table"),
]


load_dit = dit_loader(LTXDiT, DIT_RULES, component="LTX-Video DiT (transformer)")
