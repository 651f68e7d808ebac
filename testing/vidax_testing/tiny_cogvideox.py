"""Tiny random CogVideoX DiTs and pipelines built with diffusers (the PyTorch reference), for parity tests.

Every parameter, biases and norm gains included, is drawn from a seeded normal. The DiT variants mirror the five
published architectures at tiny widths: ``2b`` (sin-cos positions), ``5b`` (RoPE), ``5b-i2v`` (RoPE + learned
positions, doubled input channels), ``1.5`` (RoPE slice grid, temporal patch 2) and ``1.5-i2v`` (+ ofs embedding).
Sample sizes are small so that 32x32-pixel, 9-frame videos hit the learned table's size.
"""

from __future__ import annotations

import os
from pathlib import Path

from .tiny_tokenizer import make_tiny_t5_tokenizer, tokenizer_vocab_size
from .tiny_wan import randomize_

LATENT_CHANNELS = 4
TEXT_LEN = 12  # tokens in the tiny runs (the learned table of the I2V variant is sized for it)
# heads x head_dim = 32 (divisible by 16 for the sin-cos table; head_dim 16 splits into RoPE axes 4 / 6 / 6).
TINY_DIT = dict(num_attention_heads=2, attention_head_dim=16, in_channels=LATENT_CHANNELS,
                out_channels=LATENT_CHANNELS, time_embed_dim=24, text_embed_dim=16, num_layers=2,
                sample_width=10, sample_height=6, sample_frames=9, patch_size=2, max_text_seq_length=TEXT_LEN)
VARIANTS = {
    "2b": dict(),
    "5b": dict(use_rotary_positional_embeddings=True),
    "5b-i2v": dict(use_rotary_positional_embeddings=True, use_learned_positional_embeddings=True,
                   in_channels=2 * LATENT_CHANNELS, sample_width=4, sample_height=4),
    "1.5": dict(use_rotary_positional_embeddings=True, patch_size_t=2, sample_width=12, sample_height=12),
    "1.5-i2v": dict(use_rotary_positional_embeddings=True, patch_size_t=2, ofs_embed_dim=24,
                    in_channels=2 * LATENT_CHANNELS, sample_width=12, sample_height=12),
}
TINY_T5 = dict(d_model=16, d_kv=8, d_ff=24, num_layers=2, num_heads=2, relative_attention_num_buckets=8,
               relative_attention_max_distance=16, feed_forward_proj="gated-gelu", is_gated_act=True)


def dit_kwargs(variant: str, **overrides) -> dict:
    """diffusers ``CogVideoXTransformer3DModel`` keyword arguments of a tiny variant."""
    return {**TINY_DIT, **VARIANTS[variant], **overrides}


def random_cogvideox_dit(variant: str = "2b", seed: int = 0, **overrides):
    """A random-weight fp32 ``CogVideoXTransformer3DModel`` of a tiny variant (5B-I2V's learned table included)."""
    from diffusers import CogVideoXTransformer3DModel

    model = CogVideoXTransformer3DModel(**dit_kwargs(variant, **overrides)).eval().float()
    randomize_(model, seed, 0.1)
    if model.patch_embed.use_learned_positional_embeddings:
        import torch

        gen = torch.Generator().manual_seed(seed + 11)
        pe = model.patch_embed.pos_embedding
        pe.copy_(torch.randn(pe.shape, generator=gen) * 0.3)
    return model
