"""Helios' rows of the bad-input table: each mistake is exit code 2 and one `error:` line saying what to use
instead, before any weight loads (vidax_core.testing.cli.assert_refused)."""

from __future__ import annotations

import numpy as np
import pytest

from vidax_core.testing.cli import assert_refused

BASE = ["model.id=helios-base", "model.checkpoint=builtin:tiny-random", "sampling.height=32", "sampling.width=32",
        "sampling.num_steps=2", "sampling.num_frames=18", "options.num_latent_frames_per_chunk=3"]


def _npz(path, **arrays):
    np.savez(path, **{k: np.zeros(s, np.float32) for k, s in arrays.items()})
    return f"sampling.initial_noise={path}"


PYRAMID = ["model.id=helios-mid", "model.checkpoint=builtin:tiny-random", "sampling.height=64", "sampling.width=64",
           "sampling.num_steps=6", "options.pyramid_num_inference_steps_list=[2, 2, 2]", "sampling.num_frames=18",
           "options.num_latent_frames_per_chunk=3"]


def _huge(path, which, value):
    """Standard normal draws for the run's chunks, draw ``which`` times ``value`` (finite in float32)."""
    rng = np.random.default_rng(0)
    draws = [rng.standard_normal((1, 4, 3, 4, 4)).astype(np.float32) for _ in range(2)]
    draws[which] = np.full_like(draws[which], value)
    if str(path).endswith(".npy"):
        np.save(path, draws[0])
    else:
        np.savez(path, **{f"noise_{k}": d for k, d in enumerate(draws)})
    return f"sampling.initial_noise={path}"


def _builtin(model_id: str) -> str:
    from vidax_core.plugins import get_plugins

    plugins = get_plugins()
    return plugins.call("builtin_checkpoint", plugins.registry.get(model_id), name="tiny-random")


CASES = [
    ("size", lambda t: BASE + ["sampling.height=40"], "multiple of 16"),
    ("history-sizes", lambda t: BASE + ["options.history_sizes=[16, 2]"], "three positive latent frame counts"),
    ("chunk", lambda t: BASE + ["options.num_latent_frames_per_chunk=0"], "at least 1"),
    ("keep-first-frame-false", lambda t: BASE + ["options.keep_first_frame=false"], "keep it true"),
    ("sp-does-not-divide", lambda t: BASE + ["parallel.sp=3", "parallel.dp=1"], "tokens of a chunk and its history"),
    ("noise-one-draw-for-two-chunks", lambda t: BASE + [_npz(t / "n.npz", noise_0=(1, 4, 3, 4, 4))],
     "missing noise_1"),
    ("noise-wrong-shape", lambda t: BASE + [_npz(t / "n.npz", noise_0=(1, 4, 3, 4, 4), noise_1=(1, 4, 9, 4, 4))],
     "noise_1 has shape (1, 4, 9, 4, 4), this run needs (1, 4, 3, 4, 4)"),
    # issue 51: a Helios initial-noise draw that is finite but huge (noise_2 * 1e38) made a NaN or black video
    ("noise-draw-finite-but-huge", lambda t: BASE + [_huge(t / "n.npz", 1, 1e37)],
     "noise_1 holds values up to 1e+37"),
    ("noise-npy-huge", lambda t: BASE + ["sampling.num_frames=9", _huge(t / "n.npy", 0, 3e38)],
     "holds values up to 3e+38"),
    # the pyramid ids (HeliosPyramidPipeline)
    ("pyramid-steps", lambda t: PYRAMID + ["sampling.num_steps=5"], "set sampling.num_steps=6"),
    ("pyramid-size", lambda t: PYRAMID + ["sampling.height=48"], "must be a multiple of 64"),
    ("pyramid-scheduler", lambda t: PYRAMID + ["sampling.scheduler=unipc"], "remove sampling.scheduler"),
    ("pyramid-stage-count", lambda t: PYRAMID + ["options.pyramid_num_inference_steps_list=[3, 3]"],
     "has stages=3: give 3 step counts"),
    ("pyramid-checkpoint-as-base", lambda t: BASE + [f"model.checkpoint={_builtin('helios-distilled')}"],
     "run it as helios-mid or helios-distilled"),
    ("base-checkpoint-as-pyramid", lambda t: PYRAMID + [f"model.checkpoint={_builtin('helios-base')}"],
     "is not the HeliosPyramidPipeline helios-mid runs"),
    ("pyramid-noise-without-block-noise", lambda t: PYRAMID + [_npz(t / "n.npz", noise_0=(1, 4, 3, 8, 8))],
     "missing noise_1"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input(case, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    name, setup, fragment = case
    print(f"{name}: {assert_refused(setup(tmp_path), fragment, capsys, monkeypatch)}")


def test_frame_counts_rounded_up_to_whole_chunks_are_stated(capsys):
    """Helios frame counts rounded up to whole chunks with no word: the plan (dry run and run log) says so."""
    from vidax_core import cli

    assert cli.main(["run", *BASE, "sampling.num_frames=10", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "frames:     the video has 17 frames, not the 10 asked" in out, out
    assert cli.main(["run", *BASE, "sampling.num_frames=17", "--dry-run"]) == 0
    assert "not the" not in capsys.readouterr().out
