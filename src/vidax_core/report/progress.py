"""User feedback on long work: status lines and progress bars on stderr, silenced by ``--quiet``."""

from __future__ import annotations

import contextlib
import sys
import time
import weakref
from typing import Any, Callable, Iterator

from tqdm.auto import tqdm

_OPEN: "weakref.WeakSet[tqdm]" = weakref.WeakSet()  # every bar made here and not yet closed


class Reporter:
    """Status lines and tqdm bars on stderr; ``quiet`` turns all of them off (errors are not printed here)."""

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet

    def log(self, message: str) -> None:
        if not self.quiet:
            print(message, file=sys.stderr, flush=True)

    def bar(self, total: int | None, desc: str, unit: str = "it", **kwargs: Any) -> tqdm:
        bar = tqdm(total=total, desc=desc, unit=unit, disable=self.quiet, file=sys.stderr, leave=True,
                   dynamic_ncols=True, **kwargs)
        _OPEN.add(bar)
        return bar


    def byte_progress(self, label: str, total: int | None) -> Callable[[int], None]:
        """A bar over bytes read for ``label`` (a checkpoint component); it closes itself when complete."""
        bar = self.bar(total or None, f"load {label}", unit="B", unit_scale=True, unit_divisor=1024)

        def update(n: int) -> None:
            bar.update(n)
            if total and bar.n >= total:
                bar.close()

        return update


def follow_chunks(bar: tqdm, also: Callable[[int, int], None] | None = None) -> Callable[[int, int], None]:
    """``on_chunk(done, total)`` for a bar: the VAE says how many chunks there are and how many are done (passed on
    to ``also``: a caller's own decode progress)."""

    def on_chunk(done: int, total: int) -> None:
        if total and bar.total != total:
            bar.total = total
        bar.update(max(done - bar.n, 0))
        if also is not None:
            also(done, total)

    return on_chunk


def close_bars() -> None:
    """Close every open bar (each ends its line), so an ``error:`` line printed next starts its own line and no
    bar is redrawn after it when the failed work's frames are collected."""
    for bar in list(_OPEN):
        try:
            bar.close()
        except Exception:  # noqa: BLE001 - a bar that cannot draw any more is closed enough
            pass
    _OPEN.clear()


class Timer:
    """Accumulates named wall-clock phases for the closing summary and the metrics file, and what each phase spent
    compiling (:meth:`compiling`, :mod:`vidax_core.report.compile_watch`)."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.phases: dict[str, float] = {}
        self.compiles: dict[str, dict[str, float]] = {}

    def add(self, name: str, seconds: float) -> None:
        self.phases[name] = self.phases.get(name, 0.0) + seconds

    @contextlib.contextmanager
    def compiling(self, phase: str) -> Iterator[None]:
        """Count the compiles that happen inside the block as the ``phase``'s."""
        from vidax_core.report import compile_watch

        start = compile_watch.snapshot()
        try:
            yield
        finally:
            self.compiles[phase] = compile_watch.add(self.compiles.get(phase, {}), compile_watch.since(start))

    def total(self) -> float:
        return time.perf_counter() - self.start
