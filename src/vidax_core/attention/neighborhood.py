"""3-D neighborhood (windowed) attention: each token of a (T, H, W) grid attends to the ``kt x kh x kw`` box around
it, shifted inward at the borders (NATTEN's ``na3d`` semantics; see :mod:`.kernels.neighborhood`).

:func:`neighborhood_attention` is the one entry point models call. It never builds a dense (S, S) mask or logits
array: when the attention backend is ``splash`` (what ``auto`` picks on a TPU) it runs the splash kernel on a brick
layout of the grid, skipping every tile outside the windows (:mod:`.kernels.splash_neighborhood`); otherwise the
blockwise kernel (pure JAX, any platform; query tiles against the key box their windows span). The kernel that ran,
its tiles and the share of the dense work it does (``density``, for the FLOP count: :mod:`.sparsity`) are recorded
per call site like every attention call (:func:`vidax_core.attention.calls`) and logged once per choice.
"""

from __future__ import annotations

import logging
import math
from typing import Sequence

import jax

from vidax_core import attention as _attention
from vidax_core.attention import sparsity
from vidax_core.attention.kernels import neighborhood as _blockwise

log = logging.getLogger("vidax.attention")
_logged: set[str] = set()


def blockwise_density(grid: Sequence[int], kernel: Sequence[int], tile: Sequence[int] | None) -> float:
    """The blockwise kernel's (query, key) pairs over Sq x Sk: every query tile against its whole key box."""
    kernel = _blockwise.clamp_kernel(grid, kernel)
    tile = _blockwise.fit_tile(grid, tile)
    box = _blockwise.box_sizes(grid, kernel, tile)
    tiles = math.prod(-(-n // b) for n, b in zip(grid, tile))
    s = math.prod(grid)
    return tiles * math.prod(tile) * math.prod(box) / float(s * s)


def computed_density(grid: Sequence[int], kernel: Sequence[int], *, head_dim: int, dtype=jax.numpy.bfloat16,
                     backend: str | None = None) -> float:
    """The share of the dense (Sq x Sk) pairs the kernel ``backend`` (default: the current one) computes for one
    call on ``grid`` with ``kernel``, as :func:`neighborhood_attention` records it: the FLOP count's factor."""
    grid = tuple(int(n) for n in grid)
    if (backend or _attention.get_backend()) == "splash":
        from vidax_core.attention.kernels import splash_neighborhood

        kernel = _blockwise.clamp_kernel(grid, kernel)
        brick = splash_neighborhood.tiles_for(grid, kernel, head_dim, dtype).brick
        return splash_neighborhood.density(grid, kernel, brick)
    return blockwise_density(grid, kernel, None)


def neighborhood_attention(q: jax.Array, k: jax.Array, v: jax.Array, kernel_size: Sequence[int], *, heads: int,
                           scale: float | None = None, tile: Sequence[int] | None = None) -> jax.Array:
    """Neighborhood attention over channels-last (B, T, H, W, heads * D) tensors (the token grid spelled out, heads
    in the channel axis), logits scaled by ``scale`` (default ``1/sqrt(D)``), fp32 softmax; returns
    (B, T, H, W, heads * D) in ``v.dtype``. ``tile``: the blockwise kernel's query tile (t, h, w); the splash
    kernel's brick comes from its block table."""
    b, c = q.shape[0], q.shape[-1]
    grid = tuple(int(n) for n in q.shape[1:4])
    shapes = [jax.ShapeDtypeStruct((b, x.size // (b * x.shape[-1]), heads, c // max(heads, 1)), x.dtype)
              for x in (q, k)]
    if _attention.get_backend() == "splash":
        from vidax_core.attention.kernels import splash_neighborhood

        name = "neighborhood (splash)"
        out, density, brick = splash_neighborhood.attention(q, k, v, kernel_size, heads=heads, scale=scale)
        where = _attention._record(name, *shapes, tiles="brick " + "x".join(map(str, brick)))
    else:
        name = "neighborhood_blockwise"
        out = _blockwise.attention(q, k, v, kernel_size, heads=heads, scale=scale, tile=tile)
        density = blockwise_density(grid, kernel_size, tile)
        where = _attention._record(name, *shapes)
    sparsity.set_density(where, "neighborhood", density)
    if name not in _logged:
        _logged.add(name)
        log.info("neighborhood attention: %s", name)
    return out
