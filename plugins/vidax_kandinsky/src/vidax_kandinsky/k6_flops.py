"""FLOPs of one Kandinsky 6 DiT call from its config and shapes (:mod:`vidax_core.flops` conventions)."""

from __future__ import annotations

import math

from vidax_core import flops as F


def dit_flops(cfg, batch: int, grid, text_tokens: int, audio_tokens: int, blocks: dict | None = None) -> float:
    """Embeddings; per stream ``num_text_blocks`` text blocks; ``num_visual_blocks`` fused blocks (each stream's
    modulation, self-attention, cross-attention to its text and feed-forward, and with audio the two
    cross-stream attentions and their modulations); the heads. ``audio_tokens`` 0: the video alone."""
    b, L, la = batch, text_tokens, audio_tokens
    s = F.tokens(grid, cfg.patch_size)
    p = math.prod(cfg.patch_size)
    d, da, td, tda = cfg.model_dim, cfg.dim_a, cfg.time_dim, cfg.tdim_a
    n = blocks or {}
    t = F.Tally()

    def text_block(dim, tdim, heads, hd, ff):
        return (F.linear(b, tdim, 6 * dim) + 4 * F.linear(b * L, dim, dim) + F.attention(b, heads, L, L, hd)
                + 2 * F.linear(b * L, dim, ff))

    def stream(tokens, dim, tdim, heads, hd, ff):
        return (F.linear(b, tdim, 9 * dim) + 4 * F.linear(b * tokens, dim, dim)
                + F.attention(b, heads, tokens, tokens, hd) + 2 * F.linear(b * tokens, dim, dim)
                + 2 * F.linear(b * L, dim, dim) + F.attention(b, heads, tokens, L, hd)
                + 2 * F.linear(b * tokens, dim, ff))

    t.add("embed", F.linear(b * s, p * cfg.in_channels, d) + F.linear(b * L, cfg.in_text_dim, d + da))
    t.add("embed", F.linear(b, d, td) + F.linear(b, td, td) + F.linear(b, da, tda) + F.linear(b, tda, tda)
          + F.linear(b, cfg.in_text_dim2, td + tda))
    t.add("video_text_blocks", text_block(d, td, cfg.heads, cfg.head_dim, cfg.ff_dim),
          n.get("video_text_blocks", cfg.num_text_blocks))
    t.add("audio_text_blocks", text_block(da, tda, cfg.heads_a, cfg.head_dim_a, cfg.ff_a),
          n.get("audio_text_blocks", cfg.num_text_blocks))
    fused = stream(s, d, td, cfg.heads, cfg.head_dim, cfg.ff_dim)
    if la:
        wide = cfg.cross_gates
        fused += stream(la, da, tda, cfg.heads_a, cfg.head_dim_a, cfg.ff_a)
        fused += F.linear(b, td, 2 * d + da if wide else 3 * d) + F.linear(b, tda, 2 * da + d if wide else 3 * da)
        # video queries over audio keys, audio queries over video keys
        fused += 2 * F.linear(b * s, d, d) + 2 * F.linear(b * la, da, d) \
            + F.attention(b, cfg.heads, s, la, cfg.head_dim)
        fused += 2 * F.linear(b * la, da, da) + 2 * F.linear(b * s, d, da) \
            + F.attention(b, cfg.heads_a, la, s, cfg.head_dim_a)
    t.add("visual_blocks", fused, n.get("visual_blocks", cfg.num_visual_blocks))
    t.add("head", F.linear(b, td, 2 * d) + F.linear(b * s, d, p * cfg.out_visual_dim))
    if la:
        t.add("head", F.linear(b, tda, 2 * da) + F.linear(b * la, da, cfg.out_audio_dim)
              + F.linear(b * la, cfg.in_audio_dim, da))
    return t.total


def counter(cfg, audio_tokens):
    """``DitBuild.flops`` of a Kandinsky 6 DiT; ``audio_tokens(latent_frames)`` gives the audio length (0: none)."""
    return lambda batch, grid, text_tokens, blocks=None: dit_flops(cfg, batch, grid, text_tokens,
                                                                   audio_tokens(int(grid[0])), blocks)
