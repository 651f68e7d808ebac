"""FLOPs of one AnyFlow DiT call (:mod:`vidax_core.flops` conventions): the Wan DiT's count plus the flow-map
``delta_embedder``; a FAR call's self-attention also reads the cached past (a sampling call) and its own compressed
tokens (a cache-writing call). :func:`counter` is ``DitBuild.flops``: a FAR sampling call is counted with the cache
full (the steady state of a long video: the compressed ring of the trained length and the recent full-resolution
chunks)."""

from __future__ import annotations

from vidax_core import flops as F
from vidax_core.wan_dit.flops import dit_flops


def delta_embedder(cfg, batch: int) -> float:
    return F.linear(batch, cfg.freq_dim, cfg.dim) + F.linear(batch, cfg.dim, cfg.dim)


def far_call_flops(cfg, batch: int, grid, text_tokens: int, *, past: int, compressed: int = 0,
                   blocks: tuple[int, ...] | None = None, zero_keys: int = 0, layers: int | None = None) -> float:
    """A FAR call over ``grid`` full-resolution latents (and ``compressed`` compressed tokens in front) whose queries
    see ``zero_keys`` + ``past`` cached keys and, by chunk-causal ``blocks`` of the new tokens (None: one block),
    the new keys. The head counts only for a sampling call (``compressed == 0`` and one block)."""
    b, d, L, hd, heads = batch, cfg.dim, text_tokens, cfg.attention_head_dim, cfg.num_attention_heads
    s = F.tokens(grid, cfg.patch_size)
    n = s + compressed
    pt, ph, pw = cfg.patch_size
    ct, ch, cw = cfg.compressed_patch_size
    t = F.Tally()
    t.add("embed", F.linear(b * s, pt * ph * pw * cfg.in_channels, d))
    if compressed:
        t.add("embed", F.linear(b * compressed, ct * ch * cw * cfg.in_channels, d))
    t.add("embed", F.linear(b, cfg.freq_dim, d) + F.linear(b, d, d) + F.linear(b, d, 6 * d) + delta_embedder(cfg, b))
    t.add("embed", F.linear(b * L, cfg.text_dim, d) + F.linear(b * L, d, d))
    ends, start, attn = (blocks or (n,)), 0, 0.0
    for rows in ends:
        start += rows
        attn += F.attention(b, heads, rows, zero_keys + past + start, hd)
    block = (4 * F.linear(b * n, d, d) + attn + 2 * F.linear(b * n, d, d) + 2 * F.linear(b * L, d, d)
             + F.attention(b, heads, n, L, hd) + 2 * F.linear(b * n, d, cfg.ffn_dim))
    t.add("blocks", block, layers if layers is not None else cfg.num_layers)
    if not compressed and blocks is None:
        t.add("head", F.linear(b * s, d, cfg.out_channels * pt * ph * pw))
    return t.total


def steady_past(cfg, grid) -> tuple[int, int]:
    """(cached keys, zero keys) a FAR sampling call of ``grid`` sees once the cache is full (the trained length's
    compressed ring and ``full_chunk_limit - 1`` recent chunks of the grid's frames)."""
    f, h, w = grid
    _, ph, pw = cfg.patch_size
    _, ch, cw = cfg.compressed_patch_size
    tpf, ctpf = (h // ph) * (w // pw), (h // ch) * (w // cw)
    past = sum(cfg.partition) * ctpf + (cfg.full_chunk_limit - 1) * f * tpf
    return past, (-(f * tpf)) % 128


def counter(cfg):
    """``DitBuild.flops`` of an AnyFlow DiT (a FAR one counted with a full cache)."""

    def count(batch, grid, text_tokens, blocks=None):
        layers = (blocks or {}).get("blocks")
        if cfg.far:
            past, zeros = steady_past(cfg, grid)
            return far_call_flops(cfg, batch, grid, text_tokens, past=past, zero_keys=zeros, layers=layers)
        return dit_flops(cfg, batch, grid, text_tokens, blocks) + delta_embedder(cfg, batch)

    return count
