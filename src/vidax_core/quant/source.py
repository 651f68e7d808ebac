"""A checkpoint's tensors with the 8-bit layouts of :mod:`.formats` folded in: each scaled ``<layer>.weight``
becomes one :class:`Quantized` value (its 8-bit data, still lazy, and its checked scale) and the scale, marker,
tag and input-scale tensors disappear, so a family's key table sees one weight per layer, as in a bf16 file.

Every malformed case is one :class:`~vidax_core.errors.UserError` before any weight is read: a scale of the wrong
shape, NaN or zero, a scale without its weight, a tagged layer without a scale, a marker without any scale, an
int8 weight without a scale, a format vidax cannot run (nvfp4).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

import numpy as np

from vidax_core.errors import UserError
from vidax_core.quant import formats, modes


@dataclass(frozen=True)
class Quantized:
    """One 8-bit (or scaled) weight in its source layout: ``data`` (an array or a zero-arg loader) and ``scale``
    (fp32: one value, or one per output channel as ``[out]`` / ``[out, 1]``)."""

    data: Any
    scale: np.ndarray
    key: str = ""

    def array(self) -> np.ndarray:
        return np.asarray(self.data() if callable(self.data) else self.data)

    def with_data(self, fn: Any) -> "Quantized":
        """The same weight with its 8-bit values through ``fn`` (lazily), the scale unchanged: for a family's own
        split of a fused weight along its input axis (the output channels, and so the scale, stay as they are)."""
        return Quantized(lambda: fn(self.array()), self.scale, self.key)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """The dequantised weight (fp32), for a family's own lazy transform that reads the value as an array
        before the key table (e.g. splitting a fused weight): correct, at the cost of the 8-bit values being
        quantized again at load."""
        w = self.array()
        out = w.astype(np.float32) * self.scale.reshape(self.scale.shape + (1,) * (w.ndim - self.scale.ndim)
                                                         if self.scale.size > 1 else ())
        return out if dtype is None else out.astype(dtype)


def dtype_of(source: Mapping[str, Any], key: str) -> np.dtype | None:
    """A tensor's dtype, from the file header where the source can say it (no data read); None when only reading
    the tensor would tell (a lazy loader: such a source is taken as holding no 8-bit weights)."""
    if hasattr(source, "dtype"):
        d = source.dtype(key)
        return None if d is None else np.dtype(d)
    v = source[key]
    if hasattr(v, "dtype"):
        return np.dtype(v.dtype)
    return None if callable(v) else np.asarray(v).dtype


def shape_of(source: Mapping[str, Any], key: str) -> tuple[int, ...]:
    if hasattr(source, "shape"):
        return tuple(source.shape(key))
    v = source[key]
    return tuple(v.shape) if hasattr(v, "shape") else np.asarray(v() if callable(v) else v).shape


def metadata_of(source: Any) -> dict:
    """The safetensors metadata of a tensor source (merged over its files; empty when it has none)."""
    for attr in ("metadata",):
        meta = getattr(source, attr, None)
        if isinstance(meta, Mapping):
            return dict(meta)
    inner = getattr(source, "source", None) or getattr(source, "_source", None)
    return metadata_of(inner) if inner is not None else {}


def _renamed(source: Any, original: str) -> str:
    """The key under which ``source`` shows the file's key ``original`` (a renaming view answers in its own
    names; the metadata names the file's)."""
    while source is not None:
        names = getattr(source, "original", None)
        if isinstance(names, Mapping):
            inverse = {v: k for k, v in names.items()}
            return inverse.get(original, original)
        source = getattr(source, "source", None) or getattr(source, "_source", None)
    return original


@dataclass
class Layout:
    """What a checkpoint's tensors say about 8-bit storage."""

    name: str | None = None  # scaled_fp8 | comfy_quant | lightx2v | fp8 | int8 | None (no 8-bit weights)
    mode: str | None = None  # the 8-bit mode of its weights (the run's default)
    scales: dict[str, str] = field(default_factory=dict)  # weight key -> scale key
    hidden: set[str] = field(default_factory=set)  # keys folded into their weights
    notes: list[str] = field(default_factory=list)


