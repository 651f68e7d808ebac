"""NABLA sparse attention (Kandinsky 5's ``nablaT_v2``): a block-sparse self-attention over video tokens whose block
mask is chosen per call from the queries and keys, run by the blockwise kernel without any dense (S, S) array.

The sequence is cut into blocks of :data:`BLOCK` (64) consecutive tokens; a caller orders its video tokens so that
a block is a spatial 8x8 patch of one frame (Kandinsky's "fractal" order). For each head:

1. block means of q and k give a (S/64, S/64) map ``softmax(q_mean k_mean^T / sqrt(D))`` per query block;
2. per query block, the key blocks that hold the top ``threshold`` of that map's mass are kept: sorted ascending,
   cumulated, kept where the cumulative sum reaches ``1 - threshold`` (the reference's ``topcdf``);
3. the STA mask is OR-ed in: key blocks within a window of (frames, block rows, block columns) of the query's
   block (:func:`sta_mask`);
4. attention runs exactly over the kept (query block, key block) pairs (the reference's flex-attention
   ``BlockMask`` of full blocks): on the splash kernel when the backend is ``splash`` (:mod:`.kernels.splash_nabla`:
   tiles of a few mask blocks, partly kept tiles masked by their bit pattern), else on
   :func:`vidax_core.attention.kernels.blockwise.attention` with the block mask, which expands each tile's slice of
   it and skips tiles that are all masked. Either way the share of the dense work the kernel does is measured as the
   program runs (:func:`vidax_core.attention.sparsity.measure`), so the FLOP count is the work computed.

Masks are computed in float32 from the q and k the attention gets (Kandinsky's are rounded to bfloat16 after RoPE).
Under sequence parallelism the function runs after the Ulysses all-to-all, on the whole sequence of its heads
(:func:`vidax_core.attention.ulysses.self_attention` with ``fn=``), so the mask is the one-device mask.
"""

from __future__ import annotations

import functools
import math
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

BLOCK = 64  # tokens per mask block (an 8x8 patch of one frame)
TILE = 512  # tokens per tile of the blockwise kernel (8 mask blocks)


@functools.lru_cache(maxsize=32)
def sta_mask(grid: tuple[int, int, int], window: tuple[int, int, int]) -> np.ndarray:
    """(n, n) bool over the blocks of a (frames, block rows, block columns) ``grid`` in row-major order: block j is
    visible from block i when every axis is within ``window // 2`` (the reference's ``fast_sta_nabla``)."""
    axes = [np.abs(np.arange(n)[:, None] - np.arange(n)[None, :]) <= w // 2 for n, w in zip(grid, window)]
    t, h, w = axes
    near = t[:, None, None, :, None, None] & h[None, :, None, None, :, None] & w[None, None, :, None, None, :]
    n = int(np.prod(grid))
    return near.reshape(n, n)


def block_mask(q: jax.Array, k: jax.Array, sta: jax.Array, threshold: float) -> jax.Array:
    """(B, H, n, n) bool: the key blocks each query block attends to (module docstring, steps 1-3); q, k
    (B, S, H, D) with S = n x :data:`BLOCK`."""
    b, s, h, d = q.shape
    n = s // BLOCK
    means = [x.astype(jnp.float32).reshape(b, n, BLOCK, h, d).mean(axis=2) for x in (q, k)]
    scores = jnp.einsum("bqhd,bkhd->bhqk", *means, precision=jax.lax.Precision.HIGHEST) / np.float32(math.sqrt(d))
    probs = jax.nn.softmax(scores, axis=-1)
    order = jnp.argsort(probs, axis=-1)
    kept = jnp.cumsum(jnp.take_along_axis(probs, order, axis=-1), axis=-1) >= np.float32(1.0 - threshold)
    kept = jnp.take_along_axis(kept, jnp.argsort(order, axis=-1), axis=-1)
    return kept | jnp.asarray(sta)[None, None]


def nabla_attention(q: jax.Array, k: jax.Array, v: jax.Array, *, grid: Sequence[int], window: Sequence[int],
                    threshold: float, tile: int = TILE) -> jax.Array:
    """Block-sparse self-attention of (B, S, H, D) q / k / v whose S tokens are the ``grid`` (frames, block rows,
    block columns) blocks of :data:`BLOCK` tokens each, in row-major block order; ``window``: the STA window
    (frames, rows, columns); ``threshold``: the share of each query block's map mass its kept blocks hold.
    ``tile``: the blockwise kernel's tile; the splash kernel's come from its block table."""
    from vidax_core.attention import _record, get_backend, sparsity
    from vidax_core.attention.kernels import blockwise, splash_nabla, splash_tpu

    grid = tuple(int(g) for g in grid)
    if q.shape[1] != int(np.prod(grid)) * BLOCK:
        raise ValueError(f"NABLA: {q.shape[1]} tokens are not the {grid} blocks of {BLOCK}")
    mask = block_mask(q, k, sta_mask(grid, tuple(int(w) for w in window)), threshold)
    b, s, h, _ = q.shape
    if get_backend() == "splash":
        t = splash_tpu.tiles_for("nabla", s, s, q.shape[3], q.dtype)
        where = _record("nabla (splash)", q, k, tiles=str(t))
        return splash_nabla.attention(q, k, v, mask, BLOCK, blocks=t,
                                      on_density=lambda c, d: sparsity.measure(where, "nabla", c, d))
    where = _record("nabla (blockwise)", q, k, tiles=f"{tile}x{tile}")
    sparsity.measure(where, "nabla", blockwise_pairs(mask, tile), float(b * h * s * s))
    return blockwise.attention(q, k, v, block_mask=mask, mask_block=BLOCK, block_q=tile, block_k=tile)


def blockwise_pairs(mask: jax.Array, tile: int = TILE) -> jax.Array:
    """The (query, key) pairs the blockwise kernel computes under a (B, H, n, n) block mask: its (tile, tile)
    tiles that hold a kept block, whole (traced float32)."""
    b, h, n, _ = mask.shape
    per = max(1, tile // BLOCK)
    side = min(per, n) * BLOCK
    runs = jnp.any(jnp.pad(mask, ((0, 0), (0, 0), (0, -n % per), (0, -n % per))).reshape(
        b, h, -(-n // per), per, -(-n // per), per), axis=(3, 5))
    return jnp.sum(runs).astype(jnp.float32) * side * side
