"""Tiny random LTX-2.x pipelines (diffusers ``LTX2Pipeline``, the PyTorch reference) for end-to-end tests.

Per generation: the prompt path of :mod:`vidax_core.testing.tiny.ltx2_text` (tokenizer, tiny Gemma-3 / Gemma-4
unified, connectors), a tiny ``LTX2VideoTransformer3DModel`` whose text widths fit those connectors (LTX-2.0: caption
projections inside the DiT; LTX-2.5: gated attention, cross-attention AdaLN, connector-projected text, no video FFN
bias, keyframe embedding), both with the perturbed self-attention STG needs; the video VAE at 32x / 8x compression
(LTX-2.5: timestep-conditioned decoder), the audio VAE (4 latent channels x 4 latent mel bins = 16 packed features)
and the leaky-ReLU vocoder (an 8 kHz waveform as long as the video),
every parameter random and the latent statistics away from 0 / 1; the dev scheduler
(dynamic shifting, terminal 0.1, the pipeline's shift constants).
"""

from __future__ import annotations

import os
from pathlib import Path

DIT = {
    "ltx2.0": dict(in_channels=8, out_channels=8, num_attention_heads=2, attention_head_dim=16, cross_attention_dim=32,
                   audio_in_channels=16, audio_out_channels=16, audio_num_attention_heads=2,
                   audio_attention_head_dim=8, audio_cross_attention_dim=16, num_layers=2, caption_channels=16,
                   rope_type="split", use_prompt_embeddings=True, perturbed_attn=True),
}
DIT["ltx2.5"] = dict(DIT["ltx2.0"], rope_type="interleaved", gated_attn=True, cross_attn_mod=True,
                     audio_gated_attn=True, audio_cross_attn_mod=True, use_prompt_embeddings=False, ff_bias=False,
                     use_keyframes_abs_pos_embedding=True)
VIDEO_VAE = {
    "ltx2.0": dict(
        latent_channels=8, block_out_channels=(16, 32, 32, 64), decoder_block_out_channels=(16, 32, 64),
        layers_per_block=(1, 1, 1, 1, 1), decoder_layers_per_block=(1, 1, 1, 1),
        spatio_temporal_scaling=(True, True, True, True), decoder_spatio_temporal_scaling=(True, True, True),
        decoder_inject_noise=(False, False, False, False),
        downsample_type=("spatial", "temporal", "spatiotemporal", "spatiotemporal"),
        upsample_type=("spatiotemporal",) * 3, upsample_residual=(True, True, True), upsample_factor=(2, 2, 2),
        timestep_conditioning=False, encoder_causal=True, decoder_causal=False,
        encoder_spatial_padding_mode="zeros", decoder_spatial_padding_mode="reflect", spatial_compression_ratio=32,
        temporal_compression_ratio=8),
}
VIDEO_VAE["ltx2.5"] = dict(VIDEO_VAE["ltx2.0"], timestep_conditioning=True, upsample_residual=(False, False, False),
                           decoder_spatial_padding_mode="zeros")
AUDIO_VAE = dict(base_channels=16, ch_mult=(1, 2, 4), num_res_blocks=1, latent_channels=4, mel_bins=16,
                 output_channels=2, in_channels=2)
#: 80 samples per mel frame at 100 mel frames a second: an 8 kHz waveform as long as the video (AAC's lowest rate).
VOCODER = dict(in_channels=32, hidden_channels=32, out_channels=2, upsample_kernel_sizes=(20, 16),
               upsample_factors=(10, 8), resnet_kernel_sizes=(3, 5), resnet_dilations=((1, 3), (1, 2)),
               output_sampling_rate=8000)
#: LTX-2.3+'s two-stage vocoder at tiny sizes: stage 1 at 16 kHz (x8), a 16-point causal log-mel STFT (hop 8, 8 mel
#: bands) of its waveform, a bandwidth-extension generator (x16) adding to the waveform resampled to 32 kHz.
VOCODER_BWE = dict(in_channels=32, hidden_channels=32, out_channels=2, upsample_kernel_sizes=(8, 4),
                   upsample_factors=(4, 2), resnet_kernel_sizes=(3,), resnet_dilations=((1, 3),), bwe_in_channels=16,
                   bwe_hidden_channels=16, bwe_out_channels=2, bwe_upsample_kernel_sizes=(8, 4),
                   bwe_upsample_factors=(4, 4), bwe_resnet_kernel_sizes=(3,), bwe_resnet_dilations=((1, 2),),
                   filter_length=16, hop_length=8, window_length=16, num_mel_channels=8, input_sampling_rate=16000,
                   output_sampling_rate=32000)
