"""One checkpoint tensor converted onto one parameter, for 8-bit parameters and 8-bit sources.

:func:`vidax_core.io.convert.convert` calls :func:`prepare` for every tensor. A full-precision parameter gets
the tensor itself (an 8-bit source dequantised, ``w.astype(f32) * scale``). An 8-bit parameter (a kernel with a
``kernel_scale`` sibling) gets 8-bit values and a scale over its output axis: the source's own 8-bit values when
their dtype is the parameter's (no rounding added), else the tensor quantized at load. The source scale goes
through the rule's transform with its weight (as a zero-stride broadcast, no memory), so a torch ``[out, 1]``
scale of an ``(out, in)`` weight lands over the last axis of the ``(in, out)`` kernel.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from vidax_core.errors import UserError
from vidax_core.quant import modes
from vidax_core.quant.source import Quantized

SCALE = "kernel_scale"


def scale_path(path: tuple, abstract: Any) -> tuple | None:
    """The path of the scale of an 8-bit kernel at ``path`` (None for any other parameter)."""
    if path and path[-1] == "kernel":
        sp = path[:-1] + (SCALE,)
        if sp in abstract:
            return sp
    return None


def _source(value: Any) -> tuple[np.ndarray, np.ndarray | None, str]:
    if isinstance(value, Quantized):
        return value.array(), value.scale, value.key
    if callable(value):
        value = value()
    arr = np.asarray(value)
    return arr, (np.ones((), np.float32) if modes.is_8bit(arr.dtype) else None), ""


def _per_element(scale: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """A per-tensor or per-output-channel (axis 0) scale broadcast to the source weight's shape (zero strides)."""
    if scale.size == 1:
        return np.broadcast_to(scale.reshape(()), shape)
    return np.broadcast_to(scale.reshape((shape[0],) + (1,) * (len(shape) - 1)), shape)


def _reduce_to(scale_full: np.ndarray, want: tuple[int, ...], key: str) -> np.ndarray:
    """The per-output-channel scale ``want`` of a transformed broadcast scale: index 0 of every axis ``want``
    reduces, checked to be constant along it (a transform that mixed the output axis into another would not be)."""
    idx = tuple(slice(0, 1) if w == 1 and d != 1 else slice(None) for w, d in zip(want, scale_full.shape))
    out = np.ascontiguousarray(scale_full[idx])
    zero_stride = all(scale_full.strides[a] == 0 for a, w in enumerate(want) if w == 1 and scale_full.shape[a] != 1)
    if not zero_stride and not np.array_equal(np.broadcast_to(out, scale_full.shape), scale_full):
        raise UserError(f"checkpoint tensor {key}: its per-channel scale does not follow the layer's output axis "
                        "after conversion: this layout cannot stay 8-bit (plugin bug: report it)")
    return out


def prepare(value: Any, transform: Callable | None, target_dtype: Any, scale_shape: tuple[int, ...] | None,
            check_only: bool = False,
            want_shape: tuple[int, ...] | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """(array for the parameter, its scale or None) from one source ``value`` (array, loader or Quantized).

    ``scale_shape``: the per-layer shape of the parameter's scale when it is 8-bit (None: full precision);
    ``target_dtype``: the parameter's dtype; ``want_shape``: the parameter's (per-layer) shape, a tensor of another
    shape is returned as it is for the caller to report. The array is returned in the parameter's dtype for 8-bit
    targets; full-precision targets get a float array the caller casts."""
    data, scale, key = _source(value)
    t = transform(data) if transform is not None else data
    if check_only:
        return t, (np.zeros(scale_shape, np.float32) if scale_shape is not None else None)
    st = None
    if scale is not None:
        full = _per_element(scale, data.shape)
        st = transform(full) if transform is not None else full
    if scale_shape is None:  # a full-precision parameter
        if st is None:
            return t, None
        return modes.dequantize(t, st), None
    if t.ndim != len(scale_shape) or (want_shape is not None and tuple(t.shape) != tuple(want_shape)):
        return t, None  # mis-shaped: the caller reports it
    mode = modes.mode_of_dtype(target_dtype)
    if st is not None and np.dtype(t.dtype) == np.dtype(target_dtype) and st.shape == t.shape:
        return t, _reduce_to(st, scale_shape, key)
    w = modes.dequantize(t, st) if st is not None else t  # a plain source is quantized a row block at a time
    q, s = modes.quantize(w, mode)
    return q, s.reshape(scale_shape) if s.shape != scale_shape else s
