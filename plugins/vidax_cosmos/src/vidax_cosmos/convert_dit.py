"""diffusers ``CosmosTransformer3DModel`` checkpoint keys -> :class:`vidax_cosmos.dit.CosmosDiT` parameters."""

from __future__ import annotations

from vidax_core.io.convert import KeyRule
from vidax_core.io.diffusers_rules import (
    attention_rules,
    feedforward_rules,
    linear_rules,
)
from vidax_core.io.load import dit_loader

from .dit import CosmosDiT

_B = r"transformer_blocks\.(\d+)\."


def _linear(src: str, dst: str, layer_group: int | None = None, bias: bool = False) -> list[KeyRule]:
    return linear_rules(src, dst, layer_group, bias=bias)  # Cosmos' linears have no bias unless said


def _block_rules() -> list[KeyRule]:
    rules: list[KeyRule] = []
    for norm in ("norm1", "norm2", "norm3"):
        for lin in ("linear_1", "linear_2"):
            rules += _linear(rf"{_B}{norm}\.{lin}", f"blocks/{norm}/{lin}", 1)
    for attn in ("attn1", "attn2"):
        rules += attention_rules(rf"{_B}{attn}", f"blocks/{attn}", 1, bias=False, qk_norm="rms_norm")
    rules += feedforward_rules(rf"{_B}ff", "blocks/ff", 1, bias=False)
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


load_dit = dit_loader(CosmosDiT, DIT_RULES, component="Cosmos DiT (transformer)")
