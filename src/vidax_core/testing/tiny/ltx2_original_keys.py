"""Original LTX-2.x key names (ltx-core's, as the Lightricks release files spell them) from diffusers names: the
inverse maps tests use to write tiny checkpoints in the release layout.

They are written from ltx-core's module names (``model.diffusion_model.*`` with ``patchify_proj``,
``adaln_single``, ``av_ca_*_adaln_single``, ``prompt_adaln_single``, ``scale_shift_table_a2v_ca_*``, ``q_norm``;
the connectors' ``*_embeddings_connector.transformer_1d_blocks`` and ``text_embedding_projection.*``; the video
VAE's flat block lists with ``res_blocks``, the ``last_*`` decoder head and ``per_channel_statistics``; the
vocoder's ``ups`` / ``resblocks`` / ``conv_pre`` / ``conv_post`` / ``act_post`` / ``downsample.lowpass``),
independently of the forward
tables in ``vidax_ltx``; the tests check them against diffusers' own single-file conversion where it has one.
"""

from __future__ import annotations

import re

DIT_PREFIX = "model.diffusion_model."
_DIT = (("proj_in", "patchify_proj"), ("av_cross_attn_video_scale_shift", "av_ca_video_scale_shift_adaln_single"),
        ("av_cross_attn_video_a2v_gate", "av_ca_a2v_gate_adaln_single"),
        ("av_cross_attn_audio_scale_shift", "av_ca_audio_scale_shift_adaln_single"),
        ("av_cross_attn_audio_v2a_gate", "av_ca_v2a_gate_adaln_single"),
        ("video_a2v_cross_attn_scale_shift_table", "scale_shift_table_a2v_ca_video"),
        ("audio_a2v_cross_attn_scale_shift_table", "scale_shift_table_a2v_ca_audio"),
        ("norm_q", "q_norm"), ("norm_k", "k_norm"))
_PROJECTIONS = (("video_text_proj_in.", "text_embedding_projection.video_aggregate_embed."),
                ("audio_text_proj_in.", "text_embedding_projection.audio_aggregate_embed."),
                ("text_proj_in.", "text_embedding_projection.aggregate_embed."))
_STATS = {"latents_mean": "per_channel_statistics.mean-of-means", "latents_std": "per_channel_statistics.std-of-means"}


def dit_key(key: str) -> str:
    """diffusers ``LTX2VideoTransformer3DModel`` key -> the release's."""
    for new, old in _DIT:
        key = key.replace(new, old)
    key = re.sub(r"^(audio_)?prompt_adaln\.", r"\1prompt_adaln_single.", key)
    key = re.sub(r"^(audio_)?time_embed\.", r"\1adaln_single.", key)
    return DIT_PREFIX + key


def connector_key(key: str) -> str:
    """diffusers ``LTX2TextConnectors`` key -> the release's: the projections at the top level, the connectors
    inside the DiT."""
    for new, old in _PROJECTIONS:
        if key.startswith(new):
            return old + key[len(new):]
    stream, rest = key.split("_connector.", 1)
    rest = rest.replace("transformer_blocks", "transformer_1d_blocks").replace("norm_q", "q_norm").replace("norm_k",
                                                                                                          "k_norm")
    return f"{DIT_PREFIX}{stream}_embeddings_connector.{rest}"


def vae_key(key: str, stages: int = 4) -> str:
    """diffusers ``AutoencoderKLLTX2Video`` key -> the release's (``vae.``): encoder stage k = block 2k, its
    downsampler 2k+1, the mid block ``2 stages``; decoder mid = 0, stage k's upsampler 2k+1 and resnets 2k+2."""
    if key in _STATS:
        return "vae." + _STATS[key]
    k = re.sub(r"^encoder\.mid_block\.", f"encoder.DN.{2 * stages}.", key)
    k = re.sub(r"^encoder\.down_blocks\.(\d+)\.downsamplers\.0\.", lambda m: f"encoder.DN.{2 * int(m[1]) + 1}.", k)
    k = re.sub(r"^encoder\.down_blocks\.(\d+)\.(?!\d)", lambda m: f"encoder.DN.{2 * int(m[1])}.", k)
    k = re.sub(r"^decoder\.mid_block\.", "decoder.UP.0.", k)
    k = re.sub(r"^decoder\.up_blocks\.(\d+)\.upsamplers\.0\.", lambda m: f"decoder.UP.{2 * int(m[1]) + 1}.", k)
    k = re.sub(r"^decoder\.up_blocks\.(\d+)\.(?!\d)", lambda m: f"decoder.UP.{2 * int(m[1]) + 2}.", k)
    k = k.replace(".DN.", ".down_blocks.").replace(".UP.", ".up_blocks.").replace("resnets", "res_blocks")
    k = re.sub(r"^decoder\.(time_embedder|scale_shift_table)", r"decoder.last_\1", k)
    return "vae." + k


def audio_vae_key(key: str) -> str:
    """diffusers ``AutoencoderKLLTX2Audio`` key -> the release's (``audio_vae.``)."""
    return "audio_vae." + _STATS.get(key, key)


def vocoder_key(key: str) -> str:
    """diffusers ``LTX2Vocoder`` / ``LTX2VocoderWithBWE`` key -> the release's (``vocoder.``; BigVGAN-v2's
    anti-aliasing downsampler is ``downsample.lowpass``)."""
    for new, old in (("upsamplers", "ups"), ("resnets", "resblocks"), ("conv_in", "conv_pre"),
                     ("conv_out", "conv_post"), ("act_out", "act_post"), (".downsample.", ".downsample.lowpass.")):
        key = key.replace(new, old)
    return "vocoder." + key
