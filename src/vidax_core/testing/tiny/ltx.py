"""Tiny random LTX-Video 0.9.x pipelines built with diffusers (the PyTorch reference), for parity tests.

Every parameter, biases and norm gains included, is drawn from a seeded normal; the VAE has the 0.9.8 layout
(LTXVideo095 down blocks, residual upsamplers, timestep-conditioned decoder) at tiny widths, still 32x spatial and
8x temporal compression; the text encoder is a tiny T5 v1.1 (gated-gelu) with a trained tiny tokenizer.
"""

from __future__ import annotations

import os
from pathlib import Path

from vidax_core.testing.tokenizers import make_tiny_t5_tokenizer, tokenizer_vocab_size
from vidax_core.testing.reference import randomize_

# heads x head_dim = 32: 32 % 6 = 2 exercises the RoPE padding pair.
TINY_DIT = dict(in_channels=8, out_channels=8, patch_size=1, patch_size_t=1, num_attention_heads=2,
                attention_head_dim=16, cross_attention_dim=32, num_layers=2, caption_channels=16)
TINY_DIT_CONFIG = dict(TINY_DIT, activation_fn="gelu-approximate", qk_norm="rms_norm_across_heads",
                       norm_elementwise_affine=False, norm_eps=1e-6, attention_bias=True, attention_out_bias=True)
TINY_VAE = dict(
    latent_channels=8, block_out_channels=(8, 8, 8, 8, 8), decoder_block_out_channels=(8, 16, 32),
    layers_per_block=(1, 1, 1, 1, 1), decoder_layers_per_block=(1, 1, 1, 1),
    spatio_temporal_scaling=(True, True, True, True), decoder_spatio_temporal_scaling=(True, True, True),
    decoder_inject_noise=(False, False, False, False),
    down_block_types=("LTXVideo095DownBlock3D",) * 4,
    downsample_type=("spatial", "temporal", "spatiotemporal", "spatiotemporal"),
    upsample_residual=(True, True, True), upsample_factor=(2, 2, 2), timestep_conditioning=True, patch_size=4,
    patch_size_t=1, encoder_causal=True, decoder_causal=False, spatial_compression_ratio=32,
    temporal_compression_ratio=8,
)
TINY_T5 = dict(d_model=16, d_kv=8, d_ff=24, num_layers=2, num_heads=2, relative_attention_num_buckets=8,
               relative_attention_max_distance=16, feed_forward_proj="gated-gelu", is_gated_act=True)
# The 0.9.7 / 0.9.8 diffusers repositories' scheduler (diffusers' conversion: no dynamic shift, class defaults):
# the one LTXConditionPipeline can run.
CONDITION_SCHEDULER = dict(use_dynamic_shifting=False)
TINY_UPSAMPLER = dict(in_channels=8, mid_channels=32, num_blocks_per_stage=1)
SCHEDULER = dict(base_image_seq_len=1024, base_shift=0.95, max_image_seq_len=4096, max_shift=2.05, shift=1.0,
                 shift_terminal=0.1, use_dynamic_shifting=True, time_shift_type="exponential")


def random_ltx_dit(seed: int = 0, **overrides):
    """A random-weight fp32 ``LTXVideoTransformer3DModel`` of :data:`TINY_DIT` (with ``overrides``)."""
    from diffusers import LTXVideoTransformer3DModel

    model = LTXVideoTransformer3DModel(**{**TINY_DIT, **overrides}).eval().float()
    randomize_(model, seed, 0.1)
    return model


def random_ltx_vae(seed: int = 0, **overrides):
    """A random-weight fp32 ``AutoencoderKLLTXVideo`` of :data:`TINY_VAE`, with non-trivial latent statistics."""
    import torch
    from diffusers import AutoencoderKLLTXVideo

    vae = AutoencoderKLLTXVideo(**{**TINY_VAE, **overrides}).eval().float()
    randomize_(vae, seed, 0.1)
    c = vae.config.latent_channels
    gen = torch.Generator().manual_seed(seed + 7)
    vae.register_buffer("latents_mean", torch.randn(c, generator=gen) * 0.2, persistent=True)
    vae.register_buffer("latents_std", 0.5 + torch.rand(c, generator=gen), persistent=True)
    return vae


def random_ltx_upsampler(seed: int = 0, **overrides):
    """A random-weight fp32 ``LTXLatentUpsamplerModel`` of :data:`TINY_UPSAMPLER` (the tiny VAE's 8 channels)."""
    from diffusers.pipelines.ltx.modeling_latent_upsampler import LTXLatentUpsamplerModel

    model = LTXLatentUpsamplerModel(**{**TINY_UPSAMPLER, **overrides}).eval().float()
    randomize_(model, seed, 0.1)
    return model


def build_tiny_ltx_pipeline(kind: str = "t2v", seed: int = 0, dit: dict | None = None):
    """A random-weight LTXPipeline (``kind="t2v"``), LTXImageToVideoPipeline (``"i2v"``) or LTXConditionPipeline
    (``"condition"``, with the 0.9.7+ repositories' scheduler) in fp32."""
    from vidax_core.testing.scratch import scratch_dir

    import torch
    from diffusers import FlowMatchEulerDiscreteScheduler, LTXImageToVideoPipeline, LTXPipeline
    from transformers import AutoTokenizer, T5Config, T5EncoderModel

    tok_dir = make_tiny_t5_tokenizer(scratch_dir("vidax-tok-"))
    tokenizer = AutoTokenizer.from_pretrained(str(tok_dir))
    torch.manual_seed(seed)
    text_encoder = T5EncoderModel(T5Config(vocab_size=tokenizer_vocab_size(tok_dir), **TINY_T5)).eval()
    randomize_(text_encoder, seed + 1, 0.3)
    transformer = random_ltx_dit(seed + 2, **(dit or {}))
    vae = random_ltx_vae(seed + 3)
    from diffusers import LTXConditionPipeline

    sched = FlowMatchEulerDiscreteScheduler(**(CONDITION_SCHEDULER if kind == "condition" else SCHEDULER))
    cls = {"t2v": LTXPipeline, "i2v": LTXImageToVideoPipeline, "condition": LTXConditionPipeline}[kind]
    return cls(scheduler=sched, vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, transformer=transformer)


def save_tiny_ltx(out_dir: str | os.PathLike, **kwargs) -> Path:
    """Build and ``save_pretrained`` a tiny pipeline in diffusers layout (safetensors)."""
    pipe = build_tiny_ltx_pipeline(**kwargs)
    pipe.save_pretrained(str(out_dir), safe_serialization=True)
    return Path(out_dir)
