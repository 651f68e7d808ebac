"""Declarative checkpoint conversion: a table of key rules applied onto an ``eval_shape`` tree.

A plugin describes how PyTorch keys map onto its Flax NNX parameter paths as a list of :class:`KeyRule`.
:func:`convert` walks every source tensor through the table, checks it against the abstract (shape-only) tree of
the model, and collects *every* missing, unexpected and mis-shaped tensor before raising one
:class:`ConversionError`, so a user with a broken checkpoint sees the whole problem at once.

Blocks stacked on a leading layer axis are filled slice by slice: a rule names the regex group that holds the
source layer index (``layer_group``) and the converted tensor lands at ``target[index]``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from vidax_core.errors import UserError
from vidax_core.io import lazy
from vidax_core.quant import leaf as quant_leaf

Path = tuple[Any, ...]
Transform = Callable[[np.ndarray], np.ndarray]


def linear(w: np.ndarray) -> np.ndarray:
    """torch Linear weight (out, in) -> Flax kernel (in, out)."""
    return np.swapaxes(w, -1, -2)


def conv(w: np.ndarray) -> np.ndarray:
    """torch ConvNd weight (out, in, *k) -> Flax kernel (*k, in, out), any N."""
    n = w.ndim
    return np.transpose(w, tuple(range(2, n)) + (1, 0))


def conv_transpose(w: np.ndarray) -> np.ndarray:
    """torch ConvTranspose1d weight (in, out, k) -> the (k, in, out) kernel of
    :class:`vidax_core.nn.conv.ConvTranspose1d`."""
    return np.transpose(w, (2, 0, 1))


def squeeze(w: np.ndarray) -> np.ndarray:
    """Drop all length-1 axes (e.g. torch (1, 6, D) tables stored as (6, D))."""
    return np.squeeze(w)


def flatten(w: np.ndarray) -> np.ndarray:
    """Flatten to 1-D (e.g. per-channel RMS gammas stored as (C, 1, 1, 1))."""
    return w.reshape(-1)


def compose(*fns: Transform) -> Transform:
    def run(w: np.ndarray) -> np.ndarray:
        for f in fns:
            w = f(w)
        return w

    return run


@dataclass(frozen=True)
class KeyRule:
    """Map source keys matching ``source`` (a full-match regex) to ``target``.

    ``target`` is a '/'-separated parameter path; ``{1}``, ``{2}``... substitute regex groups, and purely numeric
    path parts become integer keys (list indices in NNX state). ``layer_group`` names the regex group holding the
    index into a stacked leading layer axis of the target. ``layer_offset`` is subtracted from that index, and a
    rule with an offset matches only source indices ``>= layer_offset``: a checkpoint's block N filling layer 0 of
    a second stack (rules are tried in order, so put it before the rule of the first stack). ``transform``
    reshapes the source tensor.
    """

    source: str
    target: str
    transform: Transform | None = None
    layer_group: int | None = None
    layer_offset: int = 0
    _regex: re.Pattern = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_regex", re.compile(self.source))

    def match(self, key: str) -> tuple[Path, int | None] | None:
        m = self._regex.fullmatch(key)
        if m is None:
            return None
        target = self.target.format(None, *m.groups())
        path = tuple(int(p) if p.isdigit() else p for p in target.split("/"))
        if self.layer_group is None:
            return path, None
        layer = int(m.group(self.layer_group)) - self.layer_offset
        return (path, layer) if layer >= 0 else None


class MirrorRule(KeyRule):
    """A rule for a module tree that mirrors the reference's names: a key matching ``source`` lands on its own
    dotted path with '.' -> '/' (numeric parts as list indices) and its last part renamed by ``leaf`` (torch name ->
    '/'-separated vidax name, e.g. ``{"weight": "kernel"}``, or ``{"weight": "group/scale"}`` for a norm held as a
    child). One rule then covers every module of a kind, wherever it sits in the tree."""

    def __init__(self, source: str, leaf: Mapping[str, str], transform: Transform | None = None):
        super().__init__(source, "", transform)
        object.__setattr__(self, "leaf", dict(leaf))

    def match(self, key: str) -> tuple[Path, int | None] | None:
        if self._regex.fullmatch(key) is None:
            return None
        *parts, last = key.split(".")
        if last not in self.leaf:
            return None
        path = [*parts, *self.leaf[last].split("/")]
        return tuple(int(p) if p.isdigit() else p for p in path), None


class ConversionError(UserError):
    """Raised once with every problem found while converting a checkpoint."""

    def __init__(self, component: str, missing: list[str], unexpected: list[str], mismatched: list[str]):
        self.missing, self.unexpected, self.mismatched = missing, unexpected, mismatched
        parts = []
        for label, items in (("missing", missing), ("unexpected", unexpected), ("mis-shaped", mismatched)):
            if items:
                shown = ", ".join(items[:6]) + (f", ... ({len(items) - 6} more)" if len(items) > 6 else "")
                parts.append(f"{len(items)} {label}: {shown}")
        super().__init__(
            f"checkpoint for {component} does not match the model: " + "; ".join(parts)
            + " — check that the checkpoint is the model id's own and its config.json describes these weights"
        )


def path_str(path: Path) -> str:
    return "/".join(str(p) for p in path)


def route(key: str, rules: Sequence[KeyRule]) -> tuple[KeyRule, Path, int | None] | None:
    """(the rule, target path, layer index) of the first rule matching ``key``, as :func:`convert` routes it."""
    for rule in rules:
        hit = rule.match(key)
        if hit is not None:
            return rule, hit[0], hit[1]
    return None


def convert(
    tensors: Mapping[str, Any],
    rules: Sequence[KeyRule],
    abstract: Mapping[Path, Any],
    *,
    component: str = "model",
    dtype: Any = None,
    ignore: Iterable[str] = (),
    on_tensor: Callable[[str, int], None] | None = None,
    check_only: bool = False,
) -> dict[Path, Any]:
    """Fill the abstract tree ``abstract`` (path -> object with .shape/.dtype) from ``tensors``.

    ``tensors`` maps source keys to arrays or lazy loaders (anything ``np.asarray`` accepts, or a zero-arg
    callable). Every key is routed and every shape checked from the sources' headers first, with no tensor data
    read; every missing, unexpected and mis-shaped key is collected and raised once. The result maps each path to
    a :class:`vidax_core.io.lazy.LazyLeaf` in ``dtype`` (default: the abstract leaf dtype), read when it is placed
    (a stacked leaf a layer range at a time), so no converted copy of the model is ever held whole; ``on_tensor``
    is called as each source tensor is read. ``ignore`` holds regexes of source keys that are known and
    intentionally dropped.

    ``check_only`` checks keys and shapes and returns None values: with zero-stride stand-in arrays
    (``np.broadcast_to``) it verifies a full-size checkpoint layout in no memory.

    An 8-bit kernel (one with a ``kernel_scale`` sibling in ``abstract``, :mod:`vidax_core.quant`) is filled
    with its scale from the one source weight (:func:`vidax_core.quant.leaf.prepare`); a source value may be a
    :class:`vidax_core.quant.source.Quantized` weight, which a full-precision parameter gets dequantised.
    """
    ignore_re = [re.compile(p) for p in ignore]
    single: dict[Path, lazy.Part] = {}
    layers: dict[Path, dict[int, lazy.Part]] = {}  # stacked targets: layer -> its part
    dtypes: dict[Path, np.dtype] = {}  # what each filled path is read as
    unexpected: list[str] = []
    mismatched: list[str] = []
    misshaped_paths: set[Path] = set()  # reported as mis-shaped, so not again as missing

    for key in tensors:
        routed = route(key, rules)
        if routed is None:
            if not any(r.fullmatch(key) for r in ignore_re):
                unexpected.append(key)
            continue
        rule, path, layer = routed
        if path not in abstract:
            unexpected.append(f"{key} (-> {path_str(path)})")
            continue
        leaf = abstract[path]
        full_shape = tuple(leaf.shape)
        sp = quant_leaf.scale_path(path, abstract)  # an 8-bit kernel: its values and scale come together
        want_dtype = np.dtype(leaf.dtype) if sp is not None or dtype is None else np.dtype(dtype)
        want = full_shape[1:] if layer is not None else full_shape
        got = _converted_shape(tensors, key, rule.transform)
        if layer is None:
            if got != full_shape:
                mismatched.append(f"{key} {got} vs expected {full_shape} at {path_str(path)}")
                misshaped_paths.add(path)
                continue
        elif layer >= full_shape[0] or got != full_shape[1:]:
            mismatched.append(
                f"{key} {got} vs expected {full_shape[1:]} (layer {layer} of {full_shape[0]} at {path_str(path)})"
            )
            misshaped_paths.add(path)
            continue
        scale_shape = None if sp is None else (tuple(abstract[sp].shape)[1:] if layer is not None
                                               else tuple(abstract[sp].shape))
        targets = [(path, want_dtype, lazy.Part(key, tensors, rule.transform, want_dtype, scale_shape, want))]
        if sp is not None:
            targets.append((sp, np.dtype(np.float32),
                            lazy.Part(key, tensors, rule.transform, want_dtype, scale_shape, want, "scale")))
        for p, dt, part in targets:
            dtypes[p] = dt
            if layer is None:
                single[p] = part
            else:
                layers.setdefault(p, {})[layer] = part

    missing = [path_str(p) for p in abstract if p not in single and p not in layers and p not in misshaped_paths]
    for p, got in layers.items():
        absent = [i for i in range(int(abstract[p].shape[0])) if i not in got]
        if absent and p not in misshaped_paths:
            missing.append(f"{path_str(p)} layers {absent}")
    if missing or unexpected or mismatched:
        raise ConversionError(component, missing, unexpected, mismatched)
    if check_only:
        return {p: None for p in [*single, *layers]}
    memo = lazy.ScaleMemo()
    out: dict[Path, Any] = {}
    for p, part in single.items():
        out[p] = lazy.LazyLeaf(abstract[p].shape, dtypes[p], [part], stacked=False, memo=memo, on_tensor=on_tensor)
    for p, got in layers.items():
        parts = [got[i] for i in range(int(abstract[p].shape[0]))]
        out[p] = lazy.LazyLeaf(abstract[p].shape, dtypes[p], parts, stacked=True, memo=memo, on_tensor=on_tensor)
    return out


def _converted_shape(tensors: Mapping[str, Any], key: str, transform: Transform | None) -> tuple[int, ...]:
    """The shape ``key`` has after ``transform``, from the source's header where it says one (no data read):
    the transform runs on a zero-stride stand-in of the source's shape."""
    from vidax_core.quant.source import Quantized, shape_of

    value = None
    if hasattr(tensors, "shape"):
        shape = tuple(tensors.shape(key))
    else:
        value = tensors[key]
        if isinstance(value, Quantized):
            value = value.data
        if callable(value):
            value = value()
        shape = tuple(np.shape(value)) if hasattr(value, "shape") else shape_of(tensors, key)
    if transform is None:
        return shape
    return tuple(transform(np.broadcast_to(np.zeros((), np.float32), shape)).shape)
