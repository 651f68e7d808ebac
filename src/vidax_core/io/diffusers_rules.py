"""Key rules for the module names diffusers uses in every transformer: ``Linear``, norms, ``Attention`` and
``FeedForward``, mapped onto the core blocks' parameter names (:mod:`vidax_core.nn.attention_block`,
:mod:`vidax_core.nn.feedforward`).

``src`` is a regex prefix of the source keys without the trailing dot (e.g.
``r"transformer_blocks\\.(\\d+)\\.attn1"``) and ``dst`` the parameter path it lands on (``"blocks/attn1"``; empty
for a module at the root); ``layer_group`` names the regex group holding the index into a stacked layer axis, as
in :class:`vidax_core.io.convert.KeyRule`.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

import numpy as np

from vidax_core.io.convert import KeyRule, linear


def _at(dst: str, name: str) -> str:
    """``dst/name``, or ``name`` for a module at the root (``dst`` empty)."""
    return f"{dst}/{name}" if dst else name


def linear_rules(src: str, dst: str, layer_group: int | None = None, *, bias: bool = True) -> list[KeyRule]:
    """torch ``Linear`` ``weight`` (out, in) -> ``kernel`` (in, out), ``bias`` -> ``bias``."""
    rules = [KeyRule(src + r"\.weight", _at(dst, "kernel"), linear, layer_group)]
    if bias:
        rules.append(KeyRule(src + r"\.bias", _at(dst, "bias"), None, layer_group))
    return rules


def norm_rules(src: str, dst: str, layer_group: int | None = None, *, bias: bool = True) -> list[KeyRule]:
    """torch ``LayerNorm`` / ``RMSNorm`` ``weight`` -> ``scale`` (and ``bias`` -> ``bias``)."""
    rules = [KeyRule(src + r"\.weight", _at(dst, "scale"), None, layer_group)]
    if bias:
        rules.append(KeyRule(src + r"\.bias", _at(dst, "bias"), None, layer_group))
    return rules


def attention_rules(src: str, dst: str, layer_group: int | None = None, *, bias: bool = True,
                    out_bias: bool | None = None, qk_norm: str | None = "rms_norm",
                    added_kv: bool = False) -> list[KeyRule]:
    """diffusers ``Attention``: ``to_q`` / ``to_k`` / ``to_v``, ``to_out.0``, ``norm_q`` / ``norm_k`` (``qk_norm``
    as the core block names it: the layer-norm kinds have biases, RMS kinds do not, None and ``l2`` have no
    parameter) and, with
    ``added_kv``, ``add_k_proj`` / ``add_v_proj`` / ``norm_added_k``."""
    out_bias = bias if out_bias is None else out_bias
    rules: list[KeyRule] = []
    for proj in ("to_q", "to_k", "to_v"):
        rules += linear_rules(rf"{src}\.{proj}", _at(dst, proj), layer_group, bias=bias)
    rules += linear_rules(rf"{src}\.to_out\.0", _at(dst, "to_out"), layer_group, bias=out_bias)
    norms = ("norm_q", "norm_k")
    if added_kv:
        for proj in ("add_k_proj", "add_v_proj"):
            rules += linear_rules(rf"{src}\.{proj}", _at(dst, proj), layer_group, bias=bias)
        norms += ("norm_added_k",)
    if qk_norm not in (None, "l2"):  # l2 has no parameter
        for norm in norms:
            rules += norm_rules(rf"{src}\.{norm}", _at(dst, norm), layer_group,
                                bias=qk_norm in ("layer_norm", "layer_norm_across_heads"))
    return rules


def feedforward_rules(src: str, dst: str, layer_group: int | None = None, *, bias: bool = True) -> list[KeyRule]:
    """diffusers ``FeedForward`` (GELU flavours): ``net.0.proj`` -> ``proj_in``, ``net.2`` -> ``proj_out``."""
    return [*linear_rules(rf"{src}\.net\.0\.proj", _at(dst, "proj_in"), layer_group, bias=bias),
            *linear_rules(rf"{src}\.net\.2", _at(dst, "proj_out"), layer_group, bias=bias)]


_SINGLE_OUT = re.compile(r"(single_transformer_blocks\.\d+\.)proj_out\.(weight|bias)")


def split_single_proj_out(tensors: Mapping[str, Any], dim: int) -> dict[str, Any]:
    """A lazy view of ``tensors`` where each of diffusers' single-stream blocks' ``proj_out`` (over the concatenated
    [attention; MLP] features: ``weight`` (dim, dim + mlp)) becomes two row blocks, ``proj_out_attn.weight`` (its
    first ``dim`` input columns) and ``proj_out_mlp.weight`` (the rest, with the bias as ``proj_out_mlp.bias``), so a
    model can keep both halves tensor-parallel (HunyuanVideo, Motif-Video). An 8-bit tensor keeps its per-output-row
    scale."""
    from vidax_core.quant.source import Quantized

    def load(v):
        return np.asarray(v() if callable(v) else v)

    out: dict[str, Any] = {}
    for key, v in tensors.items():
        m = _SINGLE_OUT.fullmatch(key)
        if m is None:
            out[key] = v
        elif m.group(2) == "bias":
            out[m.group(1) + "proj_out_mlp.bias"] = v
        elif isinstance(v, Quantized):
            out[m.group(1) + "proj_out_attn.weight"] = v.with_data(lambda w: w[:, :dim])
            out[m.group(1) + "proj_out_mlp.weight"] = v.with_data(lambda w: w[:, dim:])
        else:
            out[m.group(1) + "proj_out_attn.weight"] = lambda v=v: load(v)[:, :dim]
            out[m.group(1) + "proj_out_mlp.weight"] = lambda v=v: load(v)[:, dim:]
    return out
