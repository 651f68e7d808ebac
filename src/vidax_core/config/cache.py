"""The ``cache:`` run key: step caching, with the field names and defaults of diffusers' cache configs.

``mag`` is diffusers' ``MagCacheConfig`` (diffusers/hooks/mag_cache.py), ``first_block`` its
``FirstBlockCacheConfig`` (first_block_cache.py); ``teacache`` follows TeaCache4Wan2.1's arguments
(``teacache_thresh`` -> ``threshold``, ``use_ret_steps``; null is the model's published mode).
Two vidax differences, both about knowing the run:
``num_inference_steps: null`` (the default) means the run's ``sampling.num_steps`` (diffusers' class default of 28
only makes sense for a 28-step run, so any other value is refused), and ``mag_ratios`` may also name a file that
``calibrate: true`` wrote, or be null to use the table shipped for the model (:mod:`vidax_core.cache.tables`).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from dataclasses import dataclass
from typing import Any, Mapping

from vidax_core.config.parse import short_repr
from vidax_core.errors import UserError


@dataclass(frozen=True)
class MagCache:
    threshold: float = 0.06
    max_skip_steps: int = 3
    retention_ratio: float = 0.2
    num_inference_steps: int | None = None
    mag_ratios: Any = None  # null | [floats] | path of a calibration file
    calibrate: bool = False


@dataclass(frozen=True)
class FirstBlockCache:
    threshold: float = 0.05


@dataclass(frozen=True)
class TeaCache:
    threshold: float = 0.2
    coefficients: Any = None  # null = the published polynomial for the model (and use_ret_steps)
    use_ret_steps: bool | None = None  # null = the model's published mode (Wan2.1: true; CogVideoX: its only one)


METHODS: dict[str, type] = {"mag": MagCache, "first_block": FirstBlockCache, "teacache": TeaCache}


def _number(key: str, value: Any, *, integer: bool = False, low: float = 0.0, high: float | None = None) -> Any:
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok_type or (not integer and not math.isfinite(value)):
        kind = "an integer" if integer else "a finite number"
        raise UserError(f"config key cache.{key} must be {kind}, got {short_repr(value)}")
    if value < low or (high is not None and value > high):
        where = f">= {low}" if high is None else f"between {low} and {high}"
        raise UserError(f"config key cache.{key} must be {where}, got {short_repr(value)}")
    return value if integer else float(value)


def _float_list(key: str, value: Any) -> list[float]:
    if not isinstance(value, (list, tuple)) or not value:
        raise UserError(f"config key cache.{key} must be a non-empty list of numbers, got {short_repr(value)}")
    return [_number(f"{key}[{n}]", v, low=-math.inf) for n, v in enumerate(value)]


def parse_cache(value: Any, num_steps: int | None = None) -> Any:
    """The checked cache config (a :class:`MagCache`, :class:`FirstBlockCache`, :class:`TeaCache`) or None."""
    if value is None or value is False:
        return None
    if isinstance(value, str):
        value = {"method": value}
    if not isinstance(value, Mapping):
        raise UserError(f"config key cache must be null or {{method: mag | first_block | teacache, ...}}, got "
                        f"{short_repr(value)}")
    data = dict(value)
    method = data.pop("method", None)
    if not isinstance(method, str) or method not in METHODS:
        close = difflib.get_close_matches(str(method), list(METHODS), n=1, cutoff=0.5)
        hint = f" — did you mean {close[0]}?" if close else ""
        raise UserError(f"config key cache.method must be one of {', '.join(METHODS)}, got {short_repr(method)}{hint}")
    cls = METHODS[method]
    names = [f.name for f in dataclasses.fields(cls)]
    for key in data:
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1, cutoff=0.6)
            hint = f" — did you mean cache.{close[0]}?" if close else f" ({method} takes: {', '.join(names)})"
            raise UserError(f"unknown config key cache.{key} for method {method}{hint}")
    out = dict(data)
    if "threshold" in out:
        out["threshold"] = _number("threshold", out["threshold"])
    for flag in ("calibrate", "use_ret_steps"):
        if flag in out and not isinstance(out[flag], bool) and not (flag == "use_ret_steps" and out[flag] is None):
            raise UserError(f"config key cache.{flag} must be true/false, got {short_repr(out[flag])}")
    if cls is MagCache:
        if "max_skip_steps" in out:
            out["max_skip_steps"] = _number("max_skip_steps", out["max_skip_steps"], integer=True)
        if "retention_ratio" in out:
            out["retention_ratio"] = _number("retention_ratio", out["retention_ratio"], high=1.0)
        steps = out.get("num_inference_steps")
        if steps is not None:
            _number("num_inference_steps", steps, integer=True, low=1)
            if num_steps is not None and steps != num_steps:
                raise UserError(f"cache.num_inference_steps={steps} but the run has sampling.num_steps={num_steps}: "
                                "drop cache.num_inference_steps (null = the run's steps)")
        ratios = out.get("mag_ratios")
        if ratios is not None and not isinstance(ratios, str):
            out["mag_ratios"] = _float_list("mag_ratios", ratios)
            if any(r <= 0 for r in out["mag_ratios"]):
                raise UserError("config key cache.mag_ratios must hold positive magnitude ratios")
        if out.get("calibrate") and ratios is not None:
            raise UserError("cache.calibrate=true measures new ratios and skips nothing: drop cache.mag_ratios")
    if cls is TeaCache and out.get("coefficients") is not None:
        out["coefficients"] = _float_list("coefficients", out["coefficients"])
    return cls(**out)


def method_of(cfg: Any) -> str:
    return next(k for k, v in METHODS.items() if isinstance(cfg, v))


def as_dict(cfg: Any) -> dict[str, Any] | None:
    """The run-key form of a parsed cache config (``method`` first, every field with its value)."""
    if cfg is None:
        return None
    return {"method": method_of(cfg), **dataclasses.asdict(cfg)}
