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
) -> dict[Path, np.ndarray]:
    """Fill the abstract tree ``abstract`` (path -> object with .shape/.dtype) from ``tensors``.

    ``tensors`` maps source keys to arrays or lazy loaders (anything ``np.asarray`` accepts, or a zero-arg
    callable). Returns path -> host numpy array cast to ``dtype`` (default: the abstract leaf dtype).
    ``ignore`` holds regexes of source keys that are known and intentionally dropped. Transforms return views
    where they can, so a tensor is copied once, when it is cast or stacked.

    ``check_only`` checks keys and shapes without keeping any data (values are None): with zero-stride stand-in
    arrays (``np.broadcast_to``) it verifies a full-size checkpoint layout in no memory.

    An 8-bit kernel (one with a ``kernel_scale`` sibling in ``abstract``, :mod:`vidax_core.quant`) is filled
    with its scale from the one source weight (:func:`vidax_core.quant.leaf.prepare`); a source value may be a
    :class:`vidax_core.quant.source.Quantized` weight, which a full-precision parameter gets dequantised.
    """
    ignore_re = [re.compile(p) for p in ignore]
    out: dict[Path, np.ndarray] = {}
    filled: dict[Path, np.ndarray] = {}  # stacked targets: per-layer fill mask
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
        per_layer = (lambda shape: tuple(shape)[1:]) if layer is not None else tuple
        arr, scale = quant_leaf.prepare(tensors[key], rule.transform, want_dtype,
                                        per_layer(abstract[sp].shape) if sp is not None else None, check_only,
                                        per_layer(full_shape))
        if layer is None:
            if arr.shape != full_shape:
                mismatched.append(f"{key} {tuple(arr.shape)} vs expected {full_shape} at {path_str(path)}")
                misshaped_paths.add(path)
                continue
            out[path] = None if check_only else arr.astype(want_dtype, copy=False)
            if sp is not None:
                out[sp] = None if check_only else scale
        else:
            if layer >= full_shape[0] or arr.shape != full_shape[1:]:
                mismatched.append(
                    f"{key} {tuple(arr.shape)} vs expected {full_shape[1:]} (layer {layer} of {full_shape[0]} at {path_str(path)})"
                )
                misshaped_paths.add(path)
                continue
            targets = [(path, arr, want_dtype)] + ([(sp, scale, np.dtype(np.float32))] if sp is not None else [])
            for p, a, dt in targets:
                if p not in out:
                    out[p] = None if check_only else np.zeros(tuple(abstract[p].shape), dt)
                    filled[p] = np.zeros(full_shape[0], bool)
                if not check_only:
                    out[p][layer] = a.astype(dt, copy=False)
                filled[p][layer] = True
        if on_tensor is not None:
            on_tensor(key, arr.nbytes)

    missing = [path_str(p) for p in abstract if p not in out and p not in misshaped_paths]
    for p, mask in filled.items():
        if not mask.all() and p not in misshaped_paths:
            missing.append(f"{path_str(p)} layers {np.flatnonzero(~mask).tolist()}")
    if missing or unexpected or mismatched:
        raise ConversionError(component, missing, unexpected, mismatched)
    return out
