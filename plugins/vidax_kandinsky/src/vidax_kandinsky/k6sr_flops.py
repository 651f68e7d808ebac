"""FLOPs of one Kandinsky 6 SR DiT call from its config and shapes (:mod:`vidax_core.flops` conventions).

The self-attention is NABLA's block-sparse attention: how many (query block, key block) pairs it keeps is decided
per call from the data, so the count here is the dense one (an upper bound), as the reference's FLOP count would
be with its sliding-tile prior covering every block."""

from __future__ import annotations

import math

from vidax_core import flops as F


def dit_flops(cfg, batch: int, grid, blocks: dict | None = None) -> float:
    """The time embedding, the patch embedding, ``num_visual_blocks`` blocks (modulation, q/k/v/out, attention,
    feed-forward) and the head."""
    b = batch
    s = F.tokens(grid, cfg.patch_size)
    p = math.prod(cfg.patch_size)
    d, td = cfg.model_dim, cfg.time_dim
    t = F.Tally()
    t.add("embed", F.linear(b, d, td) + F.linear(b, td, td) + F.linear(b * s, p * cfg.in_channels, d))
    block = (F.linear(b, td, 6 * d) + 4 * F.linear(b * s, d, d) + F.attention(b, cfg.heads, s, s, cfg.head_dim)
             + 2 * F.linear(b * s, d, cfg.ff_dim))
    t.add("visual_blocks", block, (blocks or {}).get("visual_blocks", cfg.num_visual_blocks))
    t.add("head", F.linear(b, td, 2 * d) + F.linear(b * s, d, p * cfg.out_visual_dim))
    return t.total


def counter(cfg):
    """``DitBuild.flops`` of a Kandinsky 6 SR DiT (the text length is ignored: the model reads no text)."""
    return lambda batch, grid, text_tokens, blocks=None: dit_flops(cfg, batch, grid, blocks)
