"""Which keys a call of a loaded pipe may change and which the load fixes, read once from the schema.

Every top-level field of :class:`vidax_core.config.RunConfig` says its scope in its metadata (``load``, ``call``
or ``run``: ``vidax run`` alone). The Python API's call arguments, a batch line's keys, the server's request
fields and the load-only refusals all come from here.
"""

from __future__ import annotations

import dataclasses
import functools

from vidax_core.config import RunConfig, SamplingConfig


def scope_of(key: str) -> str:
    """``load``, ``call`` or ``run`` for a top-level key of the run config."""
    return _scopes()[key]


@functools.cache
def _scopes() -> dict[str, str]:
    out = {}
    for f in dataclasses.fields(RunConfig):
        if "scope" not in f.metadata:
            raise TypeError(f"RunConfig.{f.name} states no scope (load, call or run) in its field metadata")
        out[f.name] = f.metadata["scope"]
    return out


def call_keys() -> tuple[str, ...]:
    """Top-level keys a call may change (``sampling`` among them)."""
    return tuple(k for k, s in _scopes().items() if s == "call")


def load_keys() -> tuple[str, ...]:
    """Top-level keys the load fixes."""
    return tuple(k for k, s in _scopes().items() if s == "load")


SAMPLING_KEYS = tuple(f.name for f in dataclasses.fields(SamplingConfig))
# a call's keyword arguments: the call-scoped top-level keys, with sampling.* given by their own names
CALL_ARGUMENTS = tuple(k for k in call_keys() if k != "sampling") + SAMPLING_KEYS


@functools.cache
def load_only_hints() -> dict[str, str]:
    """Each load-scoped key, and each field of a load-scoped section by its own name (``tp``, ``checkpoint``),
    -> the override that changes it at load (``parallel.tp=…``)."""
    hints: dict[str, str] = {}
    fields = {f.name: f for f in dataclasses.fields(RunConfig)}
    for key in load_keys():
        kind = fields[key].default_factory if fields[key].default_factory is not dataclasses.MISSING else None
        if kind is not None and dataclasses.is_dataclass(kind):
            hints[key] = f"{key}.…=…"
            for sub in dataclasses.fields(kind):
                hints.setdefault(sub.name, f"{key}.{sub.name}=…")
        else:
            hints[key] = f"{key}=…"
    return hints
