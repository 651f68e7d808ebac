"""A long diffusion-forcing video window by window on the built-in tiny checkpoint: device memory does not grow
with the number of windows, each window's frames reach ``on_chunk`` and the mp4 as it completes, progress counts
every window's steps, and a cancelled run leaves no output."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from vidax_core.errors import Cancelled

# windows of 5 latent frames overlapping by 2: each window after the first adds 3 latent frames (12 video frames)
WINDOWS = ["sampling.height=32", "sampling.width=32", "sampling.num_steps=2", "options.base_num_frames=17",
           "options.overlap_history=5", "options.addnoise_condition=20"]


def frames_for(windows: int) -> int:
    return 1 + 4 * (5 + 3 * (windows - 1) - 1)


@pytest.fixture(scope="module")
def pipe():
    import vidax

    with vidax.load("skyreels-v2-df-1.3b-540p", "model.checkpoint=builtin:tiny-random", *WINDOWS) as p:
        yield p


PEAKS = """
import json, sys
import vidax
from test_skyreels_windows import WINDOWS, frames_for
peaks = {}
with vidax.load("skyreels-v2-df-1.3b-540p", "model.checkpoint=builtin:tiny-random", *WINDOWS) as pipe:
    for n in (2, 4, 8):
        out = pipe(prompt="a fox in the snow", num_frames=frames_for(n))
        assert out.metrics["num_windows"] == n and out.frames.shape[1] == frames_for(n)
        assert out.metrics["device_peak_source"] == "live_arrays"
        peaks[n] = out.metrics["device_run_peak_bytes"]
print(json.dumps(peaks))
"""


def test_device_memory_is_flat_in_the_number_of_windows():
    """2, 4 and 8 windows: the device memory a call holds at its peak is the same, to the byte. On the CPU (no
    device statistics) it is the peak of the live device arrays after every step, less those live when the call
    started (the loaded pipe's weights, and the VAE and prompt embeddings it keeps per call configuration). A
    process-wide count: it runs in a process of its own, where no other test's arrays come and go."""
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", PEAKS], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    peaks = {int(k): v for k, v in json.loads(proc.stdout.strip().splitlines()[-1]).items()}
    print(f"device bytes held at the peak by window count: {peaks}")
    assert peaks[2] > 0 and peaks[2] == peaks[4] == peaks[8], peaks


def test_frames_arrive_window_by_window(pipe, tmp_path):
    chunks, progress = [], []
    out = pipe(prompt="a fox", num_frames=frames_for(3), on_chunk=lambda f, k, n: chunks.append((f.copy(), k, n)),
               on_progress=lambda d, t: progress.append((d, t)), output={"path": str(tmp_path / "v.mp4")})
    assert [(k, n) for _, k, n in chunks] == [(0, 3), (1, 3), (2, 3)]
    assert [f.shape[1] for f, _, _ in chunks] == [17, 12, 12]  # the first window's 5 latent frames, then 3 each
    np.testing.assert_array_equal(np.concatenate([f for f, _, _ in chunks], axis=1), out.frames)
    assert progress[-1] == (out.metrics["num_steps"], out.metrics["num_steps"]) and len(progress) == 6
    assert (tmp_path / "v.mp4").stat().st_size > 0


def test_a_cancelled_run_leaves_nothing(pipe, tmp_path):
    stop = threading.Event()
    with pytest.raises(Cancelled):
        pipe(prompt="a fox", num_frames=frames_for(3), on_chunk=lambda f, k, n: stop.set(), cancel=stop,
             output={"path": str(tmp_path / "v.mp4")})
    assert list(tmp_path.iterdir()) == []


def test_per_step_and_mfu_are_a_full_windows(pipe):
    """The last window may be shorter than the others (here 3 latent frames after two of 5): the run's
    ``per_step_s`` and throughput are a full window's (on the TPU the last one's made MFU look 1.5 points higher,
    docs/benchmarks.md), and the windows' own figures stay in ``passes``."""
    out = pipe(prompt="a fox", num_frames=1 + 4 * (5 + 3 + 1 - 1))
    m = out.metrics
    frames = [p["latent_shape"][2] for p in m["passes"]]
    assert frames == [5, 5, 3], frames
    assert m["per_step_s"] == m["passes"][1]["per_step_s"] != m["passes"][2]["per_step_s"]
    if m.get("achieved_flops_per_s"):
        assert m["achieved_flops_per_s"] == pytest.approx(m["flops_per_step"] / m["per_step_s"])


def test_a_prepared_call_run_twice_is_one_video(pipe):
    """The windows' history (the overlap the next window starts from) belongs to one call: the same plan run again
    makes the same video, bit for bit."""
    prepared = pipe.prepare(prompt="a fox", num_frames=frames_for(2), seed=4)
    first, second = pipe.run(prepared), pipe.run(prepared)
    assert first.metrics["num_windows"] == 2
    np.testing.assert_array_equal(first.latents, second.latents)
    np.testing.assert_array_equal(first.frames, second.frames)
