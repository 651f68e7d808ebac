"""diffusers ``MotifVideoTransformer3DModel`` checkpoint -> :class:`vidax_motif.dit.MotifDiT` parameters.

The table depends on the config (:func:`dit_rules`): which q/k norms exist (``qk_norm``), whether the blocks carry a
text cross-attention, and where the single-stream blocks split into the encoder stack (``single_blocks``) and the
DDT decoder stack (``decoder_blocks``: the checkpoint's last ``num_decoder_layers`` single blocks, renumbered from
0 by a ``layer_offset`` rule). A single block's ``proj_out`` (over the concatenated [attention; MLP] features) is read
as two row blocks, ``out_attn`` and ``out_mlp`` (the core's ``split_single_proj_out``), so each half stays
tensor-parallel.
The dual blocks' conditioning-stream projections (``add_q_proj``... , ``norm_added_q``...) land on ``attn_context``.
"""

from __future__ import annotations

from typing import Any, Mapping

from vidax_core.io.convert import KeyRule, conv, convert
from vidax_core.io.diffusers_rules import (attention_rules, feedforward_rules, linear_rules, norm_rules,
                                           split_single_proj_out)

from .dit import MotifDiTConfig

_D = r"transformer_blocks\.(\d+)\."
_S = r"single_transformer_blocks\.(\d+)\."


def _qkv(src: str, dst: str, names: tuple[str, ...], norms: tuple[str, ...], qk: str | None) -> list[KeyRule]:
    """One stream's q/k/v projections (``names``) and, with a ``qk`` norm kind, its q/k norms (``norms``)."""
    rules: list[KeyRule] = []
    for theirs, ours in zip(names, ("to_q", "to_k", "to_v")):
        rules += linear_rules(src + theirs, f"{dst}/{ours}", 1)
    if qk is not None:
        for theirs, ours in zip(norms, ("norm_q", "norm_k")):
            rules += norm_rules(src + theirs, f"{dst}/{ours}", 1, bias=qk == "layer_norm")
    return rules


def _offset(rules: list[KeyRule], offset: int) -> list[KeyRule]:
    """The rules for blocks numbered from ``offset`` on in the checkpoint (layer 0 of their stack)."""
    return [KeyRule(r.source, r.target, r.transform, r.layer_group, offset) for r in rules]


def _dual(cfg: MotifDiTConfig) -> list[KeyRule]:
    g = "dual_blocks"
    rules = [*linear_rules(_D + r"norm1\.linear", f"{g}/norm1/linear", 1),
             *linear_rules(_D + r"norm1_context\.linear", f"{g}/norm1_context/linear", 1),
             *_qkv(_D + r"attn\.", f"{g}/attn", ("to_q", "to_k", "to_v"), ("norm_q", "norm_k"), cfg.qk),
             *_qkv(_D + r"attn\.", f"{g}/attn_context", ("add_q_proj", "add_k_proj", "add_v_proj"),
                   ("norm_added_q", "norm_added_k"), "rms_norm"),
             *linear_rules(_D + r"attn\.to_out\.0", f"{g}/to_out", 1),
             *linear_rules(_D + r"attn\.to_add_out", f"{g}/to_add_out", 1),
             *feedforward_rules(_D + "ff", f"{g}/ff", 1),
             *feedforward_rules(_D + "ff_context", f"{g}/ff_context", 1)]
    if cfg.enable_text_cross_attention_dual:
        rules += attention_rules(_D + "cross_attn", f"{g}/cross_attn", 1, qk_norm=cfg.qk)
    return rules


def _single(cfg: MotifDiTConfig, group: str, offset: int, cross: bool) -> list[KeyRule]:
    rules = [*linear_rules(_S + r"norm\.linear", f"{group}/norm/linear", 1),
             *linear_rules(_S + "proj_mlp", f"{group}/proj_mlp", 1),
             *linear_rules(_S + "proj_out_attn", f"{group}/out_attn", 1, bias=False),
             *linear_rules(_S + "proj_out_mlp", f"{group}/out_mlp", 1),
             *_qkv(_S + r"attn\.", f"{group}/attn", ("to_q", "to_k", "to_v"), ("norm_q", "norm_k"), cfg.qk)]
    if cross:
        rules += attention_rules(_S + "cross_attn", f"{group}/cross_attn", 1, qk_norm=cfg.qk)
    return _offset(rules, offset) if offset else rules


def dit_rules(cfg: MotifDiTConfig) -> list[KeyRule]:
    """The key table of a checkpoint with config ``cfg`` (decoder rules first: they match from their offset on)."""
    rules = [
        KeyRule(r"x_embedder\.proj\.weight", "patch_kernel", conv),
        KeyRule(r"x_embedder\.proj\.bias", "patch_bias"),
        *linear_rules(r"context_embedder\.linear_1", "context_embedder/linear_1"),
        *linear_rules(r"context_embedder\.linear_2", "context_embedder/linear_2"),
        *linear_rules(r"time_text_embed\.timestep_embedder\.linear_1", "timestep_embedder/linear_1"),
        *linear_rules(r"time_text_embed\.timestep_embedder\.linear_2", "timestep_embedder/linear_2"),
        *linear_rules(r"norm_out\.linear", "norm_out/linear"),
        *linear_rules(r"proj_out", "proj_out"),
    ]
    if cfg.image_embed_dim is not None:
        rules += [*norm_rules(r"image_embedder\.norm_in", "image_embedder/norm_in"),
                  *linear_rules(r"image_embedder\.linear_1", "image_embedder/linear_1"),
                  *linear_rules(r"image_embedder\.linear_2", "image_embedder/linear_2"),
                  *norm_rules(r"image_embedder\.norm_out", "image_embedder/norm_out")]
    if cfg.num_decoder_layers:
        rules += _single(cfg, "decoder_blocks", cfg.num_encoder_single, cross=False)
    rules += _single(cfg, "single_blocks", 0, cross=cfg.enable_text_cross_attention_single)
    rules += _dual(cfg)
    return rules


def convert_dit(cfg: MotifDiTConfig, tensors: Mapping[str, Any], abstract: Mapping, **kw: Any) -> dict:
    """diffusers-named tensors -> {param path: numpy} on ``abstract`` (every problem reported at once)."""
    return convert(split_single_proj_out(tensors, cfg.dim), dit_rules(cfg), abstract,
                   component="Motif-Video DiT (transformer)", **kw)
