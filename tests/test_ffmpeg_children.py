"""ffmpeg starts with no Python code between fork and exec.

imageio-ffmpeg's default ``preexec_fn`` runs Python in the forked child; in a multi-threaded `vidax serve` a garbage
collection there finalised a PyAV object whose cleanup waits on a parent thread, and the job hung for ever in
``Popen`` (seen in the suite, 2026-12-07). Every ffmpeg child vidax starts must come without that hook.
"""

import subprocess

import numpy as np
import pytest

from vidax_core.io import ffmpeg, video


@pytest.fixture
def popen_calls(monkeypatch):
    """Records the keyword arguments of every Popen while passing the call through."""
    calls = []
    real = subprocess.Popen

    class Recording(real):
        def __init__(self, *args, **kwargs):
            calls.append(kwargs)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", Recording)
    monkeypatch.delenv(ffmpeg.NO_PREEXEC, raising=False)
    return calls


def test_writing_and_reading_an_mp4_run_no_python_in_the_child(tmp_path, popen_calls):
    frames = np.random.default_rng(0).random((3, 16, 16, 3), dtype=np.float32)
    path = str(tmp_path / "v.mp4")
    video.write_mp4(path, frames, fps=8)
    assert video.read_mp4(path).shape == (3, 16, 16, 3)
    assert len(popen_calls) >= 2
    assert [kw.get("preexec_fn") for kw in popen_calls] == [None] * len(popen_calls)


def test_a_user_setting_is_kept(monkeypatch):
    monkeypatch.setenv(ffmpeg.NO_PREEXEC, "0")
    ffmpeg.ffmpeg_module()
    import os

    assert os.environ[ffmpeg.NO_PREEXEC] == "0"
