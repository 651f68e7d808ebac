"""Blockwise 3-D neighborhood attention in pure JAX (any platform): no (S, S) array, no per-query gather.

Semantics (NATTEN's ``na3d`` without dilation, which the flex-attention mask of diffusers' LTX-2 diffusion decoder
reproduces): on a (T, H, W) token grid, the query at ``(t, h, w)`` attends to the ``kt x kh x kw`` keys of the box
whose start on each axis is ``clamp(i - k // 2, 0, n - k)``: centred where it can be, shifted inward at the borders,
so every query sees exactly ``kt * kh * kw`` keys. A kernel side larger than its axis is clamped to the axis (then
every query sees the whole axis, as the flex mask's ``min(k, n)`` does).

How: the queries are cut into tiles of ``tile = (bt, bh, bw)`` tokens. The windows of a tile's queries all lie in
one box of at most ``(bt + kt - 1) x (bh + kh - 1) x (bw + kw - 1)`` keys, sliced from K and V with
``lax.dynamic_slice``; the tile attends to its box under a mask built from three 1-D masks (one per axis), with an
fp32 softmax. A ``lax.scan`` walks the (t, h) tiles and each step handles every w tile of that row at once
(``vmap``), so the program holds one row of boxes at a time and compiles one step whatever the grid size. Tiles at
the far border start at ``n - b`` (overlapping their neighbour) instead of being padded: nothing is copied.
Work per query: box / window keys, e.g. (2+10) * (8+10)^2 / 11^3 = 2.9x for an 11^3 kernel and 2x8x8 tiles.
"""

from __future__ import annotations

import math
from typing import Sequence

import jax
import jax.numpy as jnp
from jax import lax

DEFAULT_TILE = (2, 8, 8)


def clamp_kernel(grid: Sequence[int], kernel: Sequence[int]) -> tuple[int, int, int]:
    """The kernel each axis really uses: ``min(k, n)``."""
    if len(grid) != 3 or len(kernel) != 3:
        raise ValueError(f"neighborhood attention is 3-D: grid {tuple(grid)}, kernel {tuple(kernel)}")
    if any(int(k) < 1 for k in kernel):
        raise ValueError(f"kernel sizes must be positive, got {tuple(kernel)}")
    return tuple(min(int(k), int(n)) for k, n in zip(kernel, grid))  # type: ignore[return-value]


