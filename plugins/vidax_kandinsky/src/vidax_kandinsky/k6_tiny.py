"""Tiny random Kandinsky 6 pipelines built with diffusers (the PyTorch reference), for the parity tests and the
built-in checkpoint; torch, diffusers and transformers load only when called.

Every parameter, biases and norm gains included, is drawn from a seeded normal. The text side is Kandinsky 5's tiny
Qwen2.5-VL and CLIP text (:mod:`vidax_kandinsky.tiny`); the DiT a 2 + 2 block ``Kandinsky6Transformer3DModel``
with the released flags (``visual_cond``, ``cross_gates``, ``fix_modulation``, ``ca_rope``, two token types); the
VAE a tiny ``AutoencoderKLHunyuanVideo``; a tiny ``MMAudioVAE`` and ``MMAudioVocoder`` whose hop lengths agree;
flow Euler with shift 5, or PiFlow (``distill=True``, the DiT's heads widened by its grid).
"""

from __future__ import annotations

TINY_K6_DIT = dict(in_visual_dim=4, out_visual_dim=4, in_text_dim=16, in_text_dim2=16, time_dim=24,
                   patch_size=(1, 2, 2), model_dim=32, ff_dim=48, num_text_blocks=2, num_visual_blocks=2,
                   axes_dims=(4, 6, 6), visual_cond=True, in_audio_dim=6, out_audio_dim=6, model_dim_a=32,
                   time_dim_a=24, ff_dim_a=40, axes_dims_a=(4, 6, 6), audio_freqs_scaling=0.144,
                   scale_factor=(1.0, 2.0, 2.0), text_token_padding=True, ca_rope=True, cross_gates=True,
                   fix_modulation=True, visual_token_type_num_embeddings=2)
TINY_AUDIO_VAE = dict(mel_bins=8, latent_channels=TINY_K6_DIT["in_audio_dim"], hidden_channels=8,
                      channel_multipliers=(1, 2), layers_per_block=1, sample_rate=4000, n_fft=32, hop_length=8,
                      scaling_factor=0.53)
TINY_VOCODER = dict(num_mels=8, upsample_initial_channel=16, upsample_rates=(4, 2), upsample_kernel_sizes=(8, 4),
                    resblock_kernel_sizes=(3, 5), resblock_dilation_sizes=((1, 3), (1, 2)))
SHIFT = 5.0
TINY_GRID = 3  # the tiny distilled DiT's PiFlow grid


def _randomize_audio(module, seed: int) -> None:
    """Seeded weights scaled by fan-in (activations stay O(1) through the vocoder's deep stack), random
    statistics for the VAE's mel de-standardisation."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(module.named_parameters()):
            n = torch.randn(p.shape, generator=gen)
            p.copy_(n / p[0].numel() ** 0.5 if name.endswith("weight") and p.ndim >= 2 else 0.3 * n)
        for name, b in module.named_buffers():
            if name.endswith("data_mean"):
                b.copy_(torch.randn(b.shape, generator=gen))
            elif name.endswith("data_std"):
                b.copy_(0.5 + torch.rand(b.shape, generator=gen))


def build_tiny_k6_pipeline(seed: int = 0, dit: dict | None = None, *, distill: bool = False,
                           sharp_posterior: bool = True):
    """A random-weight fp32 ``Kandinsky6TI2VAPipeline``. ``sharp_posterior``: the VAE's log-variance output is -30
    everywhere, so the image's posterior sample is its mean to 3e-7 whatever generator draws it."""
    import diffusers
    import torch

    from vidax_core.testing.reference import randomize_
    from vidax_core.testing.tiny.hunyuan import TINY_VAE

    from .tiny import build_tiny_kandinsky_pipeline, sharpen_posterior

    base = build_tiny_kandinsky_pipeline("t2v", seed)  # its tiny Qwen2.5-VL, CLIP text and tokenizers
    cfg = {**TINY_K6_DIT, "in_text_dim": base.text_encoder.config.text_config.hidden_size,
           "in_text_dim2": base.text_encoder_2.config.hidden_size, **(dit or {})}
    if distill:
        cfg.update(out_visual_dim=cfg["in_visual_dim"] * TINY_GRID, out_audio_dim=cfg["in_audio_dim"] * TINY_GRID)
    torch.manual_seed(seed)
    transformer = diffusers.Kandinsky6Transformer3DModel(**cfg).eval().float()
    randomize_(transformer, seed + 3, 0.15)
    vae = diffusers.AutoencoderKLHunyuanVideo(**TINY_VAE).eval().float()
    randomize_(vae, seed + 4, 0.1)
    if sharp_posterior:
        sharpen_posterior(vae)
    audio_vae = diffusers.MMAudioVAE(**TINY_AUDIO_VAE).eval().float()
    _randomize_audio(audio_vae, seed + 5)
    vocoder = diffusers.MMAudioVocoder(**TINY_VOCODER).eval().float()
    _randomize_audio(vocoder, seed + 6)
    scheduler = diffusers.PiflowScheduler(shift=SHIFT, n_grid=TINY_GRID) if distill else \
        diffusers.FlowMatchEulerDiscreteScheduler(shift=SHIFT)
    return diffusers.Kandinsky6TI2VAPipeline(
        transformer=transformer, vae=vae, text_encoder=base.text_encoder, tokenizer=base.tokenizer,
        text_encoder_2=base.text_encoder_2, tokenizer_2=base.tokenizer_2, scheduler=scheduler, audio_vae=audio_vae,
        vocoder=vocoder)


def save_tiny_k6(out_dir, **kwargs):
    """Build and ``save_pretrained`` a tiny pipeline in diffusers layout (safetensors); returns (folder, pipe)."""
    from pathlib import Path

    pipe = build_tiny_k6_pipeline(**kwargs)
    pipe.save_pretrained(str(out_dir), safe_serialization=True)
    return Path(out_dir), pipe