def read_layout(source: Mapping[str, Any], where: str = "checkpoint") -> Layout:
    """Recognise the layout of ``source`` from its key names, dtypes and metadata (scales are not read here)."""
    keys = list(source)
    keyset = set(keys)
    lay = Layout()
    markers = [k for k in keys if formats.is_marker(k)]
    tags = {k[: -len(formats.TAG_SUFFIX)]: k for k in keys if k.endswith(formats.TAG_SUFFIX)}
    meta_layers = formats.metadata_layers(metadata_of(source), where)
    confs: dict[str, dict] = {_renamed(source, layer + ".weight")[:-7]: c for layer, c in meta_layers.items()}
    for layer, k in tags.items():
        confs[layer] = formats.read_tag(source[k], k)
    for layer, conf in confs.items():
        formats.check_comfy_layer(layer, conf)
        if layer + ".weight" not in keyset:
            raise UserError(f"{where}: layer {layer} is tagged as quantized but has no {layer}.weight: "
                            "re-download the checkpoint")
        if layer + ".weight_scale" not in keyset:
            raise UserError(f"{where}: layer {layer} is tagged {conf.get('format')} but has no {layer}.weight_scale: "
                            "re-download the checkpoint")
    for k in keys:
        for suffix in formats.SCALE_SUFFIXES:
            if k.endswith(suffix):
                w = k[: -len(suffix)] + ".weight"
                if w not in keyset:
                    raise UserError(f"{where}: scale {k} has no weight {w}: re-download the checkpoint")
                lay.scales[w] = k
        for suffix in formats.INPUT_SCALE_SUFFIXES:
            if k.endswith(suffix):
                lay.hidden.add(k)
    if lay.hidden:
        lay.notes.append(f"{len(lay.hidden)} activation scales ({formats.INPUT_SCALE_SUFFIXES[0]}/"
                         f"{formats.INPUT_SCALE_SUFFIXES[1]}) ignored: weight-only 8-bit runs its matmuls in the "
                         "compute dtype")
    lay.hidden |= set(markers) | set(tags.values()) | set(lay.scales.values())
    dtypes = {k: dtype_of(source, k) for k in keys if k.endswith(".weight")}
    eight = {k: dt for k, dt in dtypes.items() if dt is not None and modes.is_8bit(dt)}
    if markers and not any(v.endswith(".scale_weight") for v in lay.scales.values()):
        raise UserError(f"{where} has the scaled_fp8 marker but no <layer>.scale_weight tensors: re-download it")
    for k, dt in eight.items():
        if k in lay.scales:
            continue
        if dt == np.int8 or dt == np.uint8:
            raise UserError(f"{where}: 8-bit integer weight {k} has no {k[:-7]}.weight_scale: "
                            "re-download the checkpoint")
        if markers:
            raise UserError(f"{where}: scaled_fp8 weight {k} has no {k[:-7]}.scale_weight: re-download the checkpoint")
    lay.name = ("comfy_quant" if confs else "scaled_fp8" if markers else "lightx2v" if lay.scales
                else "fp8" if eight else None)
    if any(dt == np.int8 for dt in eight.values()):
        lay.mode = "int8"
    elif eight:
        lay.mode = "float8_e4m3fn"
    return lay


class QuantizedTensors(Mapping[str, Any]):
    """``source`` with each scaled weight as a :class:`Quantized` value and its scale keys removed."""

    def __init__(self, source: Mapping[str, Any], layout: Layout | None = None, where: str = "checkpoint") -> None:
        self.source = source
        self.layout = layout or read_layout(source, where)
        self._scales: dict[str, np.ndarray] = {}
        for w, s in self.layout.scales.items():
            self._scales[w] = formats.check_scale(np.asarray(source[s]), s, shape_of(source, w))
        self._keys = [k for k in source if k not in self.layout.hidden]

    def __getitem__(self, key: str) -> Any:
        if key in self.layout.hidden:
            raise KeyError(key)
        if key in self._scales:
            return Quantized(lambda: self.source[key], self._scales[key], key)
        return self.source[key]

    def nbytes(self, key: str) -> int:
        src = self.source
        return src.nbytes(key) if hasattr(src, "nbytes") else int(np.asarray(src[key]).nbytes)

    def shape(self, key: str) -> tuple[int, ...]:
        return shape_of(self.source, key)

    def dtype(self, key: str) -> np.dtype | None:
        return dtype_of(self.source, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)