SCHEDULER = dict(use_dynamic_shifting=True, shift_terminal=0.1, base_shift=0.95, max_shift=2.05,
                 base_image_seq_len=1024, max_image_seq_len=4096)


def _audio_vae(seed: int):
    import torch
    from diffusers import AutoencoderKLLTX2Audio

    from vidax_core.testing.reference import randomize_

    model = AutoencoderKLLTX2Audio(**AUDIO_VAE).eval()
    randomize_(model, seed=seed)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        model.latents_mean.copy_(torch.randn(model.latents_mean.shape, generator=g))
        model.latents_std.copy_(0.5 + torch.rand(model.latents_std.shape, generator=g))
    return model


def build_tiny_ltx2_pipeline(out_dir: str | os.PathLike, generation: str, seed: int = 0, vae: dict | None = None,
                             dit: dict | None = None):
    """``(LTX2Pipeline, checkpoint folder)``: every component random, saved with ``save_pretrained`` into
    ``out_dir/ckpt``; ``vae`` / ``dit`` override entries of the video VAE's / the DiT's config."""
    import torch
    from diffusers import (AutoencoderKLLTX2Video, FlowMatchEulerDiscreteScheduler, LTX2Pipeline,
                           LTX2VideoTransformer3DModel)
    from diffusers.pipelines.ltx2.vocoder import LTX2Vocoder

    from vidax_core.testing.reference import randomize_
    from vidax_core.testing.tiny.ltx2_text import build_tiny_ltx2_text
    from vidax_core.testing.tiny.ltx_vae_parity import random_reference

    out = Path(out_dir)
    text, _ = build_tiny_ltx2_text(out / "text", generation, seed)
    torch.manual_seed(seed)
    transformer = LTX2VideoTransformer3DModel(**{**DIT[generation], **(dit or {})}).eval()
    randomize_(transformer, seed=seed + 1)
    vae = random_reference(AutoencoderKLLTX2Video, {**VIDEO_VAE[generation], **(vae or {})}, seed + 2)
    vocoder = LTX2Vocoder(**VOCODER).eval()
    randomize_(vocoder, seed=seed + 3)
    pipe = LTX2Pipeline(scheduler=FlowMatchEulerDiscreteScheduler(**SCHEDULER), vae=vae,
                        audio_vae=_audio_vae(seed + 4), text_encoder=text.text_encoder, tokenizer=text.tokenizer,
                        connectors=text.connectors, transformer=transformer, vocoder=vocoder)
    pipe.set_progress_bar_config(disable=True)
    ckpt = out / "ckpt"
    pipe.save_pretrained(str(ckpt), safe_serialization=True)
    return pipe, ckpt


#: A tiny LTX-2.5 diffusion video decoder for the 8-channel tiny VAE: the published stage layout (strides, the
#: causal temporal upsampling, patch 4: 32x / 8x like the VAE) at widths 64 -> 32 with 8-wide heads, short stacks,
#: small uneven kernels (the grids of a 64x96, 9-frame video hold them: 2 x 3 latents), 4 heads in stage 5.
DIFFUSION_DECODER = dict(latent_channels=8, patch_size=4, decoder_head_dim=8,
                         decoder_stage_channels=(64, 32, 32, 32, 32), decoder_stage_depths=(1, 2, 1, 1, 2),
                         decoder_stage_kernels=((3, 1, 3), (3, 3, 3), (3, 3, 5), (3, 5, 3)),
                         decoder_upsample_channel_reductions=(2, 1, 1, 1), decoder_stage5_kernel=(5, 7, 5),
                         decoder_t_emb_dim=16)


