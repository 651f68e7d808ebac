"""FLOPs of one LTX-Video DiT call from its config and shapes (:mod:`vidax_core.flops` conventions)."""

from __future__ import annotations

from vidax_core import flops as F


def dit_flops(cfg, batch: int, grid, text_tokens: int, blocks: dict | None = None) -> float:
    """Input projection, AdaLN-single time embedder, caption projection, ``num_layers`` x (self-attention,
    cross-attention to the text, FFN), output head. ``grid`` is the latent grid; tokens are its patches."""
    b, d, L = batch, cfg.dim, text_tokens
    s = F.tokens(grid, (cfg.patch_size_t, cfg.patch_size, cfg.patch_size))
    heads, hd = cfg.num_attention_heads, cfg.attention_head_dim
    t = F.Tally()
    t.add("embed", F.linear(b * s, cfg.in_channels, d))
    t.add("embed", F.linear(b, 256, d) + F.linear(b, d, d) + F.linear(b, d, 6 * d))
    t.add("embed", F.linear(b * L, cfg.caption_channels, d) + F.linear(b * L, d, d))
    block = (4 * F.linear(b * s, d, d) + F.attention(b, heads, s, s, hd)
             + 2 * F.linear(b * s, d, d) + 2 * F.linear(b * L, cfg.cross_attention_dim, d)
             + F.attention(b, heads, s, L, hd)
             + 2 * F.linear(b * s, d, 4 * d))
    t.add("blocks", block, (blocks or {}).get("blocks", cfg.num_layers))
    t.add("head", F.linear(b * s, d, cfg.out_channels))
    return t.total


def counter(cfg):
    """``DitBuild.flops`` of an LTX-Video DiT with config ``cfg``."""
    return lambda batch, grid, text_tokens, blocks=None: dit_flops(cfg, batch, grid, text_tokens, blocks)
