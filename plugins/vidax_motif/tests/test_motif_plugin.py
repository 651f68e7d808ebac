"""The Motif-Video hooks as the core calls them: registration and the recipe, the run and checkpoint checks (their
one-line messages are user interface), the guidance the checkpoint's guider gives (and ``sampling.guidance_scale``
overrides), and the sampler plan against diffusers' schedulers given the pipeline's sigmas and dynamic shift."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from vidax_core import Checkpoint
from vidax_core.guidance import AdaptiveProjected, ClassifierFree, NoGuidance
from vidax_core.plugins import Plugins
from vidax_core.testing.assets import asset_folder
from vidax_core.testing.checks import resolve

MODEL = "motif-video-2b"


@pytest.fixture(scope="module")
def plugins():
    from vidax_motif.plugin import MotifPlugin

    plugin = MotifPlugin()

    p = Plugins()
    p.add(plugin, "motif", "vidax-motif", "0.1.0")
    return p


def run(plugins, *overrides):
    return resolve(plugins, [f"model.id={MODEL}", *overrides])


def edited(tmp_path, name: str, component: str, file: str, replace: bool = False, **changes) -> Checkpoint:
    """A copy of the built-in checkpoint with ``changes`` in ``component/file`` (``replace``: as its whole content)."""
    folder = tmp_path / name
    shutil.copytree(asset_folder("vidax_motif"), folder)
    path = folder / component / file
    data = {} if replace else json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))
    return Checkpoint(str(folder))


def test_registered_id_and_recipe(plugins):
    spec = plugins.registry.get(MODEL)
    assert spec.tasks == ("t2v", "i2v") and spec.hub_repo == "Motif-Technologies/Motif-Video-2B"
    assert spec.predicts == ("guidance_scale",)
    r = run(plugins)
    s = r.sampling
    assert (s.num_steps, s.guidance_scale, s.height, s.width, s.num_frames, s.max_sequence_length) == \
        (50, None, 736, 1280, 121, 512)
    assert r.negative_prompt == "" and r.output.fps == 24


@pytest.mark.parametrize("overrides,message", [
    (["sampling.num_frames=10"], "sampling.num_frames must be 4k+1 for motif-video-2b (the Wan VAE compresses time "
                                 "by 4), got 10: use 13"),
    (["sampling.height=100"], "sampling.height must be a multiple of 8 for motif-video-2b (the VAE's factor), got "
                              "100: use 96"),
    (["video=clip.mp4"], "motif-video-2b takes no video input (video:)"),
])
def test_run_problems(plugins, overrides, message):
    problems = plugins.call("check_run", plugins.registry.get(MODEL), run=run(plugins, *overrides))
    assert problems and problems[0].startswith(message), problems


def test_checkpoint_problems(plugins, tmp_path):
    spec = plugins.registry.get(MODEL)
    builtin = Checkpoint(asset_folder("vidax_motif"))
    assert plugins.call("check_checkpoint", spec, ckpt=builtin, run=run(plugins, "image=x.png")) == []
    cases = [
        (edited(tmp_path, "a", "transformer", "config.json", in_channels=8), [],
         "transformer/config.json: in_channels=8, but the pipeline feeds 2 x z_dim + 1 = 9 channels"),
        (edited(tmp_path, "b", "transformer", "config.json", text_embed_dim=24), [],
         "transformer/config.json: text_embed_dim=24 does not match hidden_size=32 of text_encoder/config.json"),
        (edited(tmp_path, "c", "transformer", "config.json", image_embed_dim=None), ["image=x.png"],
         "transformer/config.json: image_embed_dim is null, so this checkpoint's DiT takes no image"),
        (edited(tmp_path, "d", "transformer", "config.json", norm_type="rms_norm"), [],
         "transformer/config.json: norm_type='rms_norm': the reference's AdaLayerNormZeroSingle takes only "
         "'layer_norm'"),
        (edited(tmp_path, "e", "guider", "guider_config.json", _class_name="SkipLayerGuidance"), [],
         "guider/guider_config.json: _class_name='SkipLayerGuidance' is not supported (vidax runs "
         "ClassifierFreeGuidance, AdaptiveProjectedGuidance)"),
    ]
    for ckpt, extra, message in cases:
        problems = plugins.call("check_checkpoint", spec, ckpt=ckpt, run=run(plugins, *extra))
        assert problems and message in problems[0], problems
    # a video of one latent frame ignores the image, as the pipeline: no image tower needed
    ckpt = cases[2][0]
    assert plugins.call("check_checkpoint", spec, ckpt=ckpt, run=run(plugins, "image=x.png",
                                                                      "sampling.num_frames=1")) == []


def test_guidance_from_the_guider(plugins, tmp_path):
    spec = plugins.registry.get(MODEL)
    builtin = Checkpoint(asset_folder("vidax_motif"))
    g = plugins.call("guidance", spec, ckpt=builtin, run=run(plugins))
    assert isinstance(g, AdaptiveProjected) and g.scale == 8.0 and g.momentum == 0.1 and g.formula == "cond"
    assert g.norm_dims == (-1, -2, -4) and g.norm_threshold == 12.0
    assert plugins.call("guidance", spec, ckpt=builtin, run=run(plugins, "sampling.guidance_scale=5")).scale == 5.0
    assert isinstance(plugins.call("guidance", spec, ckpt=builtin, run=run(plugins, "sampling.guidance_scale=0")),
                      NoGuidance)  # the original formulation's identity
    cfg = edited(tmp_path, "cfg", "guider", "guider_config.json", _class_name="ClassifierFreeGuidance")
    assert plugins.call("guidance", spec, ckpt=cfg, run=run(plugins)) == ClassifierFree(scale=8.0, formula="cond")
    os.remove(os.path.join(cfg.root, "guider", "guider_config.json"))  # a guider folder without its file: defaults
    assert plugins.call("guidance", spec, ckpt=cfg, run=run(plugins)) == ClassifierFree(scale=7.5)


@pytest.mark.parametrize("scheduler", ["dynamic", "shift", "unipc"])
def test_sampler_plan_matches_diffusers(plugins, tmp_path, scheduler):
    """The pipeline's ``retrieve_timesteps(scheduler, N, sigmas=linspace(1, 1/N, N), mu=calculate_shift(...))``."""
    torch = pytest.importorskip("torch")
    diffusers = pytest.importorskip("diffusers")
    from diffusers.pipelines.motif_video.pipeline_motif_video import calculate_shift

    from vidax_core.runner.plan import sampling_plan, select_sampler

    classes = {"dynamic": ("FlowMatchEulerDiscreteScheduler", dict(use_dynamic_shifting=True)),
               "shift": ("FlowMatchEulerDiscreteScheduler", dict(shift=5.0)),
               "unipc": ("UniPCMultistepScheduler", dict(prediction_type="flow_prediction", use_flow_sigmas=True,
                                                         flow_shift=3.0))}
    name, kw = classes[scheduler]
    ref = getattr(diffusers, name)(**kw)
    ckpt = edited(tmp_path, scheduler, "scheduler", "scheduler_config.json", replace=True, _class_name=name,
                  **dict(ref.config))
    spec, r = plugins.registry.get(MODEL), run(plugins, "sampling.num_steps=7")
    grid = (31, 92, 160)
    plan = sampling_plan(spec, ckpt, r, plugins, select_sampler(spec, ckpt, r, plugins), grid)
    c = ref.config
    mu = calculate_shift(31 * 46 * 80, c.get("base_image_seq_len", 256), c.get("max_image_seq_len", 4096),
                         c.get("base_shift", 0.5), c.get("max_shift", 1.15))
    ref.set_timesteps(sigmas=np.linspace(1.0, 1 / 7, 7), mu=mu, device="cpu")
    np.testing.assert_allclose(plan.timesteps, ref.timesteps.numpy(), rtol=1e-6)
    np.testing.assert_allclose(plan.sigmas, ref.sigmas.numpy(), rtol=1e-6, atol=1e-7)
    assert torch is not None