def build_tiny_diffusion_decoder(folder: str | os.PathLike | None = None, seed: int = 0, **config):
    """A random diffusers ``LTX2VideoDiffusionDecoderModel`` (:data:`DIFFUSION_DECODER` with ``config`` overrides),
    saved with ``save_pretrained`` into ``folder`` when given (a checkpoint's ``diffusion_decoder/``)."""
    from diffusers.models.autoencoders import LTX2VideoDiffusionDecoderModel

    from vidax_core.testing.reference import randomize_

    model = LTX2VideoDiffusionDecoderModel(**{**DIFFUSION_DECODER, **config}).eval()
    randomize_(model, seed=seed, std=0.2)
    if folder is not None:
        model.save_pretrained(str(folder), safe_serialization=True)
    return model


def use_dense_neighborhood_attention(model) -> None:
    """Give a reference ``LTX2VideoDiffusionDecoderModel`` an attention processor that runs torch's SDPA under the
    dense boolean form of diffusers' own neighborhood mask (its ``_neighborhood_block_mask`` ``mask_mod``, evaluated
    on every query/key pair): the same attention as its FlexAttention processor, which runs eagerly on a CPU and is
    orders of magnitude slower there. Tiny grids only (the mask is (S, S))."""
    import torch
    import torch.nn.functional as F
    from diffusers.models.autoencoders import ltx2_diffusion_decoder as ref

    masks: dict = {}

    def dense_mask(frames, height, width, kernel):
        import torch.nn.attention.flex_attention as flex

        if (frames, height, width, kernel) in masks:
            return masks[frames, height, width, kernel]
        captured = {}
        original = flex.create_block_mask
        flex.create_block_mask = lambda mask_mod, **kw: captured.setdefault("mod", mask_mod)
        try:
            ref._neighborhood_block_mask(frames, height, width, kernel, torch.device("cpu"))
        finally:
            flex.create_block_mask = original
        idx = torch.arange(frames * height * width)
        mask = masks[frames, height, width, kernel] = captured["mod"](0, 0, idx[:, None], idx[None, :])
        return mask

    class Dense:
        def __call__(self, attn, hidden_states, block_mask=None):
            b, t, h, w, _ = hidden_states.shape
            q, k, v = (x.reshape(b, t * h * w, attn.heads, attn.head_dim).transpose(1, 2)
                       for x in attn.project_qkv(hidden_states))
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=dense_mask(t, h, w, attn.kernel_size), scale=1.0)
            return attn.to_out[0](out.transpose(1, 2).reshape(b, t, h, w, attn.heads * attn.head_dim))

    for module in model.modules():
        if isinstance(module, ref.LTX2VideoVaeNeighborhoodAttention):
            module.processor = Dense()


def with_tiny_duration_head(pipe, seed: int = 0):
    """``pipe`` (a tiny LTX2Pipeline) with a random diffusers ``LTX2DurationHead`` sized to its connectors' outputs
    (2 queries, 2 heads), as LTX-2.5 checkpoints ship one."""
    from diffusers import LTX2Pipeline
    from diffusers.pipelines.ltx2.duration_head import LTX2DurationHead

    from vidax_core.testing.reference import randomize_

    c = pipe.connectors.config
    head = LTX2DurationHead(video_cross_attention_dim=c.video_hidden_dim, audio_cross_attention_dim=c.audio_hidden_dim,
                            pooler_hidden_dim=16, num_queries=2, num_pooler_heads=2, mlp_hidden_dim=8).eval()
    randomize_(head, seed=seed, std=0.3)
    out = LTX2Pipeline(**{**pipe.components, "duration_head": head})
    out.set_progress_bar_config(disable=True)
    return out


def build_tiny_latent_upsampler(folder: str | os.PathLike | None = None, seed: int = 0, **config):
    """A random diffusers ``LTX2LatentUpsamplerModel`` for the 8-channel tiny VAE (32 mid channels, one block per
    stage, the rational x2 resampler), saved with ``save_pretrained`` into ``folder`` when given (a checkpoint's
    ``latent_upsampler/``)."""
    from diffusers.pipelines.ltx2.latent_upsampler import LTX2LatentUpsamplerModel

    from vidax_core.testing.reference import randomize_

    model = LTX2LatentUpsamplerModel(**{"in_channels": 8, "mid_channels": 32, "num_blocks_per_stage": 1,
                                        **config}).eval()
    randomize_(model, seed=seed, std=0.1)
    if folder is not None:
        model.save_pretrained(str(folder), safe_serialization=True)
    return model
