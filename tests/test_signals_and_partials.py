"""A stopped ``vidax run`` leaves nothing (issue 51, item 5): partial output after SIGTERM/SIGKILL of a windowed
vidax run (the hidden ``.partial.mp4`` stayed; SIGINT was right: rc 130, nothing left), and nothing removed stale
partial files later.

SIGTERM is now handled like SIGINT: exit 143, one line, the temporary mp4 removed. A SIGKILLed run cannot remove
its own, so a temporary name carries the writing process (``.NAME.<host>-<pid>.XXXX.partial.EXT``) and the next
write of that output removes those whose process is gone, never a live run's.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from vidax_core.io import outputs, stale

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WINDOWED = [os.path.join(ROOT, "configs", "skyreels_demo.yaml"), "sampling.height=32", "sampling.width=32",
            "sampling.num_frames=41", "sampling.num_steps=8", "sampling.max_sequence_length=8", "output.metrics=null"]


def _partials(folder):
    return sorted(p for p in os.listdir(folder) if ".partial" in p)


def _start(tmp_path, *extra):
    out = tmp_path / "out"
    out.mkdir()
    cmd = [sys.executable, "-m", "vidax_core.cli", "run", *WINDOWED, f"output.path={out / 'v.mp4'}",
           f"runtime.compilation_cache_dir={tmp_path / 'jc'}", "--quiet", *extra]
    # SIGTERM at its default disposition, as from a shell (a test runner's worker may have changed it)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL))
    end = time.monotonic() + 240
    while not _partials(out):  # the run is inside its windows: its mp4 stream is open
        assert proc.poll() is None and time.monotonic() < end, proc.communicate()[1][-2000:]
        time.sleep(0.05)
    return proc, out


def test_a_sigterm_ends_a_windowed_run_as_sigint_does(tmp_path):
    """rc 143 (SIGINT's 130 is tests/test_outputs.py's), one line, nothing left beside the output."""
    proc, out = _start(tmp_path)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    lines = [line for line in err.splitlines() if line.strip()]
    assert proc.returncode == 143, err[-2000:]
    assert lines == ["error: terminated (SIGTERM); no partial output was written"], lines
    assert os.listdir(out) == [], os.listdir(out)


def test_a_sigkilled_runs_partial_is_removed_by_the_next_write_of_that_output(tmp_path):
    proc, out = _start(tmp_path)
    proc.kill()
    proc.wait(timeout=60)
    left = _partials(out)
    assert len(left) == 1 and f".{stale.host()}-{proc.pid}." in left[0], left
    outputs.save_json(str(out / "v.mp4"), {"a": 1})  # the next write of that output
    assert _partials(out) == [] and os.listdir(out) == ["v.mp4"]


def test_a_live_runs_partial_is_never_removed(tmp_path):
    """Only this host's dead processes are swept: a live process's partial (another run writing the same output
    now) and one stamped by another host stay."""
    live = tmp_path / f".v.{stale.host()}-{os.getppid()}.abcd1234.partial.mp4"
    other_host = tmp_path / ".v.elsewhere-1.abcd1234.partial.mp4"
    dead = tmp_path / f".v.{stale.host()}-{2**22 + 777}.abcd1234.partial.mp4"  # above pid_max: no such process
    unstamped = tmp_path / ".v.abcd1234.partial.mp4"  # an older vidax's: whose it is cannot be known
    for p in (live, other_host, dead, unstamped):
        p.write_bytes(b"x")
    outputs.save_json(str(tmp_path / "v.mp4"), {})
    assert live.exists() and other_host.exists() and unstamped.exists() and not dead.exists()


def test_a_stop_signal_whose_raise_was_dropped_stops_the_run_at_its_next_step(tmp_path):
    """A signal handler's exception raised inside a garbage-collector callback is printed and dropped by Python; the
    handler's record of it makes the run raise it again before its next step, and nothing is written."""
    import pytest

    import vidax
    from vidax_core import stop_signals
    from vidax_core.stop_signals import Terminated

    out = tmp_path / "v.mp4"
    with vidax.load("wan2.1-t2v-1.3b", "model.checkpoint=builtin:tiny-random", "sampling.height=32",
                    "sampling.width=32", "sampling.num_frames=5", "sampling.num_steps=2") as pipe:
        stop_signals.request(Terminated)  # what _terminate records before its raise (here: never raised)
        try:
            with pytest.raises(Terminated):
                pipe(prompt="a fox", output={"path": str(out)}, on_progress=lambda d, t: pytest.fail("a step ran"))
        finally:
            stop_signals.clear()
        assert pipe(prompt="a fox").frames.shape[1] == 5  # cleared: the pipe runs again
    assert os.listdir(tmp_path) == []


def test_a_signal_inside_a_gc_callback_is_recorded_not_raised_there():
    """Python drops (and prints) an exception raised in a gc callback; the handlers see that frame and only record."""
    import gc

    from vidax_core import stop_signals

    seen = []

    def callback(phase, info):
        if phase == "start" and not seen:
            seen.append((stop_signals.in_gc_callback(sys._getframe()), sys._getframe()))

    gc.callbacks.append(callback)
    try:
        gc.collect()
    finally:
        gc.callbacks.remove(callback)
    assert seen and seen[0][0] is True
    assert stop_signals.in_gc_callback(sys._getframe()) is False
