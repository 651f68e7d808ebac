"""AnyFlow's rows of the bad-input table: each mistake is exit code 2 and one `error:` line saying what to use
instead, before any weight loads (vidax_core.testing.cli.assert_refused)."""

from __future__ import annotations

import numpy as np
import pytest

from vidax_core.testing.cli import assert_refused

FAR = ["model.id=anyflow-far-wan2.1-1.3b", "model.checkpoint=builtin:tiny-random", "sampling.height=32",
       "sampling.width=32", "sampling.num_steps=2", "sampling.num_frames=25"]
BI = ["model.id=anyflow-wan2.1-t2v-1.3b", "model.checkpoint=builtin:tiny-random", "sampling.height=32",
      "sampling.width=32", "sampling.num_frames=9"]


def _np(path, shape):
    np.save(path, np.zeros(shape, np.float32))
    return f"sampling.initial_noise={path}"


def _image(folder):
    from vidax_core.testing.reference import write_test_image

    return write_test_image(folder / "image.png")


def _clip(folder, n):
    from vidax_core.io.video import write_mp4

    write_mp4(str(folder / "clip.mp4"), np.zeros((n, 32, 32, 3), np.float32), 16)
    return f"video={folder / 'clip.mp4'}"


def _bidirectional_checkpoint():
    from vidax_core.plugins import get_plugins

    plugins = get_plugins()
    return "model.checkpoint=" + plugins.call("builtin_checkpoint", plugins.registry.get("anyflow-wan2.1-t2v-1.3b"),
                                              name="tiny-random")


CASES = [
    ("frames", lambda t: FAR[:-1] + ["sampling.num_frames=24"], "must be 4k+1"),
    ("size", lambda t: FAR + ["sampling.height=40"], "multiple of 16"),
    ("partition-sum", lambda t: FAR + ["options.chunk_partition=[1,2,2]"], "adding up to the video's 7 latent"),
    ("partition-zero", lambda t: FAR + ["options.chunk_partition=[1,0,2,2,2]"], "positive latent frame counts"),
    ("window", lambda t: FAR + ["options.cache_window=0"], "options.cache_window=0 must be at least 1"),
    ("window-smaller-than-chunk", lambda t: FAR + ["options.cache_window=1"], "cannot hold a chunk of 2"),
    ("recompute-window", lambda t: FAR + ["options.use_kv_cache=false", "options.cache_window=2"],
     "cache_window must hold the video's"),
    ("past-rope", lambda t: FAR[:-1] + ["sampling.num_frames=133"], "past the model's RoPE table"),
    ("image-and-video", lambda t: FAR + [f"image={_image(t)}", _clip(t, 5)], "give image (image-to-video) or video"),
    ("clip-frames", lambda t: FAR + [_clip(t, 6)], "AnyFlow conditions on 4n+1 frames"),
    ("clip-covers-all", lambda t: FAR + [_clip(t, 25)], "leaves no chunk of the 7-frame video to make"),
    ("noise-shape", lambda t: FAR + [_np(t / "n.npy", (1, 4, 6, 4, 4))], "this run needs (1, 4, 7, 4, 4)"),
    ("far-option-on-bidirectional", lambda t: BI + ["options.chunk_partition=[1,2]"],
     "unknown config key options.chunk_partition"),
    ("bidirectional-checkpoint-as-far", lambda t: FAR + [_bidirectional_checkpoint()],
     "holds the bidirectional AnyFlow transformer"),
    ("cache-with-chunks", lambda t: FAR + ["cache={method: first_block, threshold: 0.1}"],
     "does not apply to anyflow-far-wan2.1-1.3b"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input(case, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    name, setup, fragment = case
    print(f"{name}: {assert_refused(setup(tmp_path), fragment, capsys, monkeypatch)}")
