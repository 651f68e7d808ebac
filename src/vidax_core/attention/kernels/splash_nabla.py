"""NABLA's block-sparse attention (:mod:`vidax_core.attention.nabla`) on the splash kernel, exactly: the kernel's
tiles hold ``a x c`` mask blocks (``block_q = 64 a`` query rows, ``block_kv = 64 c`` keys, at most
:data:`MAX_PATTERN_BITS` blocks per tile), a tile's kept blocks are a bit pattern, and the kernel masks a partly
kept tile with that pattern from a table of all ``2^(a c)`` patterns (built in the program from iotas, not stored).
Tiles with no kept block are skipped, tiles whose blocks are all kept run unmasked.

The mask comes from the call's queries and keys, so the tile tables are computed in the program (``compact`` with
``jnp``). The grid's key axis is ``width`` steps long: a row's kept tiles first. With ``cap`` (a fraction of the
key tiles) the kernel first runs that shorter grid when no row keeps more tiles than that (the usual case: NABLA
keeps a minority of blocks), else the full one (``lax.cond``: both are compiled, one runs), so skipped tiles cost
no grid steps either.

The share of the dense work the kernel really does (the tiles it runs over all tiles) is measured per call and
added to the call site's record (:func:`vidax_core.attention.sparsity.measure`): MFU counts those FLOPs.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from vidax_core.attention.kernels import splash_tpu
from vidax_core.attention.splash_blocks import Blocks

MAX_PATTERN_BITS = 10  # mask blocks per tile: 2^bits patterns of block_q x block_kv bytes in the program
DEFAULT_CAP = 0.5  # the shorter grid's key steps, as a fraction of the key tiles


def tile_shape(blocks: Blocks, g: int) -> tuple[int, int]:
    """(mask blocks per tile along the queries, along the keys) of these blocks at mask granularity ``g``; a
    ValueError when the blocks are not whole mask blocks or hold too many."""
    a, c = blocks.block_q // g, blocks.block_kv // g
    if a < 1 or c < 1 or a * g != blocks.block_q or c * g != blocks.block_kv or a * c > MAX_PATTERN_BITS:
        raise ValueError(f"NABLA splash tiles {blocks} must be whole {g}-token mask blocks, at most "
                         f"{MAX_PATTERN_BITS} per tile")
    return a, c


def patterns(a: int, c: int, g: int) -> jax.Array:
    """(2^(a c), a g, c g) bool: pattern p keeps mask block (r, s) of the tile iff bit ``r c + s`` of p is set."""
    rows = jnp.arange(a * g, dtype=jnp.int32)[:, None] // g
    cols = jnp.arange(c * g, dtype=jnp.int32)[None, :] // g
    bit = rows * c + cols
    p = jnp.arange(2 ** (a * c), dtype=jnp.int32)[:, None, None]
    return ((p >> bit[None]) & 1) == 1


def tile_patterns(mask: jax.Array, a: int, c: int) -> jax.Array:
    """(N, n, n) bool block mask -> (N, ceil(n / a), ceil(n / c)) int32 tile patterns (padding: not kept)."""
    nb, n, _ = mask.shape
    nq, nk = -(-n // a), -(-n // c)
    m = jnp.pad(mask, ((0, 0), (0, nq * a - n), (0, nk * c - n))).reshape(nb, nq, a, nk, c)
    out = jnp.zeros((nb, nq, nk), jnp.int32)
    for r in range(a):  # one bit at a time: no int32 copy of the whole mask
        for s in range(c):
            out = out | (m[:, :, r, :, s].astype(jnp.int32) << (r * c + s))
    return out


def attention(q: jax.Array, k: jax.Array, v: jax.Array, block_mask: jax.Array, g: int, *,
              blocks: Blocks | None = None, cap: float | None = DEFAULT_CAP, interpret: bool = False,
              on_density=None) -> jax.Array:
    """Attention of (B, S, H, D) q / k / v restricted to the kept (query block, key block) pairs of ``block_mask``
    (B, H, S / g, S / g) bool, on the splash kernel. ``on_density(computed, dense)`` is called with the (query,
    key) pairs of the tiles run (traced) and of the dense attention, for the FLOP count. Returns (B, S, H, D) in
    ``v.dtype``."""
    b, s, h, d = q.shape
    n = s // g
    if n * g != s or tuple(block_mask.shape) != (b, h, n, n):
        raise ValueError(f"block_mask {tuple(block_mask.shape)} does not cover ({b}, {h}, {s}/{g}, {s}/{g})")
    t = splash_tpu.tiles_for("nabla", s, s, d, q.dtype, blocks)
    a, c = tile_shape(Blocks(t.block_q, t.block_kv, t.block_kv_compute), g)
    if (a * g, c * g) != (t.block_q, t.block_kv):  # tiles_for shrank them to a short sequence: keep whole blocks
        raise ValueError(f"NABLA splash tiles {t} do not fit a sequence of {s} tokens")
    pat = tile_patterns(block_mask.reshape(b * h, n, n), a, c)
    full = 2 ** (a * c) - 1
    state = jnp.where(pat == 0, 0, jnp.where(pat == full, 2, 1)).astype(jnp.int32)
    nq, nk = pat.shape[1:]
    if on_density is not None:
        on_density(jnp.sum(state > 0).astype(jnp.float32) * (t.block_q * t.block_kv), float(b * h * s * s))
    sq_pad, sk_pad, d_pad = nq * t.block_q, nk * t.block_kv, splash_tpu.head_dim_padded(d)
    qt = splash_tpu.scaled_heads_first(q, sq_pad, d_pad, 1.0 / math.sqrt(d)).reshape(b * h, sq_pad, d_pad)
    kt = splash_tpu.scaled_heads_first(k, sk_pad, d_pad).reshape(b * h, sk_pad, d_pad)
    vt = splash_tpu.scaled_heads_first(v, sk_pad, d_pad).reshape(b * h, sk_pad, d_pad)
    table = patterns(a, c, g)

    def run(width: int):
        def go(qt, kt, vt, state, pat):
            mask = splash_tpu.compact(state, pat, width=width, xp=jnp)
            return splash_tpu.run(qt, kt, vt, mask, t, patterns=table, interpret=interpret)

        return go

    short = nk if cap is None else max(1, min(nk, math.ceil(cap * nk)))
    if short >= nk:
        out = run(nk)(qt, kt, vt, state, pat)
    else:
        longest = jnp.max(jnp.sum(state > 0, axis=-1))
        out = jax.lax.cond(longest <= short, run(short), run(nk), qt, kt, vt, state, pat)
    out = out.reshape(b, h, sq_pad, d_pad)[:, :, :s, :d]
    return jnp.transpose(out, (0, 2, 1, 3)).astype(v.dtype)

