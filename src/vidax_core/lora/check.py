"""Strict checks of a normalised adapter against the checkpoint it is fused into: every problem at once.

A module that maps to no tensor of the checkpoint, a delta whose shape is not the tensor's, a down/up pair whose
ranks differ, an alpha that is not one number, a NaN, a DoRA magnitude: each is collected with the key that causes
it, and one :class:`~vidax_core.errors.UserError` lists them all (as checkpoint conversion does), before any
weight of the denoiser is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from vidax_core.errors import UserError
from vidax_core.lora.formats import Adapter, Record

SHOWN = 8


@dataclass(frozen=True)
class Target:
    """One module's delta (or one piece of it): the checkpoint tensors it adds to, the record (with its
    ``factor``) it comes from and, for a piece of a split module, which of the record's output rows (``src``) land
    on which rows of the tensors (``dst``); None: all of them."""

    module: str
    weight_key: str | None
    bias_key: str | None
    record: Record
    factor: float
    src: tuple[int, int] | None = None
    dst: tuple[int, int] | None = None
    weight_shape: tuple[int, ...] | None = None
    bias_shape: tuple[int, ...] | None = None


def _finite(a: np.ndarray) -> bool:
    return bool(np.isfinite(np.asarray(a, np.float32)).all())


def record_problems(rec: Record) -> list[str]:
    """Problems of one record by itself (no checkpoint needed)."""
    p, k = rec.parts, rec.keys
    out = []
    if "dora" in p:
        out.append(f"{k['dora']}: DoRA (dora_scale / magnitude vectors) is not supported; use a plain LoRA")
    down, up = p.get("down"), p.get("up")
    if (down is None) != (up is None):
        have, lack = ("down", "up") if up is None else ("up", "down")
        out.append(f"{k[have]} has no matching {lack} matrix")
    if down is not None and up is not None:
        if down.ndim < 2 or up.ndim < 2:
            out.append(f"{k['down']}: down {tuple(down.shape)} / up {tuple(up.shape)} are not matrices")
        elif down.shape[0] != up.shape[1]:
            out.append(f"{k['down']}: rank {down.shape[0]} but its up matrix {k['up']} has rank {up.shape[1]}")
        elif any(d != 1 for d in up.shape[2:]):
            out.append(f"{k['up']}: up {tuple(up.shape)} must be 1 in its kernel dims")
    if "alpha" in p and np.size(p["alpha"]) != 1:
        out.append(f"{k['alpha']}: alpha of shape {tuple(np.shape(p['alpha']))}, expected one number")
    if not (set(p) & {"down", "up", "diff", "diff_b", "up_bias", "dora"}):
        out.append(f"{next(iter(k.values()))}: an alpha without any LoRA matrix")
    for part, arr in p.items():
        if part != "dora" and not _finite(arr):
            out.append(f"{k[part]} holds NaN or infinite values")
    return out


def _delta_shape(rec: Record) -> tuple[int, ...] | None:
    down, up = rec.parts.get("down"), rec.parts.get("up")
    if down is None or up is None or down.ndim < 2 or up.ndim < 2:
        return None
    return (int(up.shape[0]), *map(int, down.shape[1:]))


def _out_rows(rec: Record) -> int | None:
    for part in ("up", "diff", "diff_b", "up_bias"):
        if part in rec.parts and np.ndim(rec.parts[part]) >= 1:
            return int(np.shape(rec.parts[part])[0])
    return None


def _pieces(rec: Record, mapped: Any, keys: set[str], shape: Callable[[str], tuple],
            problems: list[str]) -> list[tuple[str, tuple[int, int] | None, tuple[int, int] | None]]:
    """(module, source rows, destination rows) of each piece a record's delta goes to."""
    if isinstance(mapped, str):
        return [(mapped, None, None)]
    out, pos = [], 0
    for module, i, n in mapped:
        weight = module if module in keys else f"{module}.weight"
        rows = int(shape(weight)[0]) if weight in keys else 0
        size = rows // n
        out.append((module, (pos, pos + size), (i * size, (i + 1) * size)))
        pos += size
    total = _out_rows(rec)
    if total is not None and total != pos:
        first = next(iter(rec.keys.values()))
        problems.append(f"{first}: {total} output rows, but its parts "
                        f"{', '.join(m for m, _, _ in mapped)} have {pos}")
    return out