def window_start(pos: jax.Array, n: int, k: int) -> jax.Array:
    """First key index of the window of query position(s) ``pos`` on an axis of ``n`` with kernel ``k``."""
    return jnp.clip(pos - k // 2, 0, n - k)


def box_sizes(grid: Sequence[int], kernel: Sequence[int], tile: Sequence[int]) -> tuple[int, int, int]:
    """Keys per axis of the box a tile of queries needs: ``min(b + k - 1, n)``."""
    return tuple(min(b + k - 1, n) for n, k, b in zip(grid, kernel, tile))  # type: ignore[return-value]


def fit_tile(grid: Sequence[int], tile: Sequence[int] | None) -> tuple[int, int, int]:
    tile = DEFAULT_TILE if tile is None else tuple(int(b) for b in tile)
    if len(tile) != 3 or any(b < 1 for b in tile):
        raise ValueError(f"tile must be three positive sizes, got {tile}")
    return tuple(min(b, n) for b, n in zip(tile, grid))  # type: ignore[return-value]


def tile_starts(n: int, b: int) -> list[int]:
    """Start of each tile on an axis of ``n``: multiples of ``b``, the last one moved back to ``n - b``."""
    return [min(i * b, n - b) for i in range(-(-n // b))]


def _axis_mask(q0: jax.Array, box0: jax.Array, n: int, k: int, b: int, length: int) -> jax.Array:
    """(b, length) bool: key ``box0 + j`` lies in the window of query ``q0 + i``."""
    start = window_start(q0 + jnp.arange(b, dtype=jnp.int32), n, k)[:, None]
    key = box0 + jnp.arange(length, dtype=jnp.int32)[None, :]
    return (key >= start) & (key < start + k)


def _box_start(q0: jax.Array, n: int, k: int, length: int) -> jax.Array:
    return jnp.minimum(window_start(q0, n, k), n - length)


def attention(q: jax.Array, k: jax.Array, v: jax.Array, kernel_size: Sequence[int], *, heads: int,
              scale: float | None = None, tile: Sequence[int] | None = None) -> jax.Array:
    """Neighborhood attention over channels-last (B, T, H, W, heads * D) tensors (heads kept in the channel axis, the
    layout a video model holds its activations in, which TPUs store without padding a small head count or head
    size); ``scale`` multiplies the logits (default ``1 / sqrt(D)``). Returns (B, T, H, W, heads * Dv) in
    ``v.dtype``."""
    if q.ndim != 5 or k.shape != q.shape or v.shape[:-1] != q.shape[:-1]:
        raise ValueError(f"q, k, v must be (B, T, H, W, heads * D) of one grid; got {q.shape}, {k.shape}, {v.shape}")
    if heads < 1 or q.shape[-1] % heads or v.shape[-1] % heads:
        raise ValueError(f"heads={heads} must divide the channels of q ({q.shape[-1]}) and v ({v.shape[-1]})")
    b_, t_, h_, w_, c_ = q.shape
    n_, d_ = heads, c_ // heads
    grid = (t_, h_, w_)
    kernel = clamp_kernel(grid, kernel_size)
    bt, bh, bw = fit_tile(grid, tile)
    lt, lh, lw = box_sizes(grid, kernel, (bt, bh, bw))
    scale = 1.0 / math.sqrt(d_) if scale is None else float(scale)
    dv = v.shape[-1] // heads
    nw = -(-w_ // bw)
    tail = w_ - (nw - 1) * bw  # columns of the last (moved-back) w tile that no other tile covers
    w_starts = jnp.asarray(tile_starts(w_, bw), jnp.int32)
    rows = jnp.asarray([(t0, h0) for t0 in tile_starts(t_, bt) for h0 in tile_starts(h_, bh)], jnp.int32)
    zero = jnp.int32(0)

    def one_tile(t0, h0, w0, tb0, hb0, mask_th):
        wb0 = _box_start(w0, w_, kernel[2], lw)
        qt = lax.dynamic_slice(q, (zero, t0, h0, w0, zero), (b_, bt, bh, bw, c_))
        kb = lax.dynamic_slice(k, (zero, tb0, hb0, wb0, zero), (b_, lt, lh, lw, c_))
        vb = lax.dynamic_slice(v, (zero, tb0, hb0, wb0, zero), (b_, lt, lh, lw, n_ * dv))
        qt = qt.reshape(b_, bt * bh * bw, n_, d_)
        kb = kb.reshape(b_, lt * lh * lw, n_, d_)
        vb = vb.reshape(b_, lt * lh * lw, n_, dv)
        logits = jnp.einsum("bqnd,bknd->bnqk", qt, kb, preferred_element_type=jnp.float32) * scale
        mask_w = _axis_mask(w0, wb0, w_, kernel[2], bw, lw)
        vis = (mask_th[:, :, None, :, :, None] & mask_w[None, None, :, None, None, :]).reshape(
            bt * bh * bw, lt * lh * lw)
        logits = jnp.where(vis[None, None], logits, -jnp.inf)
        probs = jax.nn.softmax(logits, axis=-1).astype(v.dtype)
        out = jnp.einsum("bnqk,bknd->bqnd", probs, vb)
        return out.reshape(b_, bt, bh, bw, n_ * dv)

    def row(out, th):
        t0, h0 = th[0], th[1]
        tb0 = _box_start(t0, t_, kernel[0], lt)
        hb0 = _box_start(h0, h_, kernel[1], lh)
        mask_t = _axis_mask(t0, tb0, t_, kernel[0], bt, lt)
        mask_h = _axis_mask(h0, hb0, h_, kernel[1], bh, lh)
        mask_th = mask_t[:, None, :, None] & mask_h[None, :, None, :]  # (bt, bh, lt, lh)
        tiles = jax.vmap(lambda w0: one_tile(t0, h0, w0, tb0, hb0, mask_th))(w_starts)  # (nw, B, bt, bh, bw, C)
        full = jnp.moveaxis(tiles[:-1], 0, 3).reshape(b_, bt, bh, (nw - 1) * bw, n_ * dv)
        line = jnp.concatenate([full, tiles[-1][:, :, :, bw - tail:]], axis=3)  # (B, bt, bh, W, C)
        return lax.dynamic_update_slice(out, line, (zero, t0, h0, zero, zero)), None

    out = jnp.zeros(q.shape[:-1] + (n_ * dv,), v.dtype)
    out, _ = lax.scan(row, out, rows)
    return out
