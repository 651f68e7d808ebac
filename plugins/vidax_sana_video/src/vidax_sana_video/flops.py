"""FLOPs of one SANA-Video DiT call from its config and shapes (:mod:`vidax_core.flops` conventions).

Per block: the four projections and linear attention's two products (the per-head ``k^T v`` summary and the
queries against it, ``S x head_dim x head_dim`` each, plus the normaliser), cross-attention to the prompt, and the
convolutional feed-forward: the 1x1 expansion to 2 x hidden, the 3x3 depthwise convs (9 taps per channel), the 1x1
projection and the 3-frame temporal conv (dim x dim x 3 per token).
"""

from __future__ import annotations

from vidax_core import flops as F


def linear_attention(batch: int, heads: int, tokens: int, head_dim: int) -> float:
    """The summary ``sum_j k_j^T v_j``, the numerators ``q S`` and the normalisers ``q . z``."""
    return 2.0 * batch * heads * tokens * (2 * head_dim * head_dim + head_dim)


def dit_flops(cfg, batch: int, grid, text_tokens: int, blocks: dict | None = None) -> float:
    b, d, L = batch, cfg.dim, text_tokens
    pt, ph, pw = cfg.patch_size
    s = F.tokens(grid, cfg.patch_size)
    hd, hidden = cfg.attention_head_dim, cfg.hidden
    t = F.Tally()
    t.add("embed", F.linear(b * s, pt * ph * pw * cfg.in_channels, d))
    t.add("embed", F.linear(b, 256, d) + F.linear(b, d, d) + F.linear(b, d, 6 * d))
    t.add("embed", F.linear(b * L, cfg.caption_channels, d) + F.linear(b * L, d, d))
    block = (4 * F.linear(b * s, d, d) + linear_attention(b, cfg.num_attention_heads, s, hd)  # linear self-attention
             + 2 * F.linear(b * s, d, d) + 2 * F.linear(b * L, cfg.cross_attention_dim, d)  # cross-attention
             + F.attention(b, cfg.num_cross_attention_heads, s, L, cfg.cross_attention_head_dim)
             + F.linear(b * s, d, 2 * hidden) + 2.0 * b * s * 2 * hidden * 9  # expansion, depthwise 3x3
             + F.linear(b * s, hidden, d) + 3 * F.linear(b * s, d, d))  # projection, temporal conv
    t.add("blocks", block, (blocks or {}).get("blocks", cfg.num_layers))
    t.add("head", F.linear(b * s, d, cfg.out_channels * pt * ph * pw))
    return t.total


def counter(cfg):
    """``DitBuild.flops`` of a SANA-Video DiT with config ``cfg``."""
    return lambda batch, grid, text_tokens, blocks=None: dit_flops(cfg, batch, grid, text_tokens, blocks)
