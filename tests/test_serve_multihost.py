"""``vidax serve`` under jax.distributed: process 0 serves HTTP and broadcasts each job; the other process makes
the same calls with the same keywords, and a DELETE stops both at the same step (two local CPU processes, gloo)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from vidax_core.testing.devices import xla_flags

# the demo config by absolute path: a test elsewhere in the worker may have moved the working directory
DEMO_CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs", "demo.yaml")

SCRIPT = os.path.join(os.path.dirname(__file__), "parallel_scripts", "serve_multihost.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def test_two_processes_run_every_job(tmp_path):
    port = free_port()
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=xla_flags(1))
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


@pytest.mark.long
def test_vidax_serve_on_two_processes(tmp_path):
    """The real command on the tiny model with tp=2 across two processes: jobs complete, a DELETE cancels a
    running job on both, only process 0 writes, and SIGTERM to process 0 stops both cleanly. The prompt encoder
    is parked as by default (``runtime.text_encoder=host``): arrays spread over both processes stay in place."""
    import re
    import signal
    import time

    from serve_stub import TINY, post_json, request, wait_done

    exe = os.path.join(os.path.dirname(sys.executable), "vidax")
    cmd = [exe] if os.path.exists(exe) else [sys.executable, "-m", "vidax_core.cli"]
    port = free_port()
    procs = []
    for pid in range(2):
        env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=xla_flags(1),
                   JAX_COORDINATOR_ADDRESS=f"localhost:{port}", JAX_NUM_PROCESSES="2", JAX_PROCESS_ID=str(pid))
        args = ["serve", DEMO_CONFIG, "model.checkpoint=builtin:tiny-random", *TINY, "parallel.tp=2",
                "runtime.compilation_cache=false",
                f"output.path={tmp_path / f'out{pid}' / 'x.mp4'}", "--port", "0", "--quiet"]
        procs.append(subprocess.Popen(cmd + args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    try:
        url, end = None, time.monotonic() + 240
        while url is None and time.monotonic() < end:
            line = procs[0].stderr.readline()
            assert line, "process 0 ended before serving: " + procs[0].stderr.read()[-3000:]
            m = re.search(r"serving \S+ on (http://127\.0\.0\.1:\d+)", line)
            url = m.group(1) if m else None
        status, first = post_json(url, {"prompt": "a fox", "seed": 2})
        assert status == 200 and wait_done(url, first["id"], 240)["status"] == "completed"
        status, long_job = post_json(url, {"prompt": "long", "num_steps": 3000})
        while json.loads(request(url, "GET", f"/v1/videos/{long_job['id']}")[2])["progress"] < 1:
            assert time.monotonic() < end + 240
            time.sleep(0.1)
        assert request(url, "DELETE", f"/v1/videos/{long_job['id']}")[0] == 200
        status, last = post_json(url, {"prompt": "after", "num_steps": 2})
        assert wait_done(url, last["id"], 120)["status"] == "completed"
        procs[0].send_signal(signal.SIGTERM)
        for p in procs:
            _, err = p.communicate(timeout=60)
            assert p.returncode == 0, err[-3000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
    assert sorted(os.listdir(tmp_path / "out0")) == sorted([f"{first['id']}.mp4", f"{last['id']}.mp4"])
    assert not (tmp_path / "out1").exists() or not [n for n in os.listdir(tmp_path / "out1") if n.endswith(".mp4")]
