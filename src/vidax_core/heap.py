"""Keep Python's garbage collector off the modules a process has imported. The runner calls ``gc.collect()`` when
it frees weights, a text encoder or a pipe, so that reference cycles holding device buffers go at once; every full
collection walks every tracked object, and after importing JAX, flax and the plugins that is ~150,000 of them (a
test process with torch, diffusers and transformers: half a million): 0.07-0.2 s per collection, several per run.
Freezing what survives a collection after the imports moves those objects out of the collector's reach; what a run
creates later is collected as before. Only a process that owns its heap freezes it (the command line, a test
session), never a program that imports vidax as a library."""

from __future__ import annotations

import gc


def freeze_imports() -> int:
    """Collect once, then freeze every surviving object (modules, plugins, collected tests); returns how many are
    frozen. Call it before any weights or device arrays exist: a frozen cycle is never collected."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
