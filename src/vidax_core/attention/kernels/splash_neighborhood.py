"""3-D neighbourhood attention (NATTEN's ``na3d`` windows, :mod:`.neighborhood`) on the splash kernel, exactly.

Layout: the (T, H, W) token grid is cut into *bricks* of ``bt x bh x bw`` tokens (the grid padded up to whole
bricks), and the sequence the kernel sees is brick after brick, each brick in (t, h, w) order inside. A kernel tile
is one brick of queries against one brick of keys, so the keys a brick of queries can see lie in the few bricks
around it: every other tile is skipped. The windows of a query brick against a key brick are the outer product of
three 1-D masks (one per axis, ``clamp(i - k // 2, 0, n - k)`` window starts), and there are few distinct 1-D masks
(an offset between the bricks, or a border), so the partly visible tiles are masked by a table of the distinct 3-D
patterns that occur (built in the program from the 1-D masks, never stored), and the tile tables are numpy
constants of the shapes.

Work: the kernel computes every (query, key) pair of the tiles it runs, (box of bricks around a brick) / (window)
times the window's pairs; the density this module records is those pairs over Sq x Sk
(:func:`vidax_core.attention.sparsity.set_density`). :func:`choose_brick` picks the brick of a given volume that
runs the fewest tiles.
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from vidax_core.attention.kernels import splash_tpu
from vidax_core.attention.kernels._common import round_up
from vidax_core.attention.kernels.neighborhood import clamp_kernel
from vidax_core.attention.splash_blocks import Blocks


def axis_masks(n: int, k: int, b: int) -> np.ndarray:
    """(bricks, bricks, b, b) bool: query ``I b + i`` sees key ``J b + j`` on an axis of ``n`` (padded to whole
    bricks of ``b``; padded queries see nothing, padded keys are never seen) with kernel ``k``."""
    nb = -(-n // b)
    pos = np.arange(nb * b)
    start = np.clip(pos - k // 2, 0, n - k)
    vis = (pos[None, :] >= start[:, None]) & (pos[None, :] < start[:, None] + k) & (pos[:, None] < n)
    return vis.reshape(nb, b, nb, b).transpose(0, 2, 1, 3)


@functools.lru_cache(maxsize=32)
def _axis_tables(n: int, k: int, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per query brick, its visible key bricks (padded with -1), their 1-D pattern ids and fullness, and the distinct
    1-D patterns: (nb, m) int, (nb, m) int, (nb, m) bool, (patterns, b, b) bool."""
    m = axis_masks(n, k, b)
    nb = m.shape[0]
    seen = m.any(axis=(2, 3))
    width = max(int(seen.sum(1).max()), 1)
    uniq, inv = np.unique(m.reshape(nb * nb, b * b), axis=0, return_inverse=True)
    inv = inv.reshape(nb, nb)
    keys = np.full((nb, width), -1, np.int64)
    pats = np.zeros((nb, width), np.int64)
    full = np.zeros((nb, width), bool)
    for i in range(nb):
        js = np.nonzero(seen[i])[0]
        keys[i, : len(js)] = js
        pats[i, : len(js)] = inv[i, js]
        full[i, : len(js)] = m[i, js].all(axis=(1, 2))
    return keys, pats, full, uniq.reshape(-1, b, b)


