"""The live mp4 of a chunked run (io/video.py ``Mp4Stream(live=True)``): a fragmented mp4 that an ordinary reader
decodes while it grows (up to one frame behind), complete once committed, gone when aborted; a server's
(``in_place``) grows under its own name, a run's under a hidden name renamed into place at the end."""

from __future__ import annotations

import time

import numpy as np

from vidax_core.io.video import Mp4Stream, read_mp4


def test_live_mp4_plays_while_it_grows_and_goes_when_aborted(tmp_path):
    frames = np.random.default_rng(0).random((2, 12, 48, 64, 3)).astype(np.float32)
    path = str(tmp_path / "live.mp4")
    stream = Mp4Stream(path, 16, in_place=True)
    assert stream.growing == path
    stream.append(frames[0])
    seen = []
    for _ in range(50):  # ffmpeg writes asynchronously: wait for the chunk's fragments
        try:
            seen = read_mp4(path)
        except (ValueError, RuntimeError, OSError):  # no whole frame yet
            seen = []
        if len(seen) >= 11:
            break
        time.sleep(0.1)
    assert len(seen) >= 11  # the chunk plays before the run ends (the last frame waits for the next one)
    stream.append(frames[1])
    stream.commit()
    assert len(read_mp4(path)) == 24
    aborted = Mp4Stream(str(tmp_path / "gone.mp4"), 16, in_place=True)
    aborted.append(frames[0])
    aborted.abort()
    assert not (tmp_path / "gone.mp4").exists()


def test_a_runs_live_mp4_grows_under_a_hidden_name_until_committed(tmp_path):
    frames = np.random.default_rng(1).random((2, 12, 48, 64, 3)).astype(np.float32)
    path = str(tmp_path / "run.mp4")
    stream = Mp4Stream(path, 16, live=True)
    assert stream.growing != path and ".partial" in stream.growing
    stream.append(frames[0])
    seen = []
    for _ in range(50):
        try:
            seen = read_mp4(stream.growing)
        except (ValueError, RuntimeError, OSError):
            seen = []
        if len(seen) >= 11:
            break
        time.sleep(0.1)
    assert len(seen) >= 11 and not (tmp_path / "run.mp4").exists()  # it plays; nothing under the output's name
    stream.append(frames[1])
    stream.commit()
    assert len(read_mp4(path)) == 24 and sorted(p.name for p in tmp_path.iterdir()) == ["run.mp4"]
