"""Keep Python's garbage collector off the imported test oracles. The runner calls ``gc.collect()`` when it frees a
text encoder or closes a pipe, so that reference cycles holding device buffers go at once. In a test process the
heap also holds torch, diffusers and transformers (about half a million tracked objects), and every full collection
walks them all: ~0.1-0.2 s per call, most of a tiny run's time. Freezing what exists after collection moves those
objects out of the collector's reach; what tests create later is collected as before."""

from __future__ import annotations

import gc


def freeze_import_heap() -> int:
    """Collect once, then freeze every surviving object (modules, collected tests); returns how many were frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