def axis_pairs(n: int, k: int, b: int) -> int:
    """(query brick, key brick) pairs on one axis with a visible key: each query brick's window span in bricks."""
    first = np.arange(0, n, b)
    last = np.minimum(first + b, n) - 1
    lo = np.clip(first - k // 2, 0, n - k)
    hi = np.clip(last - k // 2, 0, n - k) + k - 1
    return int(np.sum(hi // b - lo // b + 1))


def brick_tiles(grid: Sequence[int], kernel: Sequence[int], brick: Sequence[int]) -> int:
    """Tiles (query brick, key brick) the kernel runs for one head: the product of each axis's visible pairs."""
    return math.prod(axis_pairs(int(n), int(k), int(b)) for n, k, b in zip(grid, clamp_kernel(grid, kernel), brick))


STEP_US = 0.35  # the kernel's fixed cost per grid step, in microseconds (Pallas' documented ~0.35 us)
TILE_US = 0.7  # a 512 x 512 tile's matmuls at the v5e's peak, in microseconds (scaled by V^2 for other volumes)


def choose_brick(grid: Sequence[int], kernel: Sequence[int], volume: int) -> tuple[int, int, int]:
    """The brick (powers of two per axis) of 128 to ``volume`` tokens that a simple cost model says runs fastest:
    tiles x (the tile's matmuls + the fixed cost of a grid step), padding included. A table entry's ``brick``
    overrides it (``benchmarks/splash_tune.py`` measures candidates)."""
    best = None
    top = int(math.log2(volume))
    if 2**top != volume or volume < 128:
        raise ValueError(f"a brick volume must be a power of two of at least 128, got {volume}")
    for exps in range(7, top + 1):
        v = 2**exps
        for et, eh in itertools.product(range(exps + 1), repeat=2):
            ew = exps - et - eh
            if ew < 0:
                continue
            brick = (2**et, 2**eh, 2**ew)
            cost = brick_tiles(grid, kernel, brick) * (TILE_US * v * v / 512**2 + STEP_US)
            if best is None or cost < best[0]:
                best = (cost, brick)
    return best[1]  # type: ignore[index]


@functools.lru_cache(maxsize=16)
def tile_tables(grid: tuple[int, int, int], kernel: tuple[int, int, int], brick: tuple[int, int, int]):
    """The call's static tables: :class:`splash_tpu.TileMask` (1, query bricks, width), the 3-D patterns used as
    (P, 3) indices into the per-axis 1-D patterns, the per-axis 1-D patterns, and the tiles run."""
    axes = [_axis_tables(n, k, b) for n, k, b in zip(grid, kernel, brick)]
    nbs = [a[0].shape[0] for a in axes]
    keys = [a[0] for a in axes]
    valid = keys[0][:, None, None, :, None, None] >= 0
    valid = valid & (keys[1][None, :, None, None, :, None] >= 0) & (keys[2][None, None, :, None, None, :] >= 0)
    kb = ((keys[0][:, None, None, :, None, None] * nbs[1] + keys[1][None, :, None, None, :, None]) * nbs[2]
          + keys[2][None, None, :, None, None, :])
    full = (axes[0][2][:, None, None, :, None, None] & axes[1][2][None, :, None, None, :, None]
            & axes[2][2][None, None, :, None, None, :])
    combo = np.stack(np.broadcast_arrays(axes[0][1][:, None, None, :, None, None],
                                         axes[1][1][None, :, None, None, :, None],
                                         axes[2][1][None, None, :, None, None, :]), -1)
    nq = math.prod(nbs)
    width = math.prod(valid.shape[3:])
    valid, kb, full = (x.reshape(1, nq, width) for x in (valid, np.where(valid, kb, 0), full))
    combo = combo.reshape(nq * width, 3)
    partial = (valid & ~full).reshape(-1)
    used, pid = np.unique(combo[partial], axis=0, return_inverse=True)
    pattern = np.zeros(nq * width, np.int64)
    pattern[partial] = pid.reshape(-1)
    state = np.where(valid, np.where(full, 2, 1), 0).astype(np.int32)
    mask = splash_tpu.compact(state, pattern.reshape(1, nq, width), keys=kb)
    return mask, used.astype(np.int32), tuple(a[3] for a in axes), int(valid.sum())


def pattern_table(used: np.ndarray, axis_patterns: tuple[np.ndarray, ...]) -> jax.Array:
    """(P, V, V) bool, built in the program: pattern p is the outer product of the 1-D patterns ``used[p]``."""
    mt, mh, mw = (jnp.asarray(a)[jnp.asarray(used[:, i])] for i, a in enumerate(axis_patterns))
    p, bt, bh, bw = len(used), mt.shape[1], mh.shape[1], mw.shape[1]
    full = (mt[:, :, None, None, :, None, None] & mh[:, None, :, None, None, :, None]
            & mw[:, None, None, :, None, None, :])
    return full.reshape(p, bt * bh * bw, bt * bh * bw)


def to_bricks(x: jax.Array, heads: int, brick: Sequence[int]) -> jax.Array:
    """(B, T, H, W, heads * D) -> (B * heads, bricks * V, D): padded to whole bricks, brick after brick."""
    b, t, h, w, c = x.shape
    bt, bh, bw = brick
    tp, hp, wp = round_up(t, bt), round_up(h, bh), round_up(w, bw)
    x = jnp.pad(x, ((0, 0), (0, tp - t), (0, hp - h), (0, wp - w), (0, 0)))
    x = x.reshape(b, tp // bt, bt, hp // bh, bh, wp // bw, bw, heads, c // heads)
    x = x.transpose(0, 7, 1, 3, 5, 2, 4, 6, 8)
    return x.reshape(b * heads, tp * hp * wp, c // heads)


def from_bricks(x: jax.Array, batch: int, grid: Sequence[int], brick: Sequence[int]) -> jax.Array:
    """The inverse of :func:`to_bricks`: (B * heads, bricks * V, D) -> (B, T, H, W, heads * D)."""
    t, h, w = grid
    bt, bh, bw = brick
    heads, d = x.shape[0] // batch, x.shape[-1]
    nbt, nbh, nbw = -(-t // bt), -(-h // bh), -(-w // bw)
    x = x.reshape(batch, heads, nbt, nbh, nbw, bt, bh, bw, d).transpose(0, 2, 5, 3, 6, 4, 7, 1, 8)
    x = x.reshape(batch, nbt * bt, nbh * bh, nbw * bw, heads * d)
    return x[:, :t, :h, :w]


def tiles_for(grid: Sequence[int], kernel: Sequence[int], head_dim: int, dtype, blocks: Blocks | None = None,
              brick: Sequence[int] | None = None) -> Blocks:
    """The call's tiles: one brick of queries against one brick of keys. The brick: ``brick``, else the blocks' (the
    table entry's), else :func:`choose_brick` of at most the entry's ``block_q`` tokens."""
    grid, kernel = tuple(int(n) for n in grid), clamp_kernel(grid, kernel)
    s = math.prod(grid)
    if blocks is None:
        from vidax_core.attention.splash_blocks import lookup

        blocks = lookup("neighborhood", s, s, head_dim, dtype)[0]
    brick = brick or blocks.brick or choose_brick(grid, kernel, max(2 ** int(math.log2(blocks.block_q)), 128))
    brick = tuple(int(b) for b in brick)
    volume = math.prod(brick)
    if volume % 128:
        raise ValueError(f"a neighbourhood brick must hold a multiple of 128 tokens, got {brick}")
    compute = min(blocks.block_kv_compute, volume)
    while volume % compute:
        compute //= 2
    return Blocks(volume, volume, max(compute, 128), brick)  # type: ignore[arg-type]


def density(grid: Sequence[int], kernel: Sequence[int], brick: Sequence[int]) -> float:
    """The (query, key) pairs the kernel computes over Sq x Sk for this grid, kernel and brick."""
    s = math.prod(int(n) for n in grid)
    return brick_tiles(grid, kernel, brick) * math.prod(brick) ** 2 / float(s * s)


def attention(q: jax.Array, k: jax.Array, v: jax.Array, kernel_size: Sequence[int], *, heads: int,
              scale: float | None = None, blocks: Blocks | None = None, brick: Sequence[int] | None = None,
              interpret: bool = False) -> tuple[jax.Array, float, tuple[int, int, int]]:
    """Neighbourhood attention of channels-last (B, T, H, W, heads * D) q / k / v on the splash kernel (the
    semantics of :func:`vidax_core.attention.kernels.neighborhood.attention`). Returns (out in ``v.dtype``, the
    density: (query, key) pairs computed over Sq x Sk, the brick). ``brick``: default the table entry's, else
    :func:`choose_brick` of at most the entry's ``block_q`` tokens."""
    if q.ndim != 5 or k.shape != q.shape or v.shape[:-1] != q.shape[:-1]:
        raise ValueError(f"q, k, v must be (B, T, H, W, heads * D) of one grid; got {q.shape}, {k.shape}, {v.shape}")
    if heads < 1 or q.shape[-1] % heads or v.shape[-1] % heads:
        raise ValueError(f"heads={heads} must divide the channels of q ({q.shape[-1]}) and v ({v.shape[-1]})")
    bsz, grid, d = q.shape[0], tuple(int(n) for n in q.shape[1:4]), q.shape[-1] // heads
    kernel = clamp_kernel(grid, kernel_size)
    s = math.prod(grid)
    t = tiles_for(grid, kernel, d, q.dtype, blocks, brick)
    brick = t.brick
    volume = t.block_q
    mask, used, axis_patterns, tiles = tile_tables(grid, kernel, brick)
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    dq, dv = splash_tpu.head_dim_padded(d), splash_tpu.head_dim_padded(v.shape[-1] // heads)

    def prep(x, dpad, s_=None):
        y = to_bricks(x, heads, brick)
        if s_ is not None and s_ != 1.0:
            y = (y.astype(jnp.float32) * np.float32(s_)).astype(x.dtype)
        return jnp.pad(y, ((0, 0), (0, 0), (0, dpad - y.shape[-1])))

    qb, kb, vb = prep(q, dq, scale), prep(k, dq), prep(v, dv)
    out = splash_tpu.run(qb, kb, vb, mask, t, patterns=pattern_table(used, axis_patterns), interpret=interpret)
    out = from_bricks(out[..., : v.shape[-1] // heads], bsz, grid, brick)
    return out.astype(v.dtype), tiles * volume * volume / float(s * s), brick  # type: ignore[return-value]
