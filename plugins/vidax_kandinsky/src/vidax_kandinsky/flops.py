"""FLOPs of one Kandinsky 5 DiT call from its config and shapes (:mod:`vidax_core.flops` conventions)."""

from __future__ import annotations

import math

from vidax_core import flops as F


def dit_flops(cfg, batch: int, grid, text_tokens: int, blocks: dict | None = None,
              sparse: dict | None = None) -> float:
    """Embeddings; ``num_text_blocks`` x (modulation, self-attention over the text, feed-forward on it);
    ``num_visual_blocks`` x (modulation, self-attention over the video tokens, cross-attention to the text,
    feed-forward); the output head. With NABLA the video self-attention counts the measured share of it the kernel
    computes (``sparse["nabla"]``; without it, the dense equivalent)."""
    b, d, L, td = batch, cfg.model_dim, text_tokens, cfg.time_dim
    s = F.tokens(grid, cfg.patch_size)
    heads, hd, ff, p = cfg.heads, cfg.head_dim, cfg.ff_dim, math.prod(cfg.patch_size)
    n = blocks or {}
    t = F.Tally()
    t.add("embed", F.linear(b * s, p * cfg.in_channels, d) + F.linear(b * L, cfg.in_text_dim, d))
    t.add("embed", F.linear(b, d, td) + F.linear(b, td, td) + F.linear(b, cfg.in_text_dim2, td))
    text = F.linear(b, td, 6 * d) + 4 * F.linear(b * L, d, d) + F.attention(b, heads, L, L, hd) \
        + 2 * F.linear(b * L, d, ff)
    t.add("text_blocks", text, n.get("text_blocks", cfg.num_text_blocks))
    self_attention = (F.sparse_attention("nabla", sparse, b, heads, s, s, hd) if cfg.attention_type == "nabla"
                      else F.attention(b, heads, s, s, hd))
    visual = (F.linear(b, td, 9 * d) + 4 * F.linear(b * s, d, d) + self_attention
              + 2 * F.linear(b * s, d, d) + 2 * F.linear(b * L, d, d) + F.attention(b, heads, s, L, hd)
              + 2 * F.linear(b * s, d, ff))
    t.add("visual_blocks", visual, n.get("visual_blocks", cfg.num_visual_blocks))
    t.add("head", F.linear(b, td, 2 * d) + F.linear(b * s, d, p * cfg.out_visual_dim))
    return t.total


def counter(cfg):
    """``DitBuild.flops`` of a Kandinsky 5 DiT with config ``cfg``."""
    return lambda batch, grid, text_tokens, blocks=None, sparse=None: dit_flops(cfg, batch, grid, text_tokens,
                                                                               blocks, sparse)
