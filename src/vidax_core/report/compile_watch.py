"""Compile time as a run spends it, from JAX's own compile events: tracing, lowering, XLA compiles (each one a
program), and the persistent compilation cache's hits, misses and the compile time its hits saved.

:func:`install` registers one process-wide listener (JAX keeps listeners for the life of the process); a phase of
a call takes a :func:`snapshot` when it starts and :func:`since` it when it ends, so the metrics can say how much
of each phase was compiling and the summary whether the next run will find its programs in the cache.
"""

from __future__ import annotations

import threading
from typing import Any

_EVENTS = {
    "/jax/core/compile/backend_compile_duration": "compile_s",  # an XLA compile, or a program read from the cache
    "/jax/core/compile/jaxpr_trace_duration": "trace_s",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower_s",
    "/jax/compilation_cache/compile_time_saved_sec": "saved_s",
}
_COUNTS = {
    "/jax/compilation_cache/cache_hits": "cache_hits",
    "/jax/compilation_cache/cache_misses": "cache_misses",
}
FIELDS = ("compile_s", "trace_s", "lower_s", "programs", "cache_hits", "cache_misses", "saved_s")

_totals: dict[str, float] = dict.fromkeys(FIELDS, 0.0)
_lock = threading.Lock()
_installed = False


def _on_duration(event: str, duration: float, **_: Any) -> None:
    key = _EVENTS.get(event)
    if key is None:
        return
    with _lock:
        _totals[key] += float(duration)
        if key == "compile_s":
            _totals["programs"] += 1


def _on_event(event: str, **_: Any) -> None:
    key = _COUNTS.get(event)
    if key is not None:
        with _lock:
            _totals[key] += 1


def install() -> None:
    """Start counting (once per process; later calls do nothing)."""
    global _installed
    if _installed:
        return
    import jax

    jax.monitoring.register_event_duration_secs_listener(_on_duration)
    jax.monitoring.register_event_listener(_on_event)
    _installed = True


def snapshot() -> dict[str, float]:
    """The process's totals so far (install first)."""
    install()
    with _lock:
        return dict(_totals)


def since(start: dict[str, float]) -> dict[str, float]:
    """What was compiled since ``start``: seconds of XLA compiles (cache reads included), of tracing and lowering,
    the programs, the persistent cache's hits and misses and the compile seconds its hits saved."""
    now = snapshot()
    out = {k: now[k] - start.get(k, 0.0) for k in FIELDS}
    for k in ("programs", "cache_hits", "cache_misses"):
        out[k] = int(out[k])
    return out


def add(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    """Two :func:`since` records summed."""
    return {k: a.get(k, 0) + b.get(k, 0) for k in FIELDS}
