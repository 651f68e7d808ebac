"""A lazy parameter (:class:`vidax_core.io.lazy.LazyLeaf`) onto the devices with one host copy of one piece at a time.

A leaf small enough is read and transferred whole. A large leaf goes a range of its leading axis at a time (a
stacked leaf's layers, a large tensor's rows; at most :data:`STEP_BYTES` of host staging) into a device buffer of its
full size that each piece updates in place (the buffer is donated to the update), so host memory never holds the
whole converted leaf and the device never two copies of it.
Under ``jax.distributed`` each process reads only the pieces of its own devices' shards.
"""

from __future__ import annotations

import functools
import gc
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from vidax_core.io.lazy import LazyLeaf
from vidax_core.quant.cpu_bits import held, held_dtype

STEP_BYTES = 256 << 20  # host staging per transfer of a stacked leaf


def place(leaf: LazyLeaf, sharding: Any = None) -> jax.Array:
    """``leaf`` read and placed on ``sharding`` (None: the default device, uncommitted, as ``jax.device_put``
    places an array, so a later program may move it to its mesh); float8 on the CPU backend as its uint8 bits
    (:mod:`vidax_core.quant.cpu_bits`)."""
    if jax.process_count() > 1 and sharding is not None:
        return jax.make_array_from_callback(leaf.shape, sharding, lambda idx: held(_read_index(leaf, idx), sharding))
    step = _rows_per_step(leaf)
    if step is None or not _layer_axis_whole(sharding, leaf.ndim):
        host = held(leaf.read(), sharding)
        out = jax.block_until_ready(jax.device_put(host, sharding))
        del host
        return out
    buf = _zeros(leaf.shape, held_dtype(leaf.dtype, sharding), sharding)()
    for lo in range(0, leaf.shape[0], step):  # the last piece may be shorter: one more update program
        host = held(leaf.read_rows(lo, min(lo + step, leaf.shape[0])), sharding)
        buf = _write(buf, jax.device_put(host, sharding), lo)
        jax.block_until_ready(buf)
        del host
    gc.collect(0)  # transfer handles can hold their host buffers in reference cycles
    return buf


def _rows_per_step(leaf: LazyLeaf) -> int | None:
    """Rows of the leading axis (a stacked leaf's layers, a large tensor's rows) per transfer, at most
    :data:`STEP_BYTES` of them; None when the leaf goes whole (small enough, or a tensor that must be read whole:
    one quantized at load)."""
    if leaf.nbytes <= STEP_BYTES or leaf.ndim == 0 or leaf.shape[0] < 2 or not leaf.rows_readable():
        return None
    per_row = max(leaf.nbytes // leaf.shape[0], 1)
    return max(1, min(leaf.shape[0], STEP_BYTES // per_row))


def _layer_axis_whole(sharding: Any, ndim: int) -> bool:
    """The leading (layer) axis is not split over devices, so a range of layers takes the leaf's sharding."""
    spec = getattr(sharding, "spec", None)
    return sharding is None or spec is None or len(spec) == 0 or spec[0] is None


def _read_index(leaf: LazyLeaf, index: tuple) -> np.ndarray:
    """The part of ``leaf`` one device's shard holds (``index``: a tuple of slices)."""
    if leaf.stacked and index and isinstance(index[0], slice):
        lo, hi, _ = index[0].indices(leaf.shape[0])
        return np.ascontiguousarray(leaf.read(lo, hi)[(slice(None),) + tuple(index[1:])])
    return np.ascontiguousarray(leaf.read()[index])


@functools.lru_cache(maxsize=256)
def _zeros(shape: tuple[int, ...], dtype: np.dtype, sharding: Any) -> Any:
    """The program making a zero buffer of ``shape`` on ``sharding`` (cached per shape, not the buffer itself)."""
    if sharding is None:
        return jax.jit(lambda: jnp.zeros(shape, dtype))
    return jax.jit(lambda: jnp.zeros(shape, dtype), out_shardings=sharding)


@functools.partial(jax.jit, donate_argnums=0)
def _update(buf: jax.Array, part: jax.Array, lo: jax.Array) -> jax.Array:
    return jax.lax.dynamic_update_slice_in_dim(buf, part, lo, axis=0)


def _write(buf: jax.Array, part: jax.Array, lo: int) -> jax.Array:
    return _update(buf, part, jnp.int32(lo))
