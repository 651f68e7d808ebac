"""FLOPs of one CogVideoX DiT call from its config and shapes (:mod:`vidax_core.flops` conventions)."""

from __future__ import annotations

from vidax_core import flops as F


def dit_flops(cfg, batch: int, grid, text_tokens: int, blocks: dict | None = None) -> float:
    """Patch and text projections, time (and 1.5-I2V ofs) embedders, ``num_layers`` x (two expert AdaLNs, ONE
    joint attention over [text; video], the FFN on both streams), output head."""
    b, d, L, ted = batch, cfg.dim, text_tokens, cfg.time_embed_dim
    pt, ph, pw = cfg.patch
    s = F.tokens(grid, cfg.patch)
    n = s + L  # the joint sequence
    heads, hd = cfg.num_attention_heads, cfg.attention_head_dim
    t = F.Tally()
    t.add("embed", F.linear(b * s, cfg.in_channels * pt * ph * pw, d) + F.linear(b * L, cfg.text_embed_dim, d))
    t.add("embed", F.linear(b, d, ted) + F.linear(b, ted, ted))
    if cfg.ofs_embed_dim:
        t.add("embed", 2 * F.linear(b, cfg.ofs_embed_dim, cfg.ofs_embed_dim))
    block = (2 * F.linear(b, ted, 6 * d)
             + 4 * F.linear(b * n, d, d) + F.attention(b, heads, n, n, hd)
             + 2 * F.linear(b * n, d, 4 * d))
    t.add("blocks", block, (blocks or {}).get("blocks", cfg.num_layers))
    t.add("head", F.linear(b, ted, 2 * d) + F.linear(b * s, d, cfg.out_channels * pt * ph * pw))
    return t.total


def counter(cfg):
    """``DitBuild.flops`` of a CogVideoX DiT with config ``cfg``."""
    return lambda batch, grid, text_tokens, blocks=None: dit_flops(cfg, batch, grid, text_tokens, blocks)
