"""``vidax serve`` under jax.distributed: process 0 serves HTTP and broadcasts each job; the other process makes
the same calls with the same keywords, and a DELETE stops both at the same step (two local CPU processes, gloo)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(__file__), "parallel_scripts", "serve_multihost.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def test_two_processes_run_every_job(tmp_path):
    port = free_port()
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=1")
    procs = [subprocess.Popen([sys.executable, SCRIPT, str(pid), str(port), str(tmp_path)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for pid in range(2)]
    try:
        for p in procs:
            _, err = p.communicate(timeout=240)
            assert p.returncode == 0, err[-3000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    leader, follower = (json.loads((tmp_path / f"calls-{i}.json").read_text()) for i in range(2))
    assert [c["end"] for c in leader] == ["done", "cancelled", "done"]
    assert follower == leader  # same keywords, same cancel checks, same endings
    assert leader[1]["checks"][-1] is True and not any(leader[1]["checks"][:-1])
    assert leader[2]["kwargs"]["width"] == 48
    assert sorted(os.listdir(tmp_path / "videos")) and not os.listdir(tmp_path / "follower")
