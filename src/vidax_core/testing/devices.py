"""Run a script on fake CPU devices and read the JSON line it prints last; the XLA flags of a test process.

The fake device count must be set before JAX is imported, so multi-device checks run in a subprocess of their own.
A subprocess keeps the suite's other XLA flags (:func:`use_fast_cpu_compiles`): give it :func:`xla_flags`, never
a bare ``--xla_force_host_platform_device_count``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Sequence


DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"
# Tiny test programs spend their time in XLA:CPU's LLVM passes, not in running: at -O0 a family's whole layout
# suite compiles in about three quarters of the CPU time (measured on the tiny Wan family runs) and a VAE-heavy
# one in half. The flag sets LLVM's optimisation level for the generated CPU code; results stay within the parity
# tests' fp32 bounds (the whole suite passes with it).
FAST_CPU_COMPILE_FLAGS = ("--xla_backend_optimization_level=0",)


def xla_flags(devices: int | None = None) -> str:
    """This process's ``XLA_FLAGS`` with the fake CPU device count set to ``devices`` (None: no count)."""
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith(DEVICE_COUNT_FLAG)]
    return " ".join(flags + ([f"{DEVICE_COUNT_FLAG}={devices}"] if devices else []))


def use_fast_cpu_compiles() -> None:
    """Add :data:`FAST_CPU_COMPILE_FLAGS` to ``XLA_FLAGS`` (before JAX starts its backend): for test suites, whose
    subprocesses inherit them through :func:`xla_flags`. A product run never sets them."""
    flags = os.environ.get("XLA_FLAGS", "").split()
    os.environ["XLA_FLAGS"] = " ".join(flags + [f for f in FAST_CPU_COMPILE_FLAGS if f not in flags])


def fake_device_env(devices: int = 8, *, highest: bool = True) -> dict[str, str]:
    """The environment of a subprocess that sees ``devices`` CPU devices and the interpreter's import path (a
    plugin's ``src/`` that is not installed still imports); ``highest``: full-precision fp32 matmuls."""
    path = os.pathsep.join([p for p in sys.path if p and os.path.isdir(p)] + [os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, XLA_FLAGS=xla_flags(devices), JAX_PLATFORMS="cpu",
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
