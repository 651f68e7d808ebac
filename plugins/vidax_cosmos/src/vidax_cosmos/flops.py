"""FLOPs of one Cosmos-Predict2.5 DiT call from its config and shapes (:mod:`vidax_core.flops` conventions)."""

from __future__ import annotations

from vidax_core import flops as F


def dit_flops(cfg, batch: int, grid, text_tokens: int, blocks: dict | None = None) -> float:
    """Patch embedding, per-frame time embedder, cross-attention projection of the text, ``num_layers`` x
    (AdaLN-LoRA x 3 per latent frame, self-attention, cross-attention, MLP), output head."""
    b, d, L = batch, cfg.dim, text_tokens
    pt, ph, pw = cfg.patch_size
    s = F.tokens(grid, cfg.patch_size)
    frames = int(grid[0]) // pt
    heads, hd, lora = cfg.num_attention_heads, cfg.attention_head_dim, cfg.adaln_lora_dim
    in_feat = (cfg.in_channels + int(cfg.concat_padding_mask)) * pt * ph * pw
    t = F.Tally()
    t.add("embed", F.linear(b * s, in_feat, d) + F.linear(b * frames, d, d) + F.linear(b * frames, d, 3 * d))
    if cfg.use_crossattn_projection:
        t.add("embed", F.linear(b * L, cfg.crossattn_proj_in_channels, cfg.encoder_hidden_states_channels))
    ada = lambda n: F.linear(b * frames, d, lora) + F.linear(b * frames, lora, n * d)  # noqa: E731
    block = (3 * ada(3)
             + 4 * F.linear(b * s, d, d) + F.attention(b, heads, s, s, hd)
             + 2 * F.linear(b * s, d, d) + 2 * F.linear(b * L, cfg.text_embed_dim, d) + F.attention(b, heads, s, L, hd)
             + 2 * F.linear(b * s, d, cfg.ffn_dim))
    t.add("blocks", block, (blocks or {}).get("blocks", cfg.num_layers))
    t.add("head", ada(2) + F.linear(b * s, d, cfg.out_channels * pt * ph * pw))
    return t.total


def counter(cfg):
    """``DitBuild.flops`` of a Cosmos DiT with config ``cfg``."""
    return lambda batch, grid, text_tokens, blocks=None: dit_flops(cfg, batch, grid, text_tokens, blocks)
