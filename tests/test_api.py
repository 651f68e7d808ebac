"""The load-once Python API: weights stay placed, programs are reused, and a call equals `vidax run`.

Checked on the built-in tiny Wan checkpoint: three calls of one pipe (two of one shape, one of a new shape) open
no weight file after the load and the second compiles nothing; the API's frames equal the CLI's for the same
prompt, seed and overrides; batches resume, number their outputs and report bad lines before loading.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import vidax
from vidax_core.errors import UserError
from vidax_core.testing.counters import Counters

DEMO = os.path.join(os.path.dirname(__file__), "..", "configs", "demo.yaml")
FAST = ("sampling.num_steps=3", "sampling.height=64", "sampling.width=64", "sampling.num_frames=5")
NO_DISK_CACHE = "runtime.compilation_cache=false"  # a persistent-cache hit would hide the first call's compiles


@pytest.fixture(scope="module")
def pipe():
    with vidax.load(DEMO, *FAST) as p:
        yield p


def test_three_calls_open_no_weight_file_and_the_repeat_compiles_nothing(monkeypatch):
    counters = Counters(monkeypatch)
    with vidax.load(DEMO, *FAST, NO_DISK_CACHE) as pipe:
        assert any(o.endswith(".safetensors") for o in counters.weight_opens)  # the load reads the weights
        per_call, load_s = [], []
        for kw in (dict(prompt="a red fox", seed=1), dict(prompt="a red fox", seed=2),
                   dict(prompt="a red fox", seed=2, num_frames=9)):
            counters.reset()
            out = pipe(**kw)
            per_call.append((list(counters.weight_opens), counters.compiles, out.frames.shape))
            load_s.append(out.metrics["load_s"])
        loaded = pipe._model.load_s
    # docs/python-api.md: the first call's load_s includes the model's load, a later one's only its preparation
    doc = " ".join(open(os.path.join(os.path.dirname(__file__), "..", "docs", "python-api.md")).read().split())
    assert "the first call's `load_s` includes the model's load, a later call's is only its own preparation" in doc
    assert load_s[0] >= loaded > load_s[1] > 0, (load_s, loaded)
    (opens1, compiles1, shape1), (opens2, compiles2, shape2), (opens3, compiles3, shape3) = per_call
    assert compiles1 > 0, "the first call compiles its step and decoder"
    assert opens2 == [] and opens3 == [], f"calls after the first opened weight files: {opens2 + opens3}"
    assert compiles2 == 0, f"a repeated shape compiled {compiles2} programs"
    assert compiles3 > 0, "a new frame count needs its own programs"
    assert shape1 == shape2 == (1, 5, 64, 64, 3) and shape3 == (1, 9, 64, 64, 3)


def test_a_different_prompt_of_the_same_shape_compiles_nothing(monkeypatch, pipe):
    pipe(prompt="warm-up prompt", seed=0)
    counters = Counters(monkeypatch)
    pipe(prompt="another prompt", seed=0)
    assert counters.compiles == 0 and counters.weight_opens == []


def test_api_frames_equal_vidax_run(tmp_path, pipe):
    from vidax_core.testing.cli import vidax as run_vidax

    frames = tmp_path / "frames.npy"
    proc = run_vidax("run", DEMO, *FAST, "prompt=a lighthouse at dusk", "sampling.seed=7",
                     f"output.path={tmp_path / 'v.mp4'}", f"output.save_frames={frames}", "output.metrics=null",
                     cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = pipe(prompt="a lighthouse at dusk", seed=7)
    cli = np.load(frames)
    assert out.frames.dtype == np.float32 and out.frames.shape == cli.shape
    np.testing.assert_array_equal(out.frames, cli)
    other = pipe(prompt="a lighthouse at dusk", seed=8)
    assert np.abs(other.frames - cli).max() > 1e-3  # the seed reaches the result (the check can fail)


def test_prompt_cache_and_encoder_kept_between_calls(pipe):
    model = pipe._model
    builds = model.encoders.builds
    hits = model.encoders.hits
    pipe(prompt="cached prompt", seed=0)
    pipe(prompt="cached prompt", seed=1)
    assert model.encoders.builds == builds  # the encoder was built once, not per call
    assert model.encoders.hits == hits + 1  # the second call's prompts came from the cache


def test_output_save_writes_a_playable_mp4(tmp_path, pipe):
    import imageio.v3 as iio

    out = pipe(prompt="a boat", seed=3)
    path = out.save(str(tmp_path / "sub" / "boat.mp4"))
    frames = iio.imread(path)
    assert frames.shape[0] == out.frames.shape[1]
    assert set(out.metrics) >= {"load_s", "compile_s", "per_step_s", "decode_s", "total_s", "peak_rss_mb"}


@pytest.mark.parametrize("kwargs, words", [
    (dict(parallel={"tp": 2}), "cannot change between calls"),
    (dict(model={"id": "x"}), "cannot change between calls"),
    (dict(num_frame=5), "did you mean num_frames"),
    (dict(num_frames=6), "4k+1"),
    (dict(num_steps=0), "num_steps must be at least 1"),
    (dict(options={"nope": 1}), "unknown config key options.nope"),
    (dict(guidance_scale="high"), "guidance_scale must be a number"),
])
def test_bad_calls_are_one_line_user_errors(pipe, kwargs, words):
    with pytest.raises(UserError) as err:
        pipe(**kwargs)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_load_refuses_what_vidax_run_refuses():
    with pytest.raises(vidax.UserError, match="unknown config key sampling.num_step"):
        vidax.load(DEMO, "sampling.num_step=3")
    with pytest.raises(vidax.UserError, match="unknown model id .no-such-model-id."):
        vidax.load("no-such-model-id")


def test_closed_pipe_refuses_calls():
    p = vidax.load(DEMO, *FAST)
    p.close()
    with pytest.raises(UserError, match="closed"):
        p(prompt="x")


def test_frames_for_seconds_follows_the_frame_rule(pipe):
    # configs/demo.yaml writes 8 fps and Wan takes 4k+1 frames
    assert pipe.fps == 8
    assert pipe.frames_for_seconds(1.0) == 9
    assert pipe.frames_for_seconds(0.5) == 5
    with pytest.raises(UserError):
        pipe.frames_for_seconds(-1)


def test_batch_numbers_outputs_resumes_and_reports_bad_lines(tmp_path):
    from vidax_core.testing.cli import vidax as run_vidax

    lines = tmp_path / "prompts.jsonl"
    lines.write_text(json.dumps({"prompt": "a fox", "seed": 1}) + "\n"
                     + json.dumps({"prompt": "a cat", "num_frames": 9, "output": str(tmp_path / "cat.mp4")}) + "\n")
    out = tmp_path / "v.mp4"
    args = ("run", DEMO, *FAST, "--prompts", str(lines), f"output.path={out}",
            f"output.metrics={tmp_path / 'm.json'}")
    proc = run_vidax(*args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "v_0001.mp4").exists() and (tmp_path / "cat.mp4").exists()
    assert json.loads((tmp_path / "m_0001.json").read_text())["latent_shape"] == [1, 4, 2, 8, 8]
    assert json.loads((tmp_path / "m_0002.json").read_text())["latent_shape"] == [1, 4, 3, 8, 8]
    again = run_vidax(*args, cwd=tmp_path)  # a rerun resumes: every output exists, nothing is made again
    assert again.returncode == 0 and again.stderr.count("skipped") == 2, again.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt": "ok"}) + "\n" + json.dumps({"prompt": "x", "num_frames": 6}) + "\n")
    proc = run_vidax("run", DEMO, *FAST, "--prompts", str(bad), f"output.path={tmp_path / 'b.mp4'}", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith(f"error: --prompts {bad} line 2: ")
    assert not (tmp_path / "b_0001.mp4").exists()  # refused before anything ran
