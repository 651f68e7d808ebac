"""Run a script on fake CPU devices and read the JSON line it prints last.

The fake device count must be set before JAX is imported, so multi-device checks run in a subprocess of their own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Sequence


def fake_device_env(devices: int = 8, *, highest: bool = True) -> dict[str, str]:
    """The environment of a subprocess that sees ``devices`` CPU devices and the interpreter's import path (a
    plugin's ``src/`` that is not installed still imports); ``highest``: full-precision fp32 matmuls."""
    path = os.pathsep.join([p for p in sys.path if p and os.path.isdir(p)] + [os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}", JAX_PLATFORMS="cpu",
               PYTHONPATH=path.rstrip(os.pathsep))
    if highest:
        env["JAX_DEFAULT_MATMUL_PRECISION"] = "highest"
    return env


def run_script(script: str | os.PathLike, *args: str, devices: int = 8, timeout: int = 600,
               python_args: Sequence[str] = (), highest: bool = False) -> dict:
    """``python [python_args] script args`` on ``devices`` fake CPU devices; assert it succeeded and return the
    JSON object of its last stdout line. ``python_args=("-c",)`` runs ``script`` as source text."""
    proc = subprocess.run([sys.executable, *python_args, str(script), *map(str, args)], capture_output=True,
                          text=True, env=fake_device_env(devices, highest=highest), timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