def targets(adapter: Adapter, mapped: dict[str, Any], keys: set[str], shape: Callable[[str], tuple],
            *, where: str, model: str) -> list[Target]:
    """The checked targets of ``adapter`` (module names already ``mapped`` into the checkpoint's), or one error."""
    problems = list(adapter.problems)
    unmapped = [r for n, r in adapter.records.items() if mapped.get(n) is None]
    out: list[Target] = []
    for name, rec in adapter.records.items():
        own = record_problems(rec)
        problems += own
        if mapped.get(name) is None:
            continue
        first = next(iter(rec.keys.values()))
        pieces = _pieces(rec, mapped[name], keys, shape, problems)
        for module, src, dst in pieces:
            weight = module if module in keys else f"{module}.weight" if f"{module}.weight" in keys else None
            bias = f"{module}.bias" if f"{module}.bias" in keys else None
            want = tuple(shape(weight)) if weight else None
            part_want = want if want is None or dst is None else (dst[1] - dst[0], *want[1:])
            got = _delta_shape(rec)
            if got is not None and src is not None:
                got = (src[1] - src[0], *got[1:])
            if got is not None and part_want is not None and not own and got != part_want:
                problems.append(f"{rec.keys['down']}: delta up @ down {got} does not fit {weight} {part_want}")
            if "diff" in rec.parts and part_want is not None:
                d = tuple(rec.parts["diff"].shape)
                d = d if src is None else (src[1] - src[0], *d[1:])
                if d != part_want:
                    problems.append(f"{rec.keys['diff']}: {d} does not fit {weight} {part_want}")
            if (got is not None or "diff" in rec.parts) and weight is None:
                problems.append(f"{first}: {module} has no weight tensor")
            bshape = tuple(shape(bias)) if bias else None
            for part in ("diff_b", "up_bias"):
                if part not in rec.parts:
                    continue
                b = tuple(rec.parts[part].shape)
                b = b if src is None else (src[1] - src[0], *b[1:])
                bwant = bshape if bshape is None or dst is None else (dst[1] - dst[0], *bshape[1:])
                if bias is None:
                    problems.append(f"{rec.keys[part]}: {module} has no bias")
                elif b != bwant:
                    problems.append(f"{rec.keys[part]}: {b} does not fit {bias} {bwant}")
            out.append(Target(module, weight, bias, rec, adapter.factor(rec), src, dst, want, bshape))
    if unmapped and not out:
        eg = ", ".join(next(iter(r.keys.values())) for r in unmapped[:3])
        raise UserError(f"{where} ({adapter.path}): none of its {len(unmapped)} modules maps to a parameter of "
                        f"{model} (e.g. {eg}): is it an adapter for another model?")
    if unmapped:
        problems.append(f"{len(unmapped)} modules map to no parameter of {model}: "
                        + ", ".join(next(iter(r.keys.values())) for r in unmapped[:SHOWN])
                        + (", ..." if len(unmapped) > SHOWN else ""))
    if problems:
        shown = "; ".join(problems[:SHOWN]) + (f"; ... ({len(problems) - SHOWN} more)" if len(problems) > SHOWN else "")
        raise UserError(f"{where} ({adapter.path}, {adapter.layout} layout) does not fit {model}: "
                        f"{len(problems)} problem{'s' if len(problems) > 1 else ''}: {shown}")
    return out


FLOAT32_MAX = float(np.finfo(np.float32).max)


def check_multiplier(factors: Any, scale: float, where: str) -> None:
    """``scale * factor`` of every module (``factors``: (module name, alpha / rank) pairs) must be a finite float32
    number: the deltas are fused (or applied) in float32, and a product beyond its range makes every weight it
    touches infinite (NaN frames, exit 0). So must the scale itself (an infinite scale times a zero delta is NaN)."""
    if not abs(float(scale)) <= FLOAT32_MAX:
        raise UserError(f"{where}.scale {scale:g} is beyond float32 (at most {FLOAT32_MAX:.3g}): lower it")
    for name, factor in factors:
        m = float(scale) * float(factor)
        if not (abs(m) <= FLOAT32_MAX):  # NaN fails too
            raise UserError(f"{where}: scale {scale:g} x alpha/rank {factor:g} of {name} is {m:g}, beyond "
                            f"float32 (at most {FLOAT32_MAX:.3g}): lower {where}.scale or fix the adapter's alpha")
