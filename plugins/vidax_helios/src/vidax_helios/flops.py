"""FLOPs of one Helios DiT call: the Wan DiT's count over the chunk's tokens plus the history tokens in front of
them (self-attention and FFN over both, cross-attention computed for both, the head over the chunk)."""

from __future__ import annotations

from vidax_core import flops as F

from .checks import history_tokens


def dit_flops(cfg, sizes, batch: int, grid, text_tokens: int, blocks: dict | None = None) -> float:
    b, d, L = batch, cfg.dim, text_tokens
    pt, ph, pw = cfg.patch_size
    s_chunk = F.tokens(grid, cfg.patch_size)
    s = s_chunk + history_tokens(list(sizes), grid[1:])
    heads, hd = cfg.num_attention_heads, cfg.attention_head_dim
    t = F.Tally()
    # history at the chunk patch width (a small share)
    t.add("embed", F.linear(b * s, pt * ph * pw * cfg.in_channels, d))
    t.add("embed", 2 * (F.linear(b, cfg.freq_dim, d) + F.linear(b, d, d) + F.linear(b, d, 6 * d)))
    t.add("embed", F.linear(b * L, cfg.text_dim, d) + F.linear(b * L, d, d))
    block = (4 * F.linear(b * s, d, d) + F.attention(b, heads, s, s, hd)
             + 2 * F.linear(b * s, d, d) + 2 * F.linear(b * L, d, d) + F.attention(b, heads, s, L, hd)
             + 2 * F.linear(b * s, d, cfg.ffn_dim))
    t.add("blocks", block, (blocks or {}).get("blocks", cfg.num_layers))
    t.add("head", F.linear(b * s_chunk, d, cfg.out_channels * pt * ph * pw))
    return t.total


def counter(cfg, sizes):
    """``DitBuild.flops`` of a Helios DiT with config ``cfg`` and history ``sizes``."""
    return lambda batch, grid, text_tokens, blocks=None: dit_flops(cfg, sizes, batch, grid, text_tokens, blocks)
