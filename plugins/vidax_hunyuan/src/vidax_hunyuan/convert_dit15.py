"""diffusers ``HunyuanVideo15Transformer3DModel`` checkpoint -> :class:`vidax_hunyuan.dit15.HunyuanDiT15` parameters.

The double-stream blocks and the token refiner have 1.0's names (their rules come from
:mod:`vidax_hunyuan.convert_dit`); what is new is the time embedding's prefix (``time_embed``, with the meanflow
``timestep_embedder_r``), the byT5 and image projections and the condition-type table.
"""

from __future__ import annotations

from typing import Any, Mapping

from vidax_core.io.convert import KeyRule, conv, convert
from vidax_core.io.diffusers_rules import linear_rules, norm_rules
from vidax_core.io.load import dit_loader

from .convert_dit import double_rules, embedder_rules, refiner_rules
from .dit15 import HunyuanDiT15

COMPONENT = "HunyuanVideo-1.5 DiT (transformer)"

DIT15_RULES: list[KeyRule] = [
    KeyRule(r"x_embedder\.proj\.weight", "patch_kernel", conv),
    KeyRule(r"x_embedder\.proj\.bias", "patch_bias"),
    *norm_rules(r"image_embedder\.norm_in", "image_embedder/norm_in"),
    *linear_rules(r"image_embedder\.linear_1", "image_embedder/linear_1"),
    *linear_rules(r"image_embedder\.linear_2", "image_embedder/linear_2"),
    *norm_rules(r"image_embedder\.norm_out", "image_embedder/norm_out"),
    *embedder_rules(r"context_embedder\.time_text_embed\.timestep_embedder", "refiner/timestep_embedder"),
    *embedder_rules(r"context_embedder\.time_text_embed\.text_embedder", "refiner/text_embedder"),
    *linear_rules(r"context_embedder\.proj_in", "refiner/proj_in"),
    *refiner_rules(),
    *norm_rules(r"context_embedder_2\.norm", "byt5_embedder/norm"),
    *(r for i in (1, 2, 3) for r in linear_rules(rf"context_embedder_2\.linear_{i}", f"byt5_embedder/linear_{i}")),
    *embedder_rules(r"time_embed\.timestep_embedder", "timestep_embedder"),
    *embedder_rules(r"time_embed\.timestep_embedder_r", "timestep_embedder_r"),
    KeyRule(r"cond_type_embed\.weight", "cond_type_embed"),
    *double_rules(),
    *linear_rules(r"norm_out\.linear", "norm_out/linear"),
    *linear_rules(r"proj_out", "proj_out"),
]


def convert_dit15(tensors: Mapping[str, Any], abstract: Mapping, **kw: Any) -> dict:
    """diffusers-named tensors -> {param path: numpy} on ``abstract`` (every problem reported at once)."""
    return convert(tensors, DIT15_RULES, abstract, component=COMPONENT, **kw)


load_dit15 = dit_loader(HunyuanDiT15, DIT15_RULES, component=COMPONENT, name="load_dit15")
