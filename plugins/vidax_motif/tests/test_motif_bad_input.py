"""Motif-Video's rows of the bad-input table: each mistake is exit code 2 and one `error:` line saying what to use
instead, before any weight loads (vidax_core.testing.cli.assert_refused)."""

from __future__ import annotations

import numpy as np
import pytest

from vidax_core.testing.cli import assert_refused

BASE = ["model.id=motif-video-2b", "model.checkpoint=builtin:tiny-random", "sampling.height=32", "sampling.width=48",
        "sampling.num_steps=2", "sampling.num_frames=9", "sampling.max_sequence_length=16"]


def _guider(folder, **changes):
    """A copy of the built-in checkpoint whose guider config says ``changes``."""
    import json

    from vidax_core.testing.assets import writable_asset

    root = writable_asset("vidax_motif", folder)
    path = folder / "guider" / "guider_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))
    return f"model.checkpoint={root}"


def _noise(path, shape):
    np.save(path, np.zeros(shape, np.float32))
    return f"sampling.initial_noise={path}"


CASES = [
    ("frames", lambda t: BASE + ["sampling.num_frames=10"], "must be 4k+1 for motif-video-2b"),
    ("size", lambda t: BASE + ["sampling.height=36"], "must be a multiple of 8 for motif-video-2b"),
    ("size-not-patched", lambda t: BASE + ["sampling.height=40"], "patch"),
    ("video-input", lambda t: BASE + ["video=clip.mp4"], "takes no video input"),
    ("missing-image", lambda t: BASE + ["image=nowhere.png"], "nowhere.png"),
    ("scheduler-without-sigmas", lambda t: BASE + ["sampling.scheduler=dpm_solver++"],
     "use sampling.scheduler=flow_euler or unipc"),
    ("noise-shape", lambda t: BASE + [_noise(t / "n.npy", (1, 4, 3, 4, 4))], "(1, 4, 3, 4, 6)"),
    ("guider-kind", lambda t: BASE + [_guider(t / "c", _class_name="SkipLayerGuidance")],
     "guider/guider_config.json: _class_name='SkipLayerGuidance' is not supported"),
    ("guider-window", lambda t: BASE + [_guider(t / "c", start=0.8, stop=0.5)], "start <= stop"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input(case, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    name, setup, fragment = case
    print(f"{name}: {assert_refused(setup(tmp_path), fragment, capsys, monkeypatch)}")
