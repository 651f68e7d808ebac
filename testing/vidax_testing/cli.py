"""Run the real `vidax` command line in a subprocess, as a user would (the venv's console script)."""

from __future__ import annotations

import os
import subprocess
import sys


def vidax_command() -> list[str]:
    exe = os.path.join(os.path.dirname(sys.executable), "vidax")
    return [exe] if os.path.exists(exe) else [sys.executable, "-m", "vidax_core.cli"]


def vidax(*args: str, cwd=None, env: dict | None = None, replace_env: bool = False, timeout: int = 600):
    """``vidax ARGS`` on the CPU with full-precision matmuls; ``env`` adds to (or replaces) the environment."""
    base = {} if replace_env else dict(os.environ, JAX_PLATFORMS="cpu", JAX_DEFAULT_MATMUL_PRECISION="highest")
    return subprocess.run(vidax_command() + [str(a) for a in args], capture_output=True, text=True, cwd=cwd,
                          env={**base, **(env or {})}, timeout=timeout)
