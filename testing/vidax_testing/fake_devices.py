"""Run a script of tests/parallel_scripts/ on 8 fake CPU devices and read the JSON line it prints last.

The fake device count must be set before JAX is imported, so multi-device checks run in a subprocess of their own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

SCRIPTS = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "parallel_scripts")


def run_script(name: str, *args: str, devices: int = 8, timeout: int = 600) -> dict:
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}", JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, os.path.join(SCRIPTS, name), *args], capture_output=True, text=True,
                          env=env, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
