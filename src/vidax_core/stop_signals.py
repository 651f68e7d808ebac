"""A stop signal a run cannot lose (SIGTERM, Ctrl-C).

Python raises a signal handler's exception wherever the main thread happens to be. Inside a garbage-collector
callback (JAX registers one) or a destructor it is printed as "Exception ignored" and dropped, and the run went on
to write its video with exit code 0. So the CLI's handlers also record the signal here, and a run raises it again
at its next check (:func:`raise_pending`: between steps, and before a chunked run's video is renamed into place).
"""

from __future__ import annotations

import gc
from types import FrameType


class Terminated(KeyboardInterrupt):
    """SIGTERM (a service manager's stop, ``kill``, ``timeout``) raised in the main thread: the run unwinds as
    for Ctrl-C, so its temporary outputs are removed, and exits 143."""


_pending: type[KeyboardInterrupt] | None = None


def request(kind: type[KeyboardInterrupt]) -> None:
    """Record a stop signal (called by a signal handler, which then raises ``kind`` itself)."""
    global _pending
    _pending = kind


def clear() -> None:
    """Forget a recorded signal (the handlers are being removed)."""
    global _pending
    _pending = None


def in_gc_callback(frame: FrameType | None) -> bool:
    """Whether ``frame`` (the one a signal interrupted) runs inside a garbage-collector callback, where a raise is
    dropped with a printed traceback: the handler then only records the signal."""
    codes = {getattr(cb, "__code__", None) for cb in gc.callbacks}
    while frame is not None:
        if frame.f_code in codes:
            return True
        frame = frame.f_back
    return False


def raise_pending() -> None:
    """Raise the recorded stop signal again, if there is one: the handler's own raise may have been dropped."""
    if _pending is not None:
        raise _pending()
