"""SANA-Video's key table: diffusers' ``SanaVideoTransformer3DModel`` state dict onto :class:`.dit.SanaVideoDiT`.

One table serves every variant: rules whose keys a checkpoint does not have (attention biases without
``attention_bias``, ``norm2`` without ``norm_elementwise_affine``, the q/k norms' biases of ``qk_norm="layer_norm"``)
match nothing, and the abstract tree has no such leaf either."""

from __future__ import annotations

from vidax_core import KeyRule, attention_rules, conv, glumb_conv_rules, linear_rules, norm_rules

_B = r"transformer_blocks\.(\d+)\."

DIT_RULES: list[KeyRule] = [
    KeyRule(r"patch_embedding\.weight", "patch_kernel", conv),
    KeyRule(r"patch_embedding\.bias", "patch_bias"),
    *linear_rules(r"time_embed\.emb\.timestep_embedder\.linear_1", "time_embed/timestep_embedder/linear_1"),
    *linear_rules(r"time_embed\.emb\.timestep_embedder\.linear_2", "time_embed/timestep_embedder/linear_2"),
    *linear_rules(r"time_embed\.linear", "time_embed/linear"),
    *linear_rules(r"caption_projection\.linear_1", "caption_linear_1"),
    *linear_rules(r"caption_projection\.linear_2", "caption_linear_2"),
    *norm_rules(r"caption_norm", "caption_norm", bias=False),
    KeyRule(_B + r"scale_shift_table", "blocks/scale_shift_table", None, 1),
    *attention_rules(_B + "attn1", "blocks/attn1", 1, qk_norm="layer_norm"),
    *attention_rules(_B + "attn2", "blocks/attn2", 1, qk_norm="layer_norm"),
    KeyRule(_B + r"norm2\.weight", "blocks/norm2_scale", None, 1),
    KeyRule(_B + r"norm2\.bias", "blocks/norm2_bias", None, 1),
    *glumb_conv_rules(_B + "ff", "blocks/ff", 1),
    KeyRule(r"scale_shift_table", "scale_shift_table"),
    *linear_rules(r"proj_out", "proj_out"),
]
