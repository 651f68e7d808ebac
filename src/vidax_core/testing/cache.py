"""One persistent compilation cache for a whole test suite: pytest workers, ``vidax`` subprocesses and fake-device
runs all read and write the product's default cache folder (``runtime.compilation_cache_dir``), so a program
compiled by one test is loaded by every later test that builds it. A run on an empty cache (a fresh machine, or
CI after ``rm -rf ~/.cache/vidax``) fills it as it goes."""

from __future__ import annotations

import os


def suite_cache_dir() -> str:
    from vidax_core.config import RuntimeConfig

    return os.path.expanduser(RuntimeConfig.compilation_cache_dir)


def use_suite_cache() -> str:
    """Point this process's JAX at the suite cache with the runner's thresholds; returns the folder."""
    from types import SimpleNamespace

    from vidax_core.config import RuntimeConfig
    from vidax_core.runner.compilation_cache import setup_runtime

    setup_runtime(SimpleNamespace(runtime=RuntimeConfig()))
    return suite_cache_dir()
