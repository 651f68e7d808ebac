"""Tiny random Kandinsky 6 super-resolution pipelines built with diffusers (the PyTorch reference), for the parity
tests and the built-in checkpoint; torch and diffusers load only when called.

The DiT is a 2-block ``Kandinsky6SRTransformer3DModel`` whose trained tile sizes are 32 x 32, 32 x 64 and 64 x 32
pixels (8 x 8 NABLA blocks of latents); the K-VAE a 3-level ``Kandinsky6SRVAE`` (spatial factor 4, time factor 4
from level 0); the latent upscaler bank one x2 and one x4 model of width 8; flow Euler with shift 5, or PiFlow
(``distill=True``: shift 3.5, the DiT's head widened by the grid), as the two published VSR repos.
"""

from __future__ import annotations

TINY_SR_DIT = dict(in_visual_dim=4, out_visual_dim=4, time_dim=24, patch_size=(1, 1, 1), model_dim=32, ff_dim=48,
                   num_visual_blocks=2, axes_dims=(4, 6, 6), scale_factor=(1.0, 2.0, 2.0), nabla_threshold=0.8,
                   nabla_window=(3, 1, 1), tile_sizes=((32, 32), (32, 64), (64, 32)))
TINY_SR_VAE = dict(in_channels=3, out_channels=3, latent_channels=4, encoder_block_out_channels=(8, 8, 16),
                   decoder_block_out_channels=(8, 16, 16), layers_per_block=1, temporal_compression_ratio=4,
                   temporal_compression_start_level=0, scaling_factor=0.91)
TINY_SR_UPSCALER = dict(in_channels=4, stage_channels=(8, 8, 8), num_pre_blocks=1, num_mid_blocks=1,
                        num_post_blocks=1, num_x2_adapter_blocks=1, scales=(2, 4), scaling_factor=0.91)
SHIFT, DISTILL_SHIFT, TINY_GRID = 5.0, 3.5, 3


def build_tiny_sr_pipeline(seed: int = 0, dit: dict | None = None, vae: dict | None = None, *,
                           distill: bool = False, upscaler: bool = True):
    """A random-weight fp32 ``Kandinsky6SRPipeline`` (non-zero biases and norm gains); ``upscaler=False`` leaves
    the optional latent upscaler bank out (the pipeline then upscales pixel tiles bilinearly and encodes them)."""
    import diffusers
    import torch

    from vidax_core.testing.reference import randomize_

    cfg = {**TINY_SR_DIT, **(dit or {})}
    if distill:
        cfg["out_visual_dim"] = cfg["in_visual_dim"] * TINY_GRID
    torch.manual_seed(seed)
    transformer = diffusers.Kandinsky6SRTransformer3DModel(**cfg).eval().float()
    randomize_(transformer, seed + 3, 0.15)
    vae_model = diffusers.Kandinsky6SRVAE(**{**TINY_SR_VAE, **(vae or {})}).eval().float()
    randomize_(vae_model, seed + 4, 0.1)
    bank = None
    if upscaler:
        bank = diffusers.Kandinsky6SRLatentUpscalerBank(**TINY_SR_UPSCALER).eval().float()
        randomize_(bank, seed + 5, 0.1)
    scheduler = diffusers.PiflowScheduler(shift=DISTILL_SHIFT, n_grid=TINY_GRID) if distill else \
        diffusers.FlowMatchEulerDiscreteScheduler(shift=SHIFT)
    return diffusers.Kandinsky6SRPipeline(transformer=transformer, vae=vae_model, scheduler=scheduler,
                                          latent_upscaler=bank)


def save_tiny_sr(out_dir, **kwargs):
    """Build and ``save_pretrained`` a tiny SR pipeline in diffusers layout (safetensors); returns (folder, pipe)."""
    from pathlib import Path

    pipe = build_tiny_sr_pipeline(**kwargs)
    pipe.save_pretrained(str(out_dir), safe_serialization=True)
    return Path(out_dir), pipe