def test_a_scheduler_without_sigmas_is_refused(plugins):
    from vidax_core import UserError
    from vidax_core.runner.plan import sampling_plan, select_sampler

    spec = plugins.registry.get(MODEL)
    ckpt, r = Checkpoint(asset_folder("vidax_motif")), run(plugins, "sampling.scheduler=dpm_solver++")
    with pytest.raises(UserError, match="dpm_solver\\+\\+ takes none \\(diffusers raises\\): use sampling.scheduler="
                                        "flow_euler or unipc"):
        sampling_plan(spec, ckpt, r, plugins, select_sampler(spec, ckpt, r, plugins), (3, 4, 6))


def test_bench_reference_runs_the_pipeline(plugins):
    """``vidax bench --reference diffusers``: MotifVideoPipeline on the built-in checkpoint, timed, its guider at
    the run's guidance scale; an image run is refused with one line."""
    pytest.importorskip("torch")
    pytest.importorskip("diffusers")
    from vidax_core import UserError
    from vidax_core.bench.reference import reference_runner

    spec = plugins.registry.get(MODEL)
    folder = asset_folder("vidax_motif")
    cfg = run(plugins, "sampling.num_steps=2", "sampling.num_frames=5", "sampling.height=32", "sampling.width=32",
              "sampling.max_sequence_length=16", "sampling.guidance_scale=4", "model.dtype=float32")
    row = reference_runner(plugins, spec, "diffusers", folder, cfg)()
    assert row["latent_shape"] == [1, 4, 2, 4, 4] and row["frames_shape"] == [1, 5, 32, 32, 3]
    assert row["per_step_s"] > 0 and row["decode_s"] > 0
    with pytest.raises(UserError, match="text-to-video runs only"):
        reference_runner(plugins, spec, "diffusers", folder, run(plugins, "image=x.png"))
