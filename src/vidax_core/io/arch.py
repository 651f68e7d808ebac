"""Frozen architecture configs built from a checkpoint's config.json, with every value checked on the way in.

Every model config is a frozen dataclass whose field names are the reference's config.json names; the file also
holds bookkeeping keys (``_class_name``, ``_diffusers_version``, ``architectures``...) that are not fields.
Values from the file are checked against the field's annotation (an integer where an int is due, a finite
number, a tuple of the right length) and against sane bounds (no zero head counts, no million-layer models, a
norm's epsilon small and positive), so a junk config.json is one :class:`UserError` line naming the file and the
key instead of a crash, a NaN video or a multi-GiB allocation later.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from typing import Any, Mapping, TypeVar

from vidax_core.errors import UserError

T = TypeVar("T")

SOURCE_KEY = "_vidax_source"  # set by Checkpoint.config: the file the dict was read from
MAX_DIM = 1 << 18  # widths, channels, lengths
MAX_VOCAB = 1 << 22
MAX_COUNT = 4096  # num_layers, num_attention_heads, num_res_blocks...
MAX_ITEMS = 256  # entries of a tuple field
_EPS = re.compile(r"(^|_)eps(ilon)?$")  # layer_norm_eps, rms_norm_eps, norm_eps, layer_norm_epsilon, eps


class _Bad(Exception):
    pass


def _int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if type(value) is not int:
        raise _Bad(f"must be an integer, got {_short(value)}")
    top = MAX_COUNT if name.startswith("num_") else MAX_VOCAB if ("vocab" in name or "position" in name) else MAX_DIM
    if not minimum <= value <= top:
        raise _Bad(f"must be from {minimum} to {top}, got {_short(value)}")
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check(name: str, value: Any, tp: Any, default: Any) -> Any:
    if tp is Any or isinstance(tp, TypeVar):
        return value
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        last: _Bad | None = None
        for a in args:
            if a is type(None):
                continue
            try:
                return _check(name, value, a, default if not isinstance(default, type(None)) else None)
            except _Bad as exc:
                last = exc
        raise last or _Bad(f"has an unexpected value {_short(value)}")
    if origin is tuple:
        args = typing.get_args(tp)
        if not isinstance(value, (list, tuple)):
            raise _Bad(f"must be a list, got {_short(value)}")
        if len(value) > MAX_ITEMS:
            raise _Bad(f"has {len(value)} entries, at most {MAX_ITEMS} make sense")
        if len(args) == 2 and args[1] is Ellipsis:
            kinds = [args[0]] * len(value)
        else:
            if len(value) != len(args):
                raise _Bad(f"must have {len(args)} entries, got {_short(value)}")
            kinds = list(args)
        return tuple(_check(name, v, k, 1) for v, k in zip(value, kinds))
    if tp is bool:
        if not isinstance(value, bool):
            raise _Bad(f"must be true/false, got {_short(value)}")
        return value
    if tp is int:
        minimum = 1 if not (isinstance(default, int) and default <= 0) else 0
        return _int(name, value, minimum)
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _Bad(f"must be a number, got {_short(value)}")
        try:
            f = float(value)
        except OverflowError:
            raise _Bad(f"must be a finite number, got {_short(value)}") from None
        if not math.isfinite(f) or abs(f) > 1e12:
            raise _Bad(f"must be a finite number of modest size, got {_short(value)}")
        if _EPS.search(name) and not 0 < f < 1:  # a norm divides by sqrt(var + eps): -1 gives NaN everywhere
            raise _Bad(f"must be a small positive number (a norm's epsilon, 1e-6 or 1e-5 in released configs), "
                       f"got {_short(value)}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise _Bad(f"must be a string, got {_short(value)}")
        return value
    return value


def from_config_dict(cls: type[T], config: Mapping[str, Any], **overrides: Any) -> T:
    """``cls(**fields)`` from ``config`` updated with ``overrides``; keys that are not fields of ``cls`` are ignored.

    Values taken from ``config`` are checked against the field annotations and bounds (module docstring);
    ``overrides`` come from code and are passed through.
    """
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    where = config.get(SOURCE_KEY) if isinstance(config, Mapping) else None
    kwargs: dict[str, Any] = {}
    for k, v in dict(config).items():
        if k not in fields or k in overrides:
            continue
        f = fields[k]
        default = f.default if f.default is not dataclasses.MISSING else None
        try:
            kwargs[k] = _check(k, v, hints.get(k, Any), default)
        except _Bad as exc:
            raise UserError(f"{where or f'the {cls.__name__} config'}: key {k} {exc}") from None
    kwargs.update({k: v for k, v in overrides.items() if k in fields})
    try:
        return cls(**kwargs)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError) as exc:
        if isinstance(exc, UserError):
            raise
        raise UserError(f"{where or f'the {cls.__name__} config'}: {' '.join(str(exc).split())}") from None


def config_value(config: Mapping[str, Any], key: str, tp: Any, default: Any = None, *, where: str | None = None) -> Any:
    """One value of a checkpoint config read outside a dataclass (``config[key]``, ``default`` when absent or
    null), checked as :func:`from_config_dict` checks a field annotated ``tp``: a family reading a compression
    ratio or a channel count gets a number it can compute with, or one :class:`UserError` naming file and key."""
    value = config.get(key) if isinstance(config, Mapping) else None
    if value is None:
        return default
    try:
        return _check(key, value, tp, default)
    except _Bad as exc:
        place = where or (config.get(SOURCE_KEY) if isinstance(config, Mapping) else None) or "the checkpoint config"
        raise UserError(f"{place}: key {key} {exc}") from None
