"""Keep Python's garbage collector off the modules a process has imported. The runner calls ``gc.collect()`` when
it frees weights, a text encoder or a pipe, so that reference cycles holding device buffers go at once; every full
collection walks every tracked object, and after importing JAX, flax and the plugins that is ~150,000 of them (a
test process with torch, diffusers and transformers: half a million): 0.07-0.2 s per collection, several per run.
Freezing what survives a collection after the imports moves those objects out of the collector's reach; what a run
creates later is collected as before. Only a process that owns its heap freezes it (the command line, a test
session), never a program that imports vidax as a library."""

from __future__ import annotations

import gc
from time import perf_counter


def freeze_imports() -> int:
    """Collect once, then freeze every surviving object (modules, plugins, collected tests); returns how many are
    frozen. Call it before any weights or device arrays exist: a frozen cycle is never collected."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


class Refreezer:
    """For a long-lived process that keeps creating long-lived objects (a test session: each test imports torch
    references, builds fixtures, fills JAX's caches), freezing once after the imports is not enough: every full
    collection the runner asks for walks what earlier tests left alive (~600,000 objects, 0.25-0.4 s each, a
    quarter of an end-to-end test file's time). It times full collections; :meth:`after` (between tests, where no
    run is in flight) collects once more and freezes the survivors when the last one took over ``limit_s``."""

    def __init__(self, limit_s: float = 0.05) -> None:
        self.limit_s, self.slow, self._t0 = limit_s, False, 0.0
        gc.callbacks.append(self._time)

    def _time(self, phase: str, info: dict) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._t0 = perf_counter()
        elif perf_counter() - self._t0 > self.limit_s:
            self.slow = True

    def after(self) -> bool:
        """Collect and freeze when a full collection was slow since the last freeze; whether it did."""
        if not self.slow or not gc.isenabled():
            return False
        freeze_imports()
        self.slow = False
        return True
