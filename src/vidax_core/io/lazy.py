"""Parameter values read from the checkpoint when they are placed, a layer range at a time.

:func:`vidax_core.io.convert.convert` checks every key and shape from the file headers and returns one
:class:`LazyLeaf` per parameter instead of host arrays. Placement (:mod:`vidax_core.parallel.place`, the offload
pools) reads a leaf, or a range of a stacked leaf's layers, into the buffer it needs and drops it, so the host
never holds a converted copy of the whole model beside the memory-mapped file. ``np.asarray(leaf)`` still gives
the whole array for callers that want one.

An 8-bit kernel and its ``kernel_scale`` come from one source tensor: reading the kernel leaves its scale in a
:class:`ScaleMemo`, which the scale leaf takes, so a weight quantized at load is quantized once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from vidax_core.io.switch import ThreadSwitch
from vidax_core.quant import leaf as quant_leaf


class ScaleMemo:
    """Scales computed while reading 8-bit kernels, kept until their scale leaf takes them (small arrays)."""

    def __init__(self) -> None:
        self._scales: dict[str, np.ndarray] = {}

    def put(self, key: str, scale: np.ndarray) -> None:
        self._scales[key] = scale

    def take(self, key: str) -> np.ndarray | None:
        return self._scales.pop(key, None)


@dataclass(frozen=True)
class Part:
    """One source tensor feeding a parameter (or one layer of a stacked parameter).

    ``role`` is ``"value"`` or ``"scale"`` (the scale of an 8-bit kernel read from the same tensor);
    ``scale_shape`` is the per-layer scale shape of an 8-bit kernel (None for a full-precision parameter)."""

    key: str
    source: Mapping[str, Any]
    transform: Callable | None
    want_dtype: np.dtype
    scale_shape: tuple[int, ...] | None
    want_shape: tuple[int, ...]
    role: str = "value"

    def read(self, memo: ScaleMemo, on_tensor: Callable[[str, int], None] | None) -> np.ndarray:
        if self.role == "scale":
            found = memo.take(self.key)
            if found is not None:
                return found
        arr, scale = quant_leaf.prepare(self.source[self.key], self.transform, self.want_dtype, self.scale_shape,
                                        want_shape=self.want_shape)
        if on_tensor is not None and self.role == "value":
            on_tensor(self.key, int(arr.nbytes))
        if self.role == "scale":
            return scale
        if scale is not None:
            memo.put(self.key, scale)
        return arr


def _rows(part: Part, lo: int, hi: int) -> np.ndarray | None:
    """Rows ``[lo, hi)`` of a full-precision part read alone (None when the whole tensor must be read: an 8-bit
    target, a quantized or computed source)."""
    from vidax_core.quant.source import Quantized

    if part.scale_shape is not None or part.role != "value":
        return None
    value = part.source[part.key]
    if isinstance(value, Quantized) or callable(value) or not hasattr(value, "shape"):
        return None
    t = part.transform(value) if part.transform is not None else value
    if tuple(t.shape) != tuple(part.want_shape):
        return None
    return np.asarray(t[lo:hi], part.want_dtype)


class LazyLeaf:
    """A parameter of ``shape`` / ``dtype`` not read yet: one part, or one part per layer of a stacked leaf."""

    def __init__(self, shape: Sequence[int], dtype: Any, parts: Sequence[Part], *, stacked: bool, memo: ScaleMemo,
                 on_tensor: Callable[[str, int], None] | None = None) -> None:
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.parts = tuple(parts)
        self.stacked = stacked
        self._memo = memo
        self._on_tensor = on_tensor

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def layers(self) -> int:
        return self.shape[0] if self.stacked else 1

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(p.key for p in self.parts)

    def source_dtypes(self) -> set:
        """The dtypes the file stores this parameter's tensors in (from the headers where the source says them)."""
        from vidax_core.quant.source import dtype_of

        out = set()
        for p in self.parts:
            d = dtype_of(p.source, p.key)
            if d is not None:
                out.add(np.dtype(d))
        return out

    def read(self, lo: int = 0, hi: int | None = None) -> np.ndarray:
        """Layers ``[lo, hi)`` of a stacked leaf as one new array (the whole leaf when not stacked)."""
        if not self.stacked:
            arr = self.parts[0].read(self._memo, self._on_tensor)
            return np.asarray(arr, self.dtype)
        hi = self.shape[0] if hi is None else hi
        out = np.empty((hi - lo,) + self.shape[1:], self.dtype)
        for i in range(lo, hi):
            out[i - lo] = self.parts[i].read(self._memo, self._on_tensor)
        return out

    def read_rows(self, lo: int, hi: int) -> np.ndarray:
        """Rows ``[lo, hi)`` of the leaf's first axis: a stacked leaf's layers, or a single tensor's rows converted
        alone where its source allows (a full-precision target of a plain source), else sliced from a whole read."""
        if self.stacked:
            return self.read(lo, hi)
        got = _rows(self.parts[0], lo, hi)
        if got is None:
            return self.read()[lo:hi]
        if lo == 0 and self._on_tensor is not None:
            self._on_tensor(self.parts[0].key, self.nbytes)
        return np.asarray(got, self.dtype)

    def rows_readable(self) -> bool:
        """Whether :meth:`read_rows` reads only the rows asked for."""
        if self.stacked:
            return True
        p = self.parts[0]
        from vidax_core.quant.source import Quantized

        if p.scale_shape is not None or p.role != "value":
            return False
        value = p.source[p.key]
        return not (isinstance(value, Quantized) or callable(value) or not hasattr(value, "shape"))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.read()
        return a if dtype is None else a.astype(dtype)

    def __getitem__(self, index: Any) -> np.ndarray:
        return self.read()[index]

    def tolist(self) -> list:
        return self.read().tolist()

    def astype(self, dtype: Any, copy: bool = True) -> np.ndarray:
        return self.read().astype(dtype, copy=copy)

    def __repr__(self) -> str:
        return f"LazyLeaf({self.shape}, {self.dtype}, {len(self.parts)} source tensors)"


_CHECK_ONLY = ThreadSwitch()


def check_only():
    """Within this context :func:`vidax_core.nn.state.materialize` places nothing: a loader checks every key and
    shape of its checkpoint (from the headers) and returns its module with shapes for arrays. For checking a
    checkpoint folder's layout against the loaders without reading (or holding) any weight."""
    return _CHECK_ONLY.turned_on()


def checking_only() -> bool:
    return _CHECK_ONLY.on


def is_lazy(value: Any) -> bool:
    return isinstance(value, LazyLeaf)


def read_all(value: Any) -> np.ndarray:
    """A lazy leaf read whole, anything else as an array."""
    return value.read() if isinstance(value, LazyLeaf) else np.asarray(value)


def nbytes(value: Any) -> int:
    return int(value.nbytes) if hasattr(value, "nbytes") else int(np.asarray(value).nbytes)


def read_layers(value: Any, lo: int, hi: int) -> Any:
    """Layers ``[lo, hi)`` of a stacked parameter: read from the checkpoint for a lazy leaf, sliced on its device for
    a jax array (random benchmark weights), a view of a host array otherwise."""
    if isinstance(value, LazyLeaf):
        return value.read(lo, hi)
    if hasattr(value, "addressable_shards"):
        return value[lo:hi]
    return np.asarray(value)[lo:hi]
