"""FLOPs of one Wan DiT call from its config and shapes (:mod:`vidax_core.flops` conventions)."""

from __future__ import annotations

from vidax_core import flops as F

CLIP_TOKENS = 257  # Wan2.1 I2V: CLIP ViT-H/14 image tokens per frame (FLF2V: pos_embed_seq_len, both frames)


def dit_flops(cfg, batch: int, grid, text_tokens: int, blocks: dict | None = None) -> float:
    """Patch embedding, time and text embedders, ``num_layers`` x (self-attention over the video tokens,
    cross-attention to the text and, for I2V, to the image tokens, FFN), output head."""
    b, d, L = batch, cfg.dim, text_tokens
    pt, ph, pw = cfg.patch_size
    s = F.tokens(grid, cfg.patch_size)
    heads, hd = cfg.num_attention_heads, cfg.attention_head_dim
    li = (cfg.pos_embed_seq_len or CLIP_TOKENS) if cfg.image_dim is not None else 0
    t = F.Tally()
    t.add("embed", F.linear(b * s, pt * ph * pw * cfg.in_channels, d))
    t.add("embed", F.linear(b, cfg.freq_dim, d) + F.linear(b, d, d) + F.linear(b, d, 6 * d))
    t.add("embed", F.linear(b * L, cfg.text_dim, d) + F.linear(b * L, d, d))
    if li:
        t.add("embed", F.linear(b * li, cfg.image_dim, cfg.image_dim) + F.linear(b * li, cfg.image_dim, d))
    block = (4 * F.linear(b * s, d, d) + F.attention(b, heads, s, s, hd)  # self-attention
             + 2 * F.linear(b * s, d, d) + 2 * F.linear(b * L, d, d) + F.attention(b, heads, s, L, hd)  # cross
             + 2 * F.linear(b * s, d, cfg.ffn_dim))  # FFN
    if li:
        block += 2 * F.linear(b * li, cfg.added_kv_proj_dim, d) + F.attention(b, heads, s, li, hd)
    t.add("blocks", block, (blocks or {}).get("blocks", cfg.num_layers))
    t.add("head", F.linear(b * s, d, cfg.out_channels * pt * ph * pw))
    return t.total


def counter(cfg):
    """``DitBuild.flops`` of a Wan DiT with config ``cfg``."""
    return lambda batch, grid, text_tokens, blocks=None: dit_flops(cfg, batch, grid, text_tokens, blocks)
