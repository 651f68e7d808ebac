"""Fusing: each adapter's delta added onto the checkpoint's own tensors, in fp32 on the host, before conversion.

``W' = W + sum_a scale_a * (factor_a * up_a @ down_a + diff_a)`` and ``b' = b + sum_a scale_a * bias_a``, with the
tensors still in the checkpoint's key space: the family's conversion then transposes, splits or fuses ``W'`` as it
does ``W`` and casts it to the run's weight dtype, so a step costs what it costs without an adapter and sharding
and offload see ordinary weights. Deltas are computed one tensor at a time, as conversion reads it.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from vidax_core.errors import UserError
from vidax_core.lora.check import Target

Delta = Callable[[], np.ndarray]


def _place(t: Target, delta: np.ndarray | None, shape: tuple[int, ...] | None) -> np.ndarray | None:
    """A piece of a split module: rows ``src`` of the record's delta, at rows ``dst`` of a zero tensor."""
    if delta is None or t.src is None:
        return delta
    out = np.zeros(shape, np.float32)
    out[t.dst[0]:t.dst[1]] = delta[t.src[0]:t.src[1]]
    return out


def weight_delta(t: Target) -> np.ndarray:
    """``factor * up @ down`` (+ ``diff``) in the weight's shape, fp32 (conv LoRAs: up's kernel dims are 1)."""
    return _place(t, _record_weight_delta(t), t.weight_shape)


def _record_weight_delta(t: Target) -> np.ndarray:
    p = t.record.parts
    out = None
    if "down" in p:
        down = np.asarray(p["down"], np.float32)
        up = np.asarray(p["up"], np.float32)
        r = down.shape[0]
        prod = up.reshape(up.shape[0], r) @ down.reshape(r, -1)
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused where the deltas are summed
            out = np.float32(t.factor) * prod.reshape((up.shape[0], *down.shape[1:]))
    if "diff" in p:
        diff = np.asarray(p["diff"], np.float32)
        out = diff if out is None else out + diff
    return out


def bias_delta(t: Target) -> np.ndarray:
    """A peft ``lora_B.bias`` (scaled by ``factor``, as peft scales lora_B's output) plus a ``diff_b``."""
    return _place(t, _record_bias_delta(t), t.bias_shape)


def _record_bias_delta(t: Target) -> np.ndarray:
    p = t.record.parts
    out = None
    if "up_bias" in p:
        out = np.float32(t.factor) * np.asarray(p["up_bias"], np.float32)
    if "diff_b" in p:
        d = np.asarray(p["diff_b"], np.float32)
        out = d if out is None else out + d
    return out


def terms(targets: Sequence[Target], scale: float) -> dict[str, list[tuple[float, Delta]]]:
    """Tensor key -> [(scale, delta thunk)] of one adapter."""
    out: dict[str, list[tuple[float, Delta]]] = {}
    for t in targets:
        p = t.record.parts
        if t.weight_key and ("down" in p or "diff" in p):
            out.setdefault(t.weight_key, []).append((scale, lambda t=t: weight_delta(t)))
        if t.bias_key and ("up_bias" in p or "diff_b" in p):
            out.setdefault(t.bias_key, []).append((scale, lambda t=t: bias_delta(t)))
    return out


class FusedTensors(Mapping[str, Any]):
    """``base`` (key -> array or zero-arg loader) with the deltas of ``deltas`` added (fp32) where they apply."""

    def __init__(self, base: Mapping[str, Any], deltas: Mapping[str, list[tuple[float, Delta]]]) -> None:
        self.base, self.deltas = base, deltas

    def __getitem__(self, key: str) -> Any:
        value = self.base[key]
        if key not in self.deltas:
            return value
        w = np.array(value() if callable(value) else value, dtype=np.float32)
        with np.errstate(over="ignore", invalid="ignore"):  # refused just below, in one line
            for scale, delta in self.deltas[key]:
                w += np.float32(scale) * delta()
        if not np.isfinite(w).all() and np.isfinite(np.asarray(value() if callable(value) else value)).all():
            # a finite scale and alpha can still overflow float32 once multiplied out
            raise UserError(f"lora: the adapters fused into {key} give values beyond float32 (NaN or infinite): "
                            "lower the lora scales (lora[i].scale) or fix the adapter")
        return w

    def nbytes(self, key: str) -> int:
        src = self.base
        return src.nbytes(key) if hasattr(src, "nbytes") else int(np.asarray(src[key]).nbytes)

    def __iter__(self) -> Iterator[str]:
        return iter(self.base)

    def __len__(self) -> int:
        return len(self.base)


def fused(base: Mapping[str, Any], deltas: Mapping[str, list[tuple[float, Delta]]] | None) -> Mapping[str, Any]:
    """``base`` itself when there is nothing to add."""
    return FusedTensors(base, deltas) if deltas else base
