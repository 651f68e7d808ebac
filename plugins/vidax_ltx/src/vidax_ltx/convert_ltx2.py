"""diffusers ``LTX2VideoTransformer3DModel`` checkpoint keys -> :class:`vidax_ltx.ltx2_dit.LTX2DiT` parameters.

One table serves every generation: rules for parts a config does not have (gates, prompt AdaLN, caption
projections, keyframe embedding, FFN biases) simply find no target, and the core reports any key the model built
from the same config.json does not expect. The original single-file layout (``model.diffusion_model.*`` keys, the
text connectors inside) reads through :func:`original_dit_key`, diffusers' renaming of LTX-2.0 (and 2.3+'s prompt
AdaLNs).
"""

from __future__ import annotations

from vidax_core.io.convert import KeyRule
from vidax_core.io.diffusers_rules import (
    attention_rules,
    feedforward_rules,
    linear_rules,
)
from vidax_core.io.load import dit_loader

from .ltx2_dit import LTX2DiT

_B = r"transformer_blocks\.(\d+)\."
_ATTNS = ("attn1", "audio_attn1", "attn2", "audio_attn2", "audio_to_video_attn", "video_to_audio_attn")
_BLOCK_TABLES = ("scale_shift_table", "audio_scale_shift_table", "prompt_scale_shift_table",
                 "audio_prompt_scale_shift_table", "video_a2v_cross_attn_scale_shift_table",
                 "audio_a2v_cross_attn_scale_shift_table")
_ADALNS = ("time_embed", "audio_time_embed", "av_cross_attn_video_scale_shift", "av_cross_attn_audio_scale_shift",
           "av_cross_attn_video_a2v_gate", "av_cross_attn_audio_v2a_gate", "prompt_adaln", "audio_prompt_adaln")


def _adaln_rules(name: str) -> list[KeyRule]:
    """``LTX2AdaLayerNormSingle``: ``emb.timestep_embedder.linear_{1,2}`` and ``linear``."""
    return [*linear_rules(rf"{name}\.emb\.timestep_embedder\.linear_1", f"{name}/timestep_embedder/linear_1"),
            *linear_rules(rf"{name}\.emb\.timestep_embedder\.linear_2", f"{name}/timestep_embedder/linear_2"),
            *linear_rules(rf"{name}\.linear", f"{name}/linear")]


def _block_rules() -> list[KeyRule]:
    rules: list[KeyRule] = []
    for attn in _ATTNS:
        rules += attention_rules(rf"{_B}{attn}", f"blocks/{attn}", 1, qk_norm="rms_norm_across_heads")
        rules += linear_rules(rf"{_B}{attn}\.to_gate_logits", f"blocks/{attn}/to_gate_logits", 1)
    for ff in ("ff", "audio_ff"):
        rules += feedforward_rules(rf"{_B}{ff}", f"blocks/{ff}", 1)
    rules += [KeyRule(rf"{_B}{t}", f"blocks/{t}", None, 1) for t in _BLOCK_TABLES]
    return rules


LTX2_DIT_RULES: list[KeyRule] = [
    *linear_rules(r"proj_in", "proj_in"),
    *linear_rules(r"audio_proj_in", "audio_proj_in"),
    KeyRule(r"keyframes_abs_pos_embedding", "keyframes_abs_pos_embedding"),
    *[r for cap in ("caption_projection", "audio_caption_projection") for lin in ("linear_1", "linear_2")
      for r in linear_rules(rf"{cap}\.{lin}", f"{cap}/{lin}")],
    *[r for name in _ADALNS for r in _adaln_rules(name)],
    *_block_rules(),
    KeyRule(r"scale_shift_table", "scale_shift_table"),
    KeyRule(r"audio_scale_shift_table", "audio_scale_shift_table"),
    *linear_rules(r"proj_out", "proj_out"),
    *linear_rules(r"audio_proj_out", "audio_proj_out"),
]


# The original release's DiT names (diffusers' ``convert_ltx2_transformer_to_diffusers``), applied in order.
_ORIGINAL_PREFIX = "model.diffusion_model."
_ORIGINAL_RENAMES = (
    ("patchify_proj", "proj_in"),
    ("av_ca_video_scale_shift_adaln_single", "av_cross_attn_video_scale_shift"),
    ("av_ca_a2v_gate_adaln_single", "av_cross_attn_video_a2v_gate"),
    ("av_ca_audio_scale_shift_adaln_single", "av_cross_attn_audio_scale_shift"),
    ("av_ca_v2a_gate_adaln_single", "av_cross_attn_audio_v2a_gate"),
    ("scale_shift_table_a2v_ca_video", "video_a2v_cross_attn_scale_shift_table"),
    ("scale_shift_table_a2v_ca_audio", "audio_a2v_cross_attn_scale_shift_table"),
    ("q_norm", "norm_q"),
    ("k_norm", "norm_k"),
    # LTX-2.3+ (diffusers' 2.3 table): the prompt AdaLNs of cross-attention modulation
    ("audio_prompt_adaln_single", "audio_prompt_adaln"),
    ("prompt_adaln_single", "prompt_adaln"),
)
_ORIGINAL_TIME_EMBEDS = (("adaln_single.", "time_embed."), ("audio_adaln_single.", "audio_time_embed."))


def original_dit_key(key: str) -> str | None:
    """An original single-file key -> its diffusers ``transformer/`` name, or None for a key of another part (the
    text connectors, the VAEs, the vocoder)."""
    if not key.startswith(_ORIGINAL_PREFIX):
        return None
    key = key[len(_ORIGINAL_PREFIX):]
    if key.startswith(("video_embeddings_connector.", "audio_embeddings_connector.")):
        return None
    for old, new in _ORIGINAL_RENAMES:
        key = key.replace(old, new)
    for old, new in _ORIGINAL_TIME_EMBEDS:
        if key.startswith(old):
            key = new + key[len(old):]
    return key


def original_dit_tensors(tensors):
    """The DiT part of an original single-file state dict under diffusers' names (lazy: nothing is read)."""
    from vidax_core.io.renamed import RenamedTensors

    return RenamedTensors(tensors, original_dit_key)


load_ltx2_dit = dit_loader(LTX2DiT, LTX2_DIT_RULES, component="LTX-2 DiT (transformer)", name="load_ltx2_dit")
