"""FLOPs of one HunyuanVideo DiT call from its config and shapes (:mod:`vidax_core.flops` conventions)."""

from __future__ import annotations

from vidax_core import flops as F


def dit_flops(cfg, batch: int, grid, text_tokens: int, blocks: dict | None = None) -> float:
    """Patch embedding, the text token refiner, time / pooled-text / guidance embedders, ``num_layers``
    double-stream blocks and ``num_single_layers`` single-stream blocks (each ONE joint attention over
    [text; video], padded text included), output head."""
    b, d, L, mlp = batch, cfg.dim, text_tokens, cfg.mlp_dim
    pt, ph, pw = cfg.patch
    s = F.tokens(grid, cfg.patch)
    n = s + L
    heads, hd = cfg.num_attention_heads, cfg.attention_head_dim
    mlp_pair = lambda rows, width: 2 * F.linear(rows, d, width)  # noqa: E731 - up + down projection
    embedder = lambda d_in: F.linear(b, d_in, d) + F.linear(b, d, d)  # noqa: E731 - a TimestepEmbedding
    t = F.Tally()
    t.add("embed", F.linear(b * s, pt * ph * pw * cfg.in_channels, d))
    t.add("embed", embedder(256) + embedder(cfg.pooled_projection_dim) + (embedder(256) if cfg.guidance_embeds else 0))
    refiner = (4 * F.linear(b * L, d, d) + F.attention(b, heads, L, L, hd) + mlp_pair(b * L, 4 * d)
               + F.linear(b, d, 2 * d))
    t.add("refiner", embedder(256) + embedder(cfg.text_embed_dim) + F.linear(b * L, cfg.text_embed_dim, d))
    t.add("refiner", refiner, cfg.num_refiner_layers)
    double = (2 * F.linear(b, d, 6 * d) + 4 * F.linear(b * n, d, d) + F.attention(b, heads, n, n, hd)
              + mlp_pair(b * n, mlp))
    single = (F.linear(b, d, 3 * d) + 4 * F.linear(b * n, d, d) + F.attention(b, heads, n, n, hd)
              + mlp_pair(b * n, mlp))
    t.add("double_blocks", double, (blocks or {}).get("double_blocks", cfg.num_layers))
    t.add("single_blocks", single, (blocks or {}).get("single_blocks", cfg.num_single_layers))
    t.add("head", F.linear(b, d, 2 * d) + F.linear(b * s, d, cfg.out_channels * pt * ph * pw))
    return t.total


def counter(cfg):
    """``DitBuild.flops`` of a HunyuanVideo DiT with config ``cfg``."""
    return lambda batch, grid, text_tokens, blocks=None: dit_flops(cfg, batch, grid, text_tokens, blocks)
