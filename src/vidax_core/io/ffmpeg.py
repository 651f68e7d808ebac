"""imageio-ffmpeg, imported one way for all of vidax: its ffmpeg children start with no Python code run between
the fork and the exec.

imageio-ffmpeg starts ffmpeg with ``preexec_fn=os.setpgrp`` (to keep a terminal's Ctrl-C from the child). That runs
Python in the forked copy of a multi-threaded process: a garbage collection there that finalises an object whose
cleanup waits on one of the parent's threads (PyAV's slice threads, seen in a `vidax serve` worker) hangs the child
before its exec, and the parent with it, for ever. The library's own switch turns the hook off (unless the user set
it); ffmpeg then shares the terminal's Ctrl-C, which ends a vidax run anyway (its partial file is removed).
"""

from __future__ import annotations

import os
from types import ModuleType

NO_PREEXEC = "IMAGEIO_FFMPEG_NO_PREVENT_SIGINT"


def ffmpeg_module() -> ModuleType:
    """The ``imageio_ffmpeg`` module with its fork hook off; raises ImportError where it is not installed."""
    os.environ.setdefault(NO_PREEXEC, "1")
    import imageio_ffmpeg as module

    return module
