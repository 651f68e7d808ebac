"""The Cosmos3 ids' hooks, each against the reference where it has one: prompt token ids equal
``Cosmos3OmniPipeline.tokenize_prompt`` for every switch, the image preprocessing and the video-to-video clip
frames equal the pipeline's, the native flow schedule equals the diffusers scheduler's, guidance is on whenever
g != 1, and bad runs are one line each."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from vidax_core.testing.devices import xla_flags

from vidax_cosmos.cosmos3_plugin import Cosmos3Plugin

plugin = Cosmos3Plugin()

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

SPEC = SimpleNamespace(id="cosmos3-nano", hub_repo="nvidia/Cosmos3-Nano")


def _run(options=None, image=None, video=None, **sampling):
    s = dict(num_frames=189, height=720, width=1280, max_sequence_length=4096, guidance_scale=6.0, num_steps=35)
    s.update(sampling)
    return SimpleNamespace(sampling=SimpleNamespace(**s), options=dict(options or {}), image=image, video=video)


@pytest.fixture(scope="module")
def pipe(tmp_path_factory):
    from vidax_cosmos.cosmos3_tiny import save_tiny_cosmos3

    folder, pipeline = save_tiny_cosmos3(tmp_path_factory.mktemp("cosmos3") / "ckpt", "edge", seed=1)
    return folder, pipeline


def test_registered_with_their_own_options():
    from vidax_core.plugins import Plugins

    p = Plugins()
    p.load_entry_points()
    registry = p.registry
    for mid in ("cosmos3-nano", "cosmos3-edge"):
        spec = registry.get(mid)
        assert spec.tasks == ("t2v", "i2v", "v2v") and spec.family == "cosmos"
        assert set(spec.options) == {"use_system_prompt", "add_resolution_template", "add_duration_template", "fps",
                                     "condition_frame_indexes_vision", "condition_video_keep"}
        assert spec.preset["options"]["condition_frame_indexes_vision"] == [0, 1]
        assert spec.preset["options"]["condition_video_keep"] == "first"
        assert spec.preset["sampling"]["num_steps"] == 35 and spec.preset["sampling"]["guidance_scale"] == 6.0
    assert "fps" not in registry.get("cosmos-predict2.5-2b").options


@pytest.mark.parametrize("frames,options", [
    (33, {}),
    (33, {"use_system_prompt": False, "fps": 16.0}),
    (1, {"add_resolution_template": False}),
    (17, {"add_duration_template": False, "add_resolution_template": False}),
])
def test_token_ids_are_the_pipelines(pipe, frames, options):
    from vidax_cosmos.cosmos3_prompt import load, token_ids

    folder, pipeline = pipe
    tok = load(str(folder / "text_tokenizer"), {"default_use_system_prompt": True})
    run = _run(options, num_frames=frames, height=48, width=64)
    for prompt, negative in (("A red car drives at night.", "blurry"), ("", None)):
        want = pipeline.tokenize_prompt(prompt, negative, num_frames=frames, height=48, width=64,
                                        fps=options.get("fps", 24.0),
                                        use_system_prompt=options.get("use_system_prompt"),
                                        add_resolution_template=options.get("add_resolution_template", True),
                                        add_duration_template=options.get("add_duration_template", True))
        got = [token_ids(tok, t, negative=i == 1, run=run)[0].tolist() for i, t in enumerate((prompt, negative))]
        assert got == [list(want[0]), list(want[1])]


def test_max_sequence_length_caps_only_when_shorter(pipe):
    from vidax_cosmos.cosmos3_prompt import load, token_ids

    folder, _ = pipe
    tok = load(str(folder / "text_tokenizer"))
    full = token_ids(tok, "a cat", negative=False, run=_run(num_frames=9, height=48, width=64))[0]
    same = token_ids(tok, "a cat", negative=False, run=_run(num_frames=9, height=48, width=64,
                                                             max_sequence_length=len(full)))[0]
    short = token_ids(tok, "a cat", negative=False, run=_run(num_frames=9, height=48, width=64,
                                                              max_sequence_length=10))[0]
    np.testing.assert_array_equal(same, full)
    assert len(short) == 10 and list(short[:8]) == list(full[:8]) and list(short[-2:]) == list(full[-2:])


@pytest.mark.parametrize("size", [(40, 56), (100, 150), (30, 90)])
def test_image_preprocessing_is_the_pipelines(size):
    from PIL import Image
    from diffusers.pipelines.cosmos.pipeline_cosmos3_omni import _preprocess_conditioning_image

    from vidax_cosmos.cosmos3_image import preprocess

    rgb = (np.random.default_rng(sum(size)).random((*size, 3)) * 255).astype(np.uint8)
    want = _preprocess_conditioning_image(Image.fromarray(rgb), 48, 64)[0].numpy()
    got = preprocess(rgb, 48, 64)
    assert got.shape == want.shape == (3, 48, 64)
    # the resize differs from torch's by float32 summation order only: at most a rare 1/255 rounding flip
    assert np.abs(got - want).max() <= 1.0 / 127.5 + 1e-6
    assert np.mean(got != want) < 2e-3


@pytest.mark.parametrize("indexes,keep", [([0, 1], "first"), ([0, 1], "last"), ([0, 2], "first"), ([1], "last")])
def test_clip_frames_are_the_pipelines(pipe, tmp_path, monkeypatch, indexes, keep):
    """The pixels vidax encodes for video-to-video equal the first 4 max + 1 frames of the tensor the pipeline's
    prepare_latents encodes: which end of the 7-frame 40x56 clip, the bilinear resize, the last-frame padding."""
    from PIL import Image

    from vidax_core.io.clip import read_video
    from vidax_core.io.video import write_mp4
    from vidax_cosmos.cosmos3_conditioning import clip_pixels

    rng = np.random.default_rng(4)
    clip = np.clip(rng.random((7, 40, 56, 3)) * 0.5 + np.linspace(0, 0.5, 7)[:, None, None, None], 0, 1)
    write_mp4(str(tmp_path / "clip.mp4"), clip.astype(np.float32), 8)
    frames = [Image.fromarray(f) for f in np.round(read_video(str(tmp_path / "clip.mp4")) * 255).astype(np.uint8)]
    pipeline = pipe[1]
    seen = []
    encode = pipeline._encode_video
    monkeypatch.setattr(pipeline, "_encode_video", lambda x: seen.append(x.numpy()) or encode(x))
    out = pipeline.prepare_latents(video=frames, condition_frame_indexes_vision=indexes, condition_video_keep=keep,
                                   num_frames=9, height=48, width=64, generator=torch.Generator().manual_seed(0),
                                   device="cpu", dtype=torch.float32)
    count = 4 * max(indexes) + 1
    got = clip_pixels(str(tmp_path / "clip.mp4"), 48, 64, count, keep)
    assert got.shape == (1, 3, count, 48, 64)
    np.testing.assert_allclose(got, seen[0][:, :, :count], rtol=0, atol=1e-6)
    assert np.flatnonzero(out[5][:, 0, 0].numpy()).tolist() == sorted(indexes)


def test_native_flow_schedule_is_the_pipelines(pipe):
    from diffusers import UniPCMultistepScheduler

    from vidax_core.schedulers.base import sampler_from_scheduler_config

    folder, _ = pipe
    ckpt = SimpleNamespace(model_index={"use_native_flow_schedule": True}, has=lambda c: True,
                           config=lambda c: {"num_train_timesteps": 1000})
    sampler = sampler_from_scheduler_config(dict(UniPCMultistepScheduler.from_pretrained(folder / "scheduler").config))
    kwargs = plugin.sampling_plan(SPEC, ckpt, _run(num_steps=5), sampler, (3, 3, 4))
    plan = sampler.plan(**kwargs)
    ref = UniPCMultistepScheduler.from_pretrained(folder / "scheduler")
    ref.set_timesteps(5, sigmas=np.linspace(1.0 - 1.0 / 1000, 0.0, 6)[:-1])
    np.testing.assert_allclose(plan.timesteps, ref.timesteps.numpy(), rtol=1e-6)
    np.testing.assert_allclose(plan.sigmas, ref.sigmas.numpy(), rtol=1e-6)
    default = SimpleNamespace(model_index={}, has=lambda c: True, config=lambda c: {})
    assert plugin.sampling_plan(SPEC, default, _run(), sampler, (3, 3, 4)) is None


def test_guidance_is_on_whenever_the_scale_is_not_one():
    from vidax_core import ClassifierFree, NoGuidance

    for g, kind in ((6.0, ClassifierFree), (0.5, ClassifierFree), (1.0, NoGuidance)):
        guide = plugin.guidance(SPEC, None, _run(guidance_scale=g))
        assert isinstance(guide, kind)
        if kind is ClassifierFree:
            assert guide.formula == "uncond" and guide.scale == g


@pytest.mark.parametrize("run,needle", [
    (_run(num_frames=188), "sampling.num_frames must be 4k+1"),
    (_run(height=712), "sampling.height must be a multiple of 16"),
    (_run(image="a.png", video="b.mp4"), "not both: set only one of image: and video:"),
    (_run(video="b.mp4", num_frames=1), "video-to-video needs sampling.num_frames > 1"),
    (_run({"condition_frame_indexes_vision": [0, -1]}, video="b.mp4"), "list of non-negative latent frame indexes"),
    (_run({"condition_frame_indexes_vision": "01"}, video="b.mp4"), "list of non-negative latent frame indexes"),
    (_run({"condition_frame_indexes_vision": [0, 1.0]}, video="b.mp4"), "list of non-negative latent frame indexes"),
    (_run({"condition_frame_indexes_vision": []}, video="b.mp4"), "at least one latent frame index"),
    (_run({"condition_frame_indexes_vision": [0, 3]}, video="b.mp4", num_frames=9),
     "[0, 3] has an index outside the latent timeline: sampling.num_frames=9 gives 3 latent frames"),
    (_run({"condition_video_keep": "middle"}, video="b.mp4"), "condition_video_keep must be first or last"),
    (_run(image="a.png", num_frames=1), "image-to-video needs sampling.num_frames > 1"),
    (_run({"fps": 0.0}), "options.fps must be positive"),
    (_run(max_sequence_length=2), "max_sequence_length=2"),
])
def test_check_run_refusals(run, needle):
    problems = plugin.check_run(SPEC, run)
    assert len(problems) == 1 and needle in problems[0], problems
    assert "\n" not in problems[0]
    assert plugin.check_run(SPEC, _run()) == []
    assert plugin.check_run(SPEC, _run(video="b.mp4")) == []
    assert plugin.check_run(SPEC, _run({"condition_frame_indexes_vision": [2], "condition_video_keep": "last"},
                                       video="b.mp4", num_frames=9)) == []


def test_tp_must_divide_the_key_value_heads_too(tmp_path):
    """The built-in tiny Nano has 4 query and 2 key/value heads: tp=4 splits the queries but not the GQA groups, and
    the dry run refuses it in one line before any weight loads; tp=2 plans."""
    from vidax_core.testing.cli import vidax

    base = ["run", "model.id=cosmos3-nano", "model.checkpoint=builtin:tiny-random", "sampling.height=64",
            "sampling.width=64", "sampling.num_frames=9", "--dry-run"]
    env = {"XLA_FLAGS": xla_flags(4)}
    bad = vidax(*base, "parallel.tp=4", cwd=tmp_path, env=env)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1].startswith("error: parallel.tp=4 must divide the model's 2 key/value"), \
        bad.stderr[-2000:]
    ok = vidax(*base, "parallel.tp=2", cwd=tmp_path, env=env)
    assert ok.returncode == 0, ok.stderr[-2000:]


def test_video_to_video_dry_run_and_its_refusal(tmp_path):
    """Through the command line: the built-in tiny Nano plans a video-to-video run, and a clean latent frame outside
    the 3-frame timeline is one error line (exit 2) from the checks that run before any weight loads."""
    from vidax_core.io.video import write_mp4
    from vidax_core.testing.cli import vidax

    write_mp4(str(tmp_path / "clip.mp4"), np.full((5, 32, 48, 3), 0.5, np.float32), 8)
    base = ["run", "model.id=cosmos3-nano", "model.checkpoint=builtin:tiny-random", "sampling.height=64",
            "sampling.width=64", "sampling.num_frames=9", f"video={tmp_path / 'clip.mp4'}", "--dry-run"]
    ok = vidax(*base, "options.condition_video_keep=last", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr[-2000:]
    # the DiT embeds the token ids itself: no encoder tower to place, which the placement says (not "not sized")
    assert "text encoder  none" in ok.stdout and "no text or image encoder component" in ok.stdout, ok.stdout
    bad = vidax(*base, "options.condition_frame_indexes_vision=[0, 3]", cwd=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1].startswith(
        "error: options.condition_frame_indexes_vision [0, 3] has an index outside the latent timeline"), \
        bad.stderr[-2000:]
