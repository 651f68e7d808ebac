"""User feedback on long work: status lines and progress bars on stderr, silenced by ``--quiet``."""

from __future__ import annotations

import contextlib
import contextvars
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


_TILES: contextvars.ContextVar[Callable[[int, int], None] | None] = contextvars.ContextVar("vidax_tiles", default=None)


@contextlib.contextmanager
def tile_progress(on_tile: Callable[[int, int], None]) -> Iterator[None]:
    """Within the block, every tiled VAE call (:class:`vidax_core.vae.tiling.TiledStream`) reports ``on_tile(done,
    total)`` as each tile's program finishes: a decode of many tiles shows progress whichever family's VAE runs,
    with no callback through its hooks."""
    token = _TILES.set(on_tile)
    try:
        yield
    finally:
        _TILES.reset(token)


def tile_listener() -> Callable[[int, int], None] | None:
    """The enclosing :func:`tile_progress`'s callback, or None."""
    return _TILES.get()


def report_tile(done: int, total: int) -> None:
    """Tell the enclosing :func:`tile_progress` (if any) that ``done`` of ``total`` tiles have finished."""
    fn = tile_listener()
    if fn is not None:
        fn(done, total)


class TileBar:
    """A ``decode tiles`` bar made at the first report (an untiled decode shows none)."""

    def __init__(self, reporter: Reporter) -> None:
        self.reporter, self.bar = reporter, None

    def __call__(self, done: int, total: int) -> None:
        if total <= 1:
            return
        if self.bar is None:
            self.bar = self.reporter.bar(total, "decode tiles", unit="tile")
        if done < self.bar.n:  # the next piece of a stream decoded window by window
            self.bar.reset(total=total)
        if self.bar.total != total:
            self.bar.total = total
        self.bar.update(max(done - self.bar.n, 0))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


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
