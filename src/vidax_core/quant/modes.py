"""The 8-bit storage dtypes and the one quantizer every path uses (at load, on a merged LoRA, in benchmarks).

``float8_e4m3fn``: absmax scaling per tensor, ``scale = amax / 448`` (as ComfyUI's scaled_fp8 files);
``int8``: symmetric per output channel, ``scale = amax / 127`` (as LightX2V's int8 files). A weight is
``q.astype(f32) * scale``. An all-zero tensor or channel gets scale 1 (its values are exact zeros either way).
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

WEIGHT_DTYPES = ("float8_e4m3fn", "int8")
FP8_MAX = 448.0
INT8_MAX = 127.0


def storage_dtype(mode: str) -> np.dtype:
    """numpy dtype of the stored 8-bit values of ``mode``."""
    return np.dtype(ml_dtypes.float8_e4m3fn) if mode == "float8_e4m3fn" else np.dtype(np.int8)


def mode_of_dtype(dtype: Any) -> str | None:
    """The mode whose storage is ``dtype`` (None for a float dtype other than e4m3fn)."""
    name = np.dtype(dtype).name
    return name if name in WEIGHT_DTYPES else None


def is_8bit(dtype: Any) -> bool:
    if dtype is None:
        return False
    try:
        return np.dtype(dtype).itemsize == 1
    except TypeError:
        return False


BLOCK_ELEMENTS = 1 << 22  # numpy quantizes a larger tensor a row block at a time (4 Mi fp32 values of staging)


def quantize(w: Any, mode: str, per_tensor_axes: tuple[int, ...] = (), xp: Any = np) -> tuple[Any, Any]:
    """(8-bit values, fp32 scale) of the float array ``w`` laid out as a kernel ``(..., in, out)``.

    The scale has ``w``'s rank, one value per output channel (the last axis) for int8, one per tensor for fp8,
    broadcast over the output axis so both modes store the same scale shape. Axes in ``per_tensor_axes`` (a
    stacked layer axis) keep their own scales. ``xp`` is numpy or jax.numpy (the same arithmetic in both); numpy
    works on a large tensor a block of its first axis at a time, so no float32 copy of the whole tensor is made
    (the values are the same: a maximum and element-wise operations)."""
    if xp is np and np.size(w) > BLOCK_ELEMENTS and np.ndim(w) >= 1:
        return _quantize_blocked(np.asarray(w), mode, per_tensor_axes)
    w = xp.asarray(w).astype(xp.float32)
    keep = {a % w.ndim for a in per_tensor_axes}
    if mode == "int8":
        keep.add(w.ndim - 1)
    reduce = tuple(a for a in range(w.ndim) if a not in keep)
    amax = xp.max(xp.abs(w), axis=reduce, keepdims=True) if reduce else xp.abs(w)
    top = INT8_MAX if mode == "int8" else FP8_MAX
    scale = xp.where(amax > 0, amax, top) / top
    scaled = w / scale
    if mode == "int8":
        q = xp.clip(xp.round(scaled), -INT8_MAX, INT8_MAX).astype(xp.int8)
    else:
        q = xp.clip(scaled, -FP8_MAX, FP8_MAX).astype(ml_dtypes.float8_e4m3fn)
    out_shape = tuple(1 if (a != w.ndim - 1 and a not in keep) else w.shape[a] for a in range(w.ndim))
    return q, xp.broadcast_to(scale, out_shape).astype(xp.float32)


def dequantize(q: Any, scale: Any, xp: Any = np) -> Any:
    """``q.astype(f32) * scale`` (fp32)."""
    return q.astype(xp.float32) * xp.asarray(scale).astype(xp.float32)


def _quantize_blocked(w: np.ndarray, mode: str, per_tensor_axes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`quantize` in numpy over row blocks of ``w``'s first axis: a pass for the maxima, a pass for the values
    into the 8-bit output (a first axis with scales of its own goes slice by slice)."""
    nd = w.ndim
    keep = {a % nd for a in per_tensor_axes}
    if 0 in keep and nd > 1:
        inner = tuple(a % nd - 1 for a in per_tensor_axes if a % nd != 0)
        parts = [quantize(w[i], mode, inner) for i in range(w.shape[0])]
        return np.stack([q for q, _ in parts]), np.stack([s for _, s in parts])
    if mode == "int8":
        keep.add(nd - 1)
    reduce = tuple(a for a in range(nd) if a not in keep)
    rows = w.shape[0]
    step = max(1, BLOCK_ELEMENTS // max(1, w.size // max(rows, 1)))
    amax = None
    for lo in range(0, rows, step):
        block = np.abs(w[lo:lo + step].astype(np.float32))
        m = np.max(block, axis=reduce, keepdims=True) if reduce else block
        amax = m if amax is None else np.maximum(amax, m)
    top = INT8_MAX if mode == "int8" else FP8_MAX
    scale = np.where(amax > 0, amax, top) / top
    q = np.empty(w.shape, storage_dtype(mode))
    for lo in range(0, rows, step):
        scaled = w[lo:lo + step].astype(np.float32) / scale
        if mode == "int8":
            q[lo:lo + step] = np.clip(np.round(scaled), -INT8_MAX, INT8_MAX).astype(np.int8)
        else:
            q[lo:lo + step] = np.clip(scaled, -FP8_MAX, FP8_MAX).astype(ml_dtypes.float8_e4m3fn)
    out_shape = tuple(1 if (a != nd - 1 and a not in keep) else w.shape[a] for a in range(nd))
    return q, np.broadcast_to(scale, out_shape).astype(np.float32)
