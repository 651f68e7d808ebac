"""``vidax serve`` as a command: bad arguments end with one ``error:`` line and exit 2 before anything loads; on
the tiny model it loads, announces its address, serves a job, and stops cleanly on Ctrl-C."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading

import pytest

from serve_stub import TINY, post_json, request, wait_done
from vidax_core.cli import main

# the demo config by absolute path: a test elsewhere in the worker may have moved the working directory
DEMO_CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs", "demo.yaml")


@pytest.mark.parametrize("argv,words", [
    (["serve", DEMO_CONFIG, "--max-queue", "0"], "--max-queue must be at least 1"),
    (["serve", DEMO_CONFIG, "--port", "70000"], "--port must be from 0 to 65535"),
    (["serve", DEMO_CONFIG, "--port", "x"], "invalid int value"),
])
def test_bad_arguments(argv, words, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and words in err[0], err


def test_serve_command(tmp_path):
    """``vidax serve model.id=...`` (no config file) serves, logs a line per job and stops on Ctrl-C."""
    exe = os.path.join(os.path.dirname(sys.executable), "vidax")
    cmd = [exe] if os.path.exists(exe) else [sys.executable, "-m", "vidax_core.cli"]
    proc = subprocess.Popen(cmd + ["serve", "model.id=wan2.1-t2v-1.3b", "model.checkpoint=builtin:tiny-random", *TINY,
                                   f"output.path={tmp_path}/x.mp4", "--port", "0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    # SIGINT at its default disposition, as from a terminal: an xdist worker may have it ignored, a child inherits
    # that, and Python then never raises KeyboardInterrupt (the server would serve on). Stderr is drained all
    # along: a server whose unread pipe fills blocks in a write and never stops.
    lines: list[str] = []
    announced = threading.Event()
    reader = threading.Thread(target=_drain, args=(proc.stderr, lines, announced), daemon=True)
    reader.start()
    try:
        announced.wait(240)
        url = next((m.group(1) for m in map(_ADDRESS.search, list(lines)) if m), None)
        assert url, "".join(lines)[-3000:]
        assert json.loads(request(url, "GET", "/health")[2])["status"] == "ok"
        status, job = post_json(url, {"prompt": "from the command", "num_steps": 2})
        assert status == 200, job
        assert wait_done(url, job["id"])["status"] == "completed"
        assert os.listdir(tmp_path) == [f"{job['id']}.mp4"]  # the folder of output.path, nothing else
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0, "".join(lines)[-3000:]
        reader.join(10)
        assert [line for line in lines if line.startswith(f"job {job['id']} completed in ")], lines[-5:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


_ADDRESS = re.compile(r"serving \S+ on (http://127\.0\.0\.1:\d+)")


def _drain(stream, lines: list[str], announced: threading.Event) -> None:
    for line in stream:
        lines.append(line)
        if _ADDRESS.search(line):
            announced.set()
    announced.set()  # the process ended without announcing
