"""A per-thread switch turned on for the length of a ``with`` block: how a caller tells code deep below it to
behave differently for one task (check a checkpoint without reading it, generate nothing into the cache during
a dry run) without threading an argument through every call between."""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator


class ThreadSwitch:
    """``with switch.turned_on(): ...``; ``switch.on`` is True inside the block, on this thread only."""

    def __init__(self) -> None:
        self._local = threading.local()

    @property
    def on(self) -> bool:
        return getattr(self._local, "on", False)

    @contextlib.contextmanager
    def turned_on(self) -> Iterator[None]:
        before = self.on
        self._local.on = True
        try:
            yield
        finally:
            self._local.on = before
