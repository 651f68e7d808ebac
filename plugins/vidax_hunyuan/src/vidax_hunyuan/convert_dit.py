"""diffusers ``HunyuanVideoTransformer3DModel`` checkpoint -> :class:`vidax_hunyuan.dit.HunyuanDiT` parameters.

The single-stream blocks' ``proj_out`` (over the concatenated [attention; MLP] features) is read as two row
blocks, ``out_attn`` and ``out_mlp`` (the core's ``split_single_proj_out``), so each half stays tensor-parallel.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from vidax_core.io.convert import KeyRule, conv, convert
from vidax_core.io.diffusers_rules import (
    attention_rules,
    feedforward_rules,
    linear_rules,
    norm_rules,
    split_single_proj_out,
)
from vidax_core.io.load import dit_loader

from .dit import HunyuanDiT

_D = r"transformer_blocks\.(\d+)\."
_S = r"single_transformer_blocks\.(\d+)\."
_R = r"context_embedder\.token_refiner\.refiner_blocks\.(\d+)\."


def double_rules() -> list[KeyRule]:
    rules = [*linear_rules(_D + r"norm1\.linear", "double_blocks/norm1/linear", 1),
             *linear_rules(_D + r"norm1_context\.linear", "double_blocks/norm1_context/linear", 1)]
    for src, dst in (("to_q", "img/q"), ("to_k", "img/k"), ("to_v", "img/v"), ("add_q_proj", "txt/q"),
                     ("add_k_proj", "txt/k"), ("add_v_proj", "txt/v"), (r"to_out\.0", "img_out"),
                     ("to_add_out", "txt_out")):
        rules += linear_rules(_D + r"attn\." + src, "double_blocks/" + dst, 1)
    for src, dst in (("norm_q", "img/norm_q"), ("norm_k", "img/norm_k"), ("norm_added_q", "txt/norm_q"),
                     ("norm_added_k", "txt/norm_k")):
        rules.append(KeyRule(_D + r"attn\." + src + r"\.weight", f"double_blocks/{dst}/scale", None, 1))
    rules += feedforward_rules(_D + "ff", "double_blocks/ff", 1)
    rules += feedforward_rules(_D + "ff_context", "double_blocks/ff_context", 1)
    return rules


def _single_rules() -> list[KeyRule]:
    rules = [*linear_rules(_S + r"norm\.linear", "single_blocks/norm/linear", 1),
             *linear_rules(_S + "proj_mlp", "single_blocks/proj_mlp", 1),
             *linear_rules(_S + r"proj_out_attn", "single_blocks/out_attn", 1, bias=False),
             *linear_rules(_S + r"proj_out_mlp", "single_blocks/out_mlp", 1)]
    for p in ("q", "k", "v"):
        rules += linear_rules(_S + rf"attn\.to_{p}", f"single_blocks/qkv/{p}", 1)
    for p in ("q", "k"):
        rules.append(KeyRule(_S + rf"attn\.norm_{p}\.weight", f"single_blocks/qkv/norm_{p}/scale", None, 1))
    return rules


def refiner_rules() -> list[KeyRule]:
    rules = attention_rules(_R + "attn", "refiner/blocks/{1}", qk_norm=None)
    for n in ("norm1", "norm2"):
        rules += norm_rules(_R + n, f"refiner/blocks/{{1}}/{n}")
    for src, dst in (("ff.net.0.proj", "ff_in"), ("ff.net.2", "ff_out"), ("norm_out.linear", "ada")):
        rules += linear_rules(_R + re.escape(src), f"refiner/blocks/{{1}}/{dst}")
    return rules


def embedder_rules(src: str, dst: str) -> list[KeyRule]:
    return [*linear_rules(src + r"\.linear_1", dst + "/linear_1"),
            *linear_rules(src + r"\.linear_2", dst + "/linear_2")]


DIT_RULES: list[KeyRule] = [
    KeyRule(r"x_embedder\.proj\.weight", "patch_kernel", conv),
    KeyRule(r"x_embedder\.proj\.bias", "patch_bias"),
    *embedder_rules(r"context_embedder\.time_text_embed\.timestep_embedder", "refiner/timestep_embedder"),
    *embedder_rules(r"context_embedder\.time_text_embed\.text_embedder", "refiner/text_embedder"),
    *linear_rules(r"context_embedder\.proj_in", "refiner/proj_in"),
    *refiner_rules(),
    *embedder_rules(r"time_text_embed\.timestep_embedder", "timestep_embedder"),
    *embedder_rules(r"time_text_embed\.text_embedder", "text_embedder"),
    *embedder_rules(r"time_text_embed\.guidance_embedder", "guidance_embedder"),
    *double_rules(),
    *_single_rules(),
    *linear_rules(r"norm_out\.linear", "norm_out/linear"),
    *linear_rules(r"proj_out", "proj_out"),
]


def convert_dit(tensors: Mapping[str, Any], abstract: Mapping, **kw: Any) -> dict:
    """diffusers-named tensors -> {param path: numpy} on ``abstract`` (every problem reported at once)."""
    dim = abstract[("patch_bias",)].shape[0]
    return convert(split_single_proj_out(tensors, dim), DIT_RULES, abstract,
                   component="HunyuanVideo DiT (transformer)", **kw)


load_dit = dit_loader(HunyuanDiT, DIT_RULES, component="HunyuanVideo DiT (transformer)",
                      prepare=lambda tensors, cfg: split_single_proj_out(tensors, cfg.dim))
