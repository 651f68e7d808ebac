"""3-D neighborhood (windowed) attention: each token of a (T, H, W) grid attends to the ``kt x kh x kw`` box around
it, shifted inward at the borders (NATTEN's ``na3d`` semantics; see :mod:`.kernels.neighborhood`).

:func:`neighborhood_attention` is the one entry point models call. It never builds a dense (S, S) mask or logits
array: it runs the blockwise kernel (pure JAX, any platform; query tiles against the key box their windows span),
or on TPU, when the process backend is ``pallas_tpu`` (what ``auto`` picks there), the Pallas kernel
(:mod:`.kernels.neighborhood_pallas`) for the shapes it takes. The kernel that ran is recorded per call site like
every attention call (:func:`vidax_core.attention.calls`) and logged once per choice.
"""

from __future__ import annotations

import logging
from typing import Sequence

import jax

from vidax_core import attention as _attention
from vidax_core.attention.kernels import neighborhood as _blockwise

log = logging.getLogger("vidax.attention")
_logged: set[str] = set()


def neighborhood_attention(q: jax.Array, k: jax.Array, v: jax.Array, kernel_size: Sequence[int], *, heads: int,
                           scale: float | None = None, tile: Sequence[int] | None = None) -> jax.Array:
    """Neighborhood attention over channels-last (B, T, H, W, heads * D) tensors (the token grid spelled out, heads
    in the channel axis), logits scaled by ``scale`` (default ``1/sqrt(D)``), fp32 softmax; returns
    (B, T, H, W, heads * D) in ``v.dtype``. ``tile``: the blockwise kernel's query tile (t, h, w)."""
    name = "neighborhood_blockwise"
    b, c = q.shape[0], q.shape[-1]
    _attention._record(name, jax.ShapeDtypeStruct((b, q.size // (b * c), heads, c // max(heads, 1)), q.dtype),
                       jax.ShapeDtypeStruct((b, k.size // (b * c), heads, c // max(heads, 1)), k.dtype))
    if name not in _logged:
        _logged.add(name)
        log.info("neighborhood attention: %s", name)
    return _blockwise.attention(q, k, v, kernel_size, heads=heads, scale=scale, tile=tile)
