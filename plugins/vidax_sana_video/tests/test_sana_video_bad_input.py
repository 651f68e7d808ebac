"""SANA-Video's rows of the bad-input table: each mistake is exit code 2 and one `error:` line saying what to use
instead, before any weight loads (vidax_core.testing.cli.assert_refused)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from vidax_core.testing.assets import asset_folder
from vidax_core.testing.cli import assert_refused

BASE = ["model.id=sana-video-2b-480p", "model.checkpoint=builtin:tiny-random", "sampling.height=32",
        "sampling.width=64", "sampling.num_steps=2", "sampling.num_frames=5", "options.use_resolution_binning=false"]


def _checkpoint(tmp_path, component: str, **changes) -> str:
    folder = tmp_path / "ckpt"
    shutil.copytree(asset_folder("vidax_sana_video"), folder)
    path = folder / component / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))
    return f"model.checkpoint={folder}"


def _npy(path, shape) -> str:
    np.save(path, np.zeros(shape, np.float32))
    return f"sampling.initial_noise={path}"


CASES = [
    ("frames", lambda t: BASE + ["sampling.num_frames=8"], "must be 4k+1"),
    ("size-without-binning", lambda t: BASE + ["sampling.height=48"], "multiple of 32"),
    ("bin-not-a-multiple-of-32", lambda t: BASE + ["options.use_resolution_binning=true", "sampling.height=512",
                                                   "sampling.width=512"], "bin 624x624, which the pipelines refuse"),
    ("clean-caption", lambda t: BASE + ["options.clean_caption=true"], "keep options.clean_caption=false"),
    ("video-input", lambda t: BASE + ["video=clip.mp4"], "takes no video input"),
    ("ltx2-vae", lambda t: BASE + [_checkpoint(t, "vae", _class_name="AutoencoderKLLTX2Video")],
     "the LTX-2 video VAE"),
    ("guidance-embeds", lambda t: BASE + [_checkpoint(t, "transformer", guidance_embeds=True)],
     "guidance_embeds=true"),
    ("per-head-qk-norm", lambda t: BASE + [_checkpoint(t, "transformer", qk_norm="rms_norm")], "norms each head"),
    ("rope-table", lambda t: BASE + [_checkpoint(t, "transformer", rope_max_seq_len=3)], "rope_max_seq_len=3"),
    ("noise-wrong-shape", lambda t: BASE + [_npy(t / "n.npy", (1, 4, 2, 4, 4))],
     "has shape (1, 4, 2, 4, 4), this run needs (1, 4, 2, 4, 8)"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input(case, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    name, setup, fragment = case
    print(f"{name}: {assert_refused(setup(tmp_path), fragment, capsys, monkeypatch)}")
