"""LTX-2.5's duration head: a run without ``sampling.num_frames`` on a checkpoint with ``duration_head/`` gets the
frame count diffusers' ``LTX2Pipeline`` predicts when ``num_frames`` is omitted (the same prompt, the same
``min_seconds``), and the raw prediction in seconds within fp32 noise; the head alone against ``LTX2DurationHead``;
the count's snapping rules against the reference's ``predict_num_frames``; a dry run without the count is one
``error:`` line (a checkpoint without the head is a row of tests/test_bad_input.py)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from vidax_core.testing.cli import plugin_env, run_args, run_e2e  # noqa: E402

pytestmark = pytest.mark.xdist_group("ltx2_duration")

ENTRY = ("ltx2", "vidax_ltx.ltx2_plugin:LTX2Plugin")
PROMPT = "a small red fox barks in the snow"
MIN_SECONDS, TARGET = 0.3, 0.52  # 0.52 s at 24 fps: 12 frames, floored to 9 (8k + 1), above the 7-frame minimum


def _predict(pipe, **kw):
    """The pipeline's own prediction (``num_frames`` omitted): (seconds from the head's forward, frames made)."""
    seen = []
    hook = pipe.duration_head.register_forward_hook(lambda m, args, out: seen.append(float(out[0])))
    with torch.no_grad():
        out = pipe(prompt=PROMPT, height=64, width=64, num_inference_steps=2, sigmas=[1.0, 0.5], guidance_scale=1.0,
                   stg_scale=0.0, modality_scale=1.0, frame_rate=24.0, max_sequence_length=16,
                   min_seconds=MIN_SECONDS, output_type="latent", **kw)
    hook.remove()
    return seen[-1], (out.frames.shape[2] - 1) * 8 + 1


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from vidax_core.testing.tiny.ltx2 import build_tiny_ltx2_pipeline, with_tiny_duration_head

    tmp = tmp_path_factory.mktemp("ltx2_duration")
    pipe, _ = build_tiny_ltx2_pipeline(tmp / "tiny", "ltx2.5", seed=3)
    pipe = with_tiny_duration_head(pipe, seed=9)
    seconds, _ = _predict(pipe)
    with torch.no_grad():  # move the prediction to the middle of the 9-frame interval: a sure count to compare
        pipe.duration_head.mlp_out.bias += float(np.log(TARGET / seconds))
    seconds, frames = _predict(pipe)
    ckpt = tmp / "ckpt"
    pipe.save_pretrained(str(ckpt), safe_serialization=True)
    return dict(tmp=tmp, pipe=pipe, ckpt=ckpt, seconds=seconds, frames=frames)


def test_run_predicts_the_reference_frame_count(tiny):
    assert tiny["frames"] == 9 and abs(tiny["seconds"] - TARGET) < 1e-4
    args = run_args("ltx-2.5-22b-distilled", tiny["ckpt"], PROMPT,
                    sampling=dict(num_steps=2, height=64, width=64, max_sequence_length=16),
                    options=dict(sigmas=[1.0, 0.5], min_seconds=MIN_SECONDS, spatio_temporal_guidance_blocks=[1]))
    run = run_e2e(tiny["tmp"] / "run", *args, env=plugin_env(tiny["tmp"] / "entry", *ENTRY))
    got = run.metrics["predicted"]
    print(f"duration head: vidax {got}, reference {tiny['seconds']:.6f} s -> {tiny['frames']} frames")
    assert got["num_frames"] == tiny["frames"] == run.frames.shape[1]
    assert abs(got["seconds"] - tiny["seconds"]) < 1e-5 * tiny["seconds"]
    assert got["duration_s"] == pytest.approx(tiny["frames"] / 24.0)


def test_head_matches_reference_and_snapping_rules(tiny):
    """The head on random connector tokens against ``LTX2DurationHead``; the frame count for durations below,
    inside and above the bounds (and bounds with no grid point) against ``predict_num_frames``."""
    from vidax_ltx import ltx2_duration as dh

    ref = tiny["pipe"].duration_head
    head = dh.load(dict(ref.config), {k: v.numpy() for k, v in ref.state_dict().items()})
    g = torch.Generator().manual_seed(0)
    video = torch.randn(1, 11, ref.config.video_cross_attention_dim, generator=g)
    audio = torch.randn(1, 11, ref.config.audio_cross_attention_dim, generator=g)
    with torch.no_grad():
        want = float(ref(video, audio)[0])
    got = dh.predict_seconds(head, video.numpy(), audio.numpy())
    print(f"duration head alone: {got:.7f} vs {want:.7f}")
    assert abs(got - want) < 1e-6 * want
    base = want
    for seconds, lo, hi, fps in [(0.01, 1.0, 20.0, 24.0), (0.52, 0.3, 20.0, 24.0), (5.3, 1.0, 20.0, 24.0),
                                 (30.0, 1.0, 20.0, 24.0), (1.01, 1.0, 1.02, 24.0), (2.0, 1.9, 2.1, 30.0)]:
        with torch.no_grad():
            ref.mlp_out.bias += float(np.log(seconds / base))
            base = seconds
            n = ref.predict_num_frames(video, audio, frame_rate=fps, temporal_compression_ratio=8, min_seconds=lo,
                                       max_seconds=hi)
            raw = float(ref(video, audio)[0])
        assert dh.frames_for_seconds(raw, fps, 8, lo, hi) == n, (seconds, lo, hi, fps, n)


def test_dry_run_needs_the_count(tiny, tmp_path, capsys, monkeypatch):
    from vidax_core import cli

    monkeypatch.chdir(tmp_path)
    code = cli.main(["run", "model.id=ltx-2.5-22b-dev", f"model.checkpoint={tiny['ckpt']}", "prompt=a fox",
                     "options.spatio_temporal_guidance_blocks=[1]",
                     "sampling.height=64", "sampling.width=64", "--dry-run", "--quiet"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith("error: --dry-run needs sampling.num_frames")


def test_published_head_layout():
    """The reference's default head (LTX-2.5's widths) built abstractly: every key and shape lands on a parameter."""
    from diffusers.pipelines.ltx2.duration_head import LTX2DurationHead

    from vidax_core.testing.reference import check_full_size
    from vidax_ltx import ltx2_duration as dh

    check_full_size(LTX2DurationHead, dh.DURATION_RULES, lambda: dh.LTX2DurationHead(dh.LTX2DurationHeadConfig()),
                    component="duration_head", label="published duration head")
