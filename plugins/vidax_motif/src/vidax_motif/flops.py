"""FLOPs of one Motif-Video DiT call from its config and shapes (:mod:`vidax_core.flops` conventions)."""

from __future__ import annotations

import math

from vidax_core import flops as F


def dit_flops(cfg, batch: int, grid, text_tokens: int, blocks: dict | None = None, image_tokens: int = 0) -> float:
    """Embeddings (patches, timestep, text projection, image projection); ``num_layers`` dual blocks (two
    modulations, per-stream q/k/v/out and MLPs, one joint attention over video and conditioning, the optional
    text cross-attention); the encoder single blocks (one modulation, shared q/k/v, MLP and output projection over
    both streams, the joint attention, the optional cross-attention); the decoder blocks (the same over the
    decoder and encoder video tokens, 2 S in all, no cross-attention); the output head."""
    b, d, m, heads, hd = batch, cfg.dim, cfg.mlp_dim, cfg.num_attention_heads, cfg.attention_head_dim
    s, L, n = F.tokens(grid, cfg.patch), text_tokens, blocks or {}
    c = L + image_tokens  # the conditioning stream
    # the text cross-attention: q and out over the video tokens, k and v over the text
    cross = 2 * F.linear(b * s, d, d) + 2 * F.linear(b * L, d, d) + F.attention(b, heads, s, L, hd)
    t = F.Tally()
    t.add("embed", F.linear(b * s, math.prod(cfg.patch) * cfg.in_channels, d) + F.linear(b, 256, d)
          + F.linear(b, d, d) + F.linear(b * L, cfg.text_embed_dim, d) + F.linear(b * L, d, d))
    if image_tokens:
        e = cfg.image_embed_dim
        t.add("embed", F.linear(b * image_tokens, e, e) + F.linear(b * image_tokens, e, d))
    dual = (2 * F.linear(b, d, 6 * d) + 4 * F.linear(b * (s + c), d, d) + 2 * F.linear(b * (s + c), d, m)
            + F.attention(b, heads, s + c, s + c, hd) + (cross if cfg.enable_text_cross_attention_dual else 0.0))

    def single(rows: int, with_cross: bool) -> float:
        return (F.linear(b, d, 3 * d) + 3 * F.linear(b * rows, d, d) + F.linear(b * rows, d, m)
                + F.linear(b * rows, d + m, d) + F.attention(b, heads, rows, rows, hd) + (cross if with_cross else 0.0))

    counts = cfg.groups
    t.add("dual_blocks", dual, n.get("dual_blocks", counts.get("dual_blocks", 0)))
    t.add("single_blocks", single(s + c, cfg.enable_text_cross_attention_single),
          n.get("single_blocks", counts.get("single_blocks", 0)))
    t.add("decoder_blocks", single(2 * s, False), n.get("decoder_blocks", counts.get("decoder_blocks", 0)))
    t.add("head", F.linear(b, d, 2 * d) + F.linear(b * s, d, cfg.out_channels * math.prod(cfg.patch)))
    return t.total


def counter(cfg, image_tokens: int = 0):
    """``DitBuild.flops`` of a Motif-Video DiT with config ``cfg`` (``image_tokens`` SigLIP tokens per call)."""
    return lambda batch, grid, text_tokens, blocks=None: dit_flops(cfg, batch, grid, text_tokens, blocks,
                                                                   image_tokens)
