"""Nothing lost, nothing partial: atomic output files, overwrite protection, clean Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from vidax_core.io import outputs
from vidax_core.io import video
from vidax_core.errors import UserError
from vidax_core.testing.cache import suite_cache_dir


def test_atomic_write_leaves_nothing_on_error(tmp_path):
    target = tmp_path / "v.mp4"
    with pytest.raises(RuntimeError):
        with outputs.atomic_path(str(target)) as tmp:
            open(tmp, "wb").write(b"half a video")
            raise RuntimeError("decoder died")
    assert os.listdir(tmp_path) == []


def test_atomic_write_replaces_only_on_success(tmp_path):
    target = tmp_path / "a.npy"
    outputs.save_npy(str(target), np.arange(3))
    assert np.load(target).tolist() == [0, 1, 2]
    assert oct(os.stat(target).st_mode & 0o777) != oct(0o600)  # normal permissions, not mkstemp's
    outputs.save_npy(str(target), np.arange(4))
    assert np.load(target).tolist() == [0, 1, 2, 3]
    assert sorted(os.listdir(tmp_path)) == ["a.npy"]


def test_existing_output_needs_overwrite(tmp_path):
    target = tmp_path / "o.mp4"
    target.write_bytes(b"precious")
    with pytest.raises(UserError, match="already exists"):
        outputs.check_writable([str(target)], overwrite=False)
    outputs.check_writable([str(target)], overwrite=True)
    assert target.read_bytes() == b"precious"


def test_mp4_round_trip(tmp_path):
    frames = np.linspace(0, 1, 5 * 16 * 16 * 3, dtype=np.float32).reshape(5, 16, 16, 3)
    video.write_mp4(str(tmp_path / "v.mp4"), frames, fps=8)
    back = video.read_mp4(str(tmp_path / "v.mp4"))
    assert back.shape == (5, 16, 16, 3)
    assert np.abs(back.astype(np.float32) / 255 - frames).mean() < 0.05  # lossy codec, same picture


def test_ctrl_c_during_sampling_exits_cleanly(tmp_path):
    exe = os.path.join(os.path.dirname(sys.executable), "vidax")
    out = tmp_path / "o.mp4"
    cmd = [exe, "run", "configs/demo.yaml", "sampling.num_steps=10000", f"output.path={out}",
           f"output.save_latents={tmp_path / 'l.npy'}", f"output.metrics={tmp_path / 'm.json'}",
           f"runtime.compilation_cache_dir={suite_cache_dir()}"]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # as from a terminal: SIGINT at its default disposition (a test runner's worker may have set it to ignored,
    # which a child inherits, and Python then never raises KeyboardInterrupt)
    proc = subprocess.Popen(cmd, cwd=root, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=False,
                            env=dict(os.environ, JAX_PLATFORMS="cpu"),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen = threading.Event()
    chunks: list[bytes] = []

    def watch():
        while True:
            b = proc.stderr.read(64)
            if not b:
                return
            chunks.append(b)
            if b"sampling:" in b"".join(chunks[-4:]) and b"/10000" in b"".join(chunks[-4:]):
                seen.set()

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    assert seen.wait(240), b"".join(chunks).decode(errors="replace")[-2000:]
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    code = proc.wait(120)
    t.join(10)
    err = b"".join(chunks).decode(errors="replace")
    assert code == 130, err[-2000:]
    assert "error: interrupted" in err and "Traceback" not in err
    assert os.listdir(tmp_path) == ["jc"] or set(os.listdir(tmp_path)) <= {"jc"}


def test_one_latent_array_saved_under_a_npz_name_is_an_archive(tmp_path):
    """A file is what its name says: one array named .npz is an archive holding ``latents``."""
    from vidax_core.runner.outputs import save_latents

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    save_latents(str(tmp_path / "l.npz"), x)
    save_latents(str(tmp_path / "l.npy"), x)
    with np.load(tmp_path / "l.npz") as z:
        np.testing.assert_array_equal(z["latents"], x)
    np.testing.assert_array_equal(np.load(tmp_path / "l.npy"), x)
