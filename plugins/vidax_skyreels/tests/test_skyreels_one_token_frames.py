"""SkyReels-V2 block-causal attention when each latent frame is one token (issue 51, item 4): the shipped
asynchronous recipe (configs/skyreels_v2_df_14b_540p.yaml: ar_step 5, causal blocks of 5 latent frames, windows of
97 frames overlapping by 17, addnoise_condition 20, streamed blocks) at 16x16, where a 2x2 latent grid patchified
2x2 leaves one token a frame. The DiT told per-frame from per-token modulation by comparing their counts, and
refused the causal blocks ("needs a per-frame modulation") as an internal error."""

from __future__ import annotations

import os

import numpy as np

from vidax_core import cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RECIPE = os.path.join(ROOT, "configs", "skyreels_v2_df_14b_540p.yaml")


def test_the_asynchronous_recipe_runs_where_frames_are_tokens(tmp_path, capfd):
    latents = tmp_path / "latents.npy"
    code = cli.main(["run", RECIPE, "model.checkpoint=builtin:tiny-random", "sampling.height=16", "sampling.width=16",
                     "sampling.num_frames=117", "sampling.num_steps=1", "sampling.max_sequence_length=8",
                     f"output.path={tmp_path / 'v.mp4'}", f"output.save_latents={latents}", "output.metrics=null",
                     f"runtime.compilation_cache_dir={tmp_path / 'jc'}", "--quiet"])
    err = capfd.readouterr().err
    assert code == 0, err
    out = np.load(latents)
    assert out.shape[2:] == (30, 2, 2) and np.isfinite(out).all(), out.shape  # 25 + (30 - 25) latent frames
    assert (tmp_path / "v.mp4").stat().st_size > 0
