"""The process's own memory, measured: peak anonymous host memory and peak device memory.

Peak RSS (``ru_maxrss``) counts the pages of memory-mapped checkpoint files that were touched, which the OS can
drop at will; what a run really holds is its anonymous memory (heap, numpy arrays, pinned buffers, on the CPU
backend the devices' arrays). Linux reports the current anonymous size (``RssAnon`` in /proc/self/status) but no
peak, so a child process samples it every few milliseconds from the first call of :func:`start`
(:mod:`vidax_core.report.anon_sampler`). Device peaks
come from the backend's memory statistics where it keeps them (TPU, GPU; not the CPU).
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Any

from vidax_core.report.anon_sampler import SharedPeaks, read_anon

_PERIOD_S = 0.005
_lock = threading.Lock()
_sampler: SharedPeaks | None = None


_runtime = {"mb": None}


def rss_mb() -> float:
    """The process's resident memory now (anonymous and file-backed), in MiB."""
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def start_backend() -> None:
    """Start JAX's backends here, measuring the resident memory their runtime takes by itself (a TPU v5e's about
    14 GB): :func:`runtime_mb`. Does nothing where the backends are running already (the figure stays unknown)."""
    import jax
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized():
        return
    before = rss_mb()
    jax.devices()
    _runtime["mb"] = round(rss_mb() - before, 1)


def runtime_mb() -> float | None:
    """What starting the device runtime added to this process's resident memory, in MiB (None: not measured)."""
    return _runtime["mb"]


def anon_mb() -> float | None:
    """The process's anonymous resident memory now, in MiB (None where /proc does not say)."""
    return read_anon("/proc/self/status")


class Window:
    """The anonymous memory at the start of a stretch of work (``base``) and the most seen during it (``peak``,
    final once the window is closed)."""

    def __init__(self) -> None:
        self.base = anon_mb() or 0.0
        self.peak = self.base

    @property
    def growth_mb(self) -> float:
        """How far the work took the process above where it started, in MiB."""
        return self.peak - self.base


def _sampling() -> SharedPeaks | None:
    """This process's sampler (a process forked from a sampled one starts its own), None where none runs."""
    return _sampler if _sampler is not None and _sampler.pid == os.getpid() else None


def start() -> None:
    """Start sampling (once per process; later calls do nothing): :mod:`vidax_core.report.anon_sampler`."""
    global _sampler
    with _lock:
        if _sampling() is None and anon_mb() is not None:
            try:
                _sampler = SharedPeaks(_PERIOD_S)
            except OSError:  # no child process here: peaks are read at the windows' ends only
                _sampler = None


def peak_anon_mb() -> float | None:
    """The largest anonymous memory seen since :func:`start` (None when not sampling)."""
    sampler = _sampling()
    if sampler is None:
        return None
    return round(max(sampler.peak(), anon_mb() or 0.0), 1)


def peak_device_mb() -> float | None:
    """The largest ``peak_bytes_in_use`` over this process's devices, in MiB (None where the backend keeps none)."""
    import jax

    peaks = []
    for d in jax.local_devices():
        try:
            stats: Any = d.memory_stats()
        except Exception:  # noqa: BLE001 - a backend without statistics
            stats = None
        if stats and "peak_bytes_in_use" in stats:
            peaks.append(stats["peak_bytes_in_use"])
    return round(max(peaks) / 2**20, 1) if peaks else None


@contextlib.contextmanager
def window():
    """Measure a stretch of work: ``with window() as w: ...`` then ``w.base``, ``w.peak``, ``w.growth_mb``."""
    start()
    w = Window()
    sampler = _sampling()
    slot = sampler.open(w.base) if sampler is not None else None
    try:
        yield w
    finally:
        w.peak = max(w.peak, anon_mb() or 0.0, sampler.close(slot) if slot is not None else 0.0)


def give_back() -> None:
    """Return the heap's free memory to the OS (glibc's ``malloc_trim``; a no-op elsewhere). A long-lived process
    (``vidax serve``) frees a decoded upload or a job's frames, but the allocator keeps the pages of each thread's
    arena unless asked: the process would stay as large as its largest job, for good."""
    global _trim
    if _trim is None:
        try:
            import ctypes

            _trim = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _trim = False
    if _trim:
        _trim(0)


_trim: Any = None

