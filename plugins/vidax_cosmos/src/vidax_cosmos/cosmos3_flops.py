"""FLOPs of one Cosmos3 DiT call from its config and shapes (:mod:`vidax_core.flops` conventions).

Per layer, each stream's q/k/v/out projections and MLP (SwiGLU: three matmuls, relu^2: two) and the joint
attention of every row over [text; video] as the core's kernel computes it (the text rows' causal mask and the
video keys hidden from them are applied to full products); with ``k_norm_und_for_gen`` (Edge) the text rows'
attention runs a second time over the text with their own keys.
Video tokens are counted on the patch grid after padding H and W to the patch, as the DiT pads them.
"""

from __future__ import annotations

from vidax_core import flops as F


def dit_flops(cfg, batch: int, grid, text_tokens: int, blocks: dict | None = None) -> float:
    b, d, L = batch, cfg.hidden_size, text_tokens
    p = cfg.latent_patch_size
    f, h, w = (int(g) for g in grid)
    s = f * -(-h // p) * -(-w // p)
    heads, hd = cfg.num_attention_heads, cfg.head_dim
    mlp = (3 if cfg.hidden_act == "silu" else 2) * cfg.intermediate_size
    t = F.Tally()
    t.add("embed", F.linear(b * s, cfg.patch_latent_dim, d) + F.linear(b, 256, d) + F.linear(b, d, d))

    def stream(n):
        return F.linear(b * n, d, cfg.q_dim + 2 * cfg.kv_dim) + F.linear(b * n, cfg.q_dim, d) + F.linear(b * n, d, mlp)

    attention = F.attention(b, heads, L + s, L + s, hd)
    if cfg.has_k_norm_und_for_gen:
        attention += F.attention(b, heads, L, L, hd)
    block = stream(L) + stream(s) + attention
    t.add("blocks", block, (blocks or {}).get("blocks", cfg.num_hidden_layers))
    t.add("head", F.linear(b * s, d, cfg.patch_latent_dim))
    return t.total


def counter(cfg):
    """``DitBuild.flops`` of a Cosmos3 DiT with config ``cfg``."""
    return lambda batch, grid, text_tokens, blocks=None: dit_flops(cfg, batch, grid, text_tokens, blocks)
