"""The SANA-Video hooks called the way the core calls them: registration and the preset (the pipelines' call
defaults: their complex human instruction and aspect-ratio bins, word for word and number for number), the one-line
messages of check_run and check_checkpoint, resolution binning's plan, and the stated FLOPs against XLA's count."""

from __future__ import annotations

import inspect
import json
import os
import shutil

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from vidax_core import Checkpoint, Plugins
from vidax_core.testing.assets import asset_folder
from vidax_core.testing.checks import resolve
from vidax_core.testing.flops import check_flops
from vidax_sana_video import presets
from vidax_sana_video.plugin import SanaVideoPlugin

plugin = SanaVideoPlugin()

MODEL = "sana-video-2b-480p"


@pytest.fixture(scope="module")
def plugins():
    p = Plugins()
    p.add(plugin, "sana_video", "vidax-sana-video", "0.1.0")
    return p


@pytest.fixture(scope="module")
def tiny():
    return Checkpoint(asset_folder("vidax_sana_video"))


def run_config(plugins, *overrides):
    return resolve(plugins, [f"model.id={MODEL}", *overrides])


def test_registered_with_the_pipelines_defaults(plugins):
    spec = plugins.registry.get(MODEL)
    assert (spec.family, spec.tasks, spec.hub_repo) == ("sana-video", ("t2v", "i2v"),
                                                        "Efficient-Large-Model/SANA-Video_2B_480p_diffusers")
    run = run_config(plugins)
    s = run.sampling
    assert (s.num_steps, s.guidance_scale, s.height, s.width, s.num_frames, s.max_sequence_length) == (
        50, 6.0, 480, 832, 81, 300)
    assert run.output.fps == 16 and run.options["use_resolution_binning"] is True
    diffusers = pytest.importorskip("diffusers")
    from diffusers.pipelines.sana_video import pipeline_sana_video as pipeline

    call = inspect.signature(diffusers.SanaVideoPipeline.__call__).parameters
    assert run.options["complex_human_instruction"] == call["complex_human_instruction"].default
    for ours, theirs in ((presets.ASPECT_RATIO_480_BIN, pipeline.ASPECT_RATIO_480_BIN),
                         (presets.ASPECT_RATIO_720_BIN, pipeline.ASPECT_RATIO_720_BIN)):
        assert {k: tuple(map(float, v)) for k, v in ours.items()} == {k: tuple(v) for k, v in theirs.items()}


@pytest.mark.parametrize("overrides, message", [
    (("sampling.num_frames=8",), "sampling.num_frames must be 4k+1"),
    (("options.use_resolution_binning=false", "sampling.height=496"),
     "sampling.height must be a multiple of 32 for sana-video-2b-480p"),
    (("options.clean_caption=true",), "options.clean_caption=true: the pipelines' caption cleaning needs"),
    (("video=clip.mp4",), "takes no video input"),
])
def test_check_run_messages(plugins, overrides, message):
    spec = plugins.registry.get(MODEL)
    problems = plugins.call("check_run", spec, run=run_config(plugins, *overrides))
    assert problems and message in problems[0], problems
    assert plugins.call("check_run", spec, run=run_config(plugins, "sampling.height=496")) == []  # binned


def _edited(tmp_path, tiny, component: str, **changes) -> Checkpoint:
    folder = tmp_path / "ckpt"
    shutil.copytree(tiny.source, folder)
    path = folder / component / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))
    return Checkpoint(str(folder))


@pytest.mark.parametrize("component, changes, overrides, message", [
    ("vae", {"_class_name": "AutoencoderKLLTX2Video"}, (), "vae/config.json: AutoencoderKLLTX2Video is the LTX-2 "
     "video VAE (SANA-Video 720p), which vidax-sana-video does not build yet: use a checkpoint with the Wan VAE"),
    ("vae", {"_class_name": "AutoencoderDC"}, (), "AutoencoderDC is a DC-AE video autoencoder"),
    ("transformer", {"sample_size": 7}, (), "transformer/config.json: sample_size=7 has no resolution bins"),
    ("transformer", {}, ("sampling.height=512", "sampling.width=512"),
     "512x512 falls in the 480p bin 624x624, which the pipelines refuse"),
    ("transformer", {"caption_channels": 64}, (), "caption_channels=64 does not match hidden_size=32"),
    ("transformer", {"guidance_embeds": True}, (), "guidance_embeds=true"),
])
def test_check_checkpoint_messages(plugins, tiny, tmp_path, component, changes, overrides, message):
    spec = plugins.registry.get(MODEL)
    ckpt = _edited(tmp_path, tiny, component, **changes)
    problems = plugins.call("check_checkpoint", spec, ckpt=ckpt, run=run_config(plugins, *overrides))
    assert problems and message in problems[0], problems
    assert "\n" not in problems[0]


def test_binning_plan(plugins, tiny):
    """A 848x464 request samples at the 832x480 bin (the tiny checkpoint is 480p's sample_size); off, at 848x464's
    own size (not a multiple of 32: refused)."""
    from vidax_core.runner.plan import binned

    spec = plugins.registry.get(MODEL)
    run, bins = binned(spec, tiny, run_config(plugins, "sampling.height=464", "sampling.width=848"), plugins)
    assert (run.sampling.height, run.sampling.width) == (480, 832) and bins.name == "480p"
    off = run_config(plugins, "sampling.height=464", "sampling.width=848", "options.use_resolution_binning=false")
    assert binned(spec, tiny, off, plugins)[1] is None


# wide enough that the matmuls (and the convolutions' taps) dominate as at real widths
WIDE = dict(in_channels=16, out_channels=16, num_attention_heads=4, attention_head_dim=64, num_layers=1,
            num_cross_attention_heads=4, cross_attention_head_dim=64, cross_attention_dim=256, caption_channels=384,
            mlp_ratio=3.0, patch_size=(1, 2, 2))


def test_flops_match_xla():
    from vidax_sana_video.dit import SanaVideoDiT, SanaVideoDiTConfig
    from vidax_sana_video.flops import counter

    cfg = SanaVideoDiTConfig.from_config(WIDE)
    model = SanaVideoDiT(cfg, rngs=nnx.Rngs(0))
    batch, grid, text = 2, (3, 16, 16), 24
    x = jnp.zeros((batch, 16, *grid), jnp.float32)
    t = jnp.ones((batch,), jnp.float32)
    ctx = {"hidden": jnp.zeros((batch, text, cfg.caption_channels), jnp.float32),
           "mask": jnp.ones((batch, text), jnp.int32)}
    check_flops(counter(cfg)(batch, grid, text), model, x, t, ctx)


def test_flops_scale_with_blocks_and_batch():
    from vidax_sana_video.dit import SanaVideoDiTConfig
    from vidax_sana_video.flops import counter

    f = {n: counter(SanaVideoDiTConfig.from_config({**WIDE, "num_layers": n}))(1, (3, 16, 16), 24) for n in (1, 2, 5)}
    assert f[5] - f[1] == pytest.approx(4 * (f[2] - f[1])) and f[2] - f[1] < f[1]
    assert counter(SanaVideoDiTConfig.from_config(WIDE))(2, (3, 16, 16), 24) == pytest.approx(2 * f[1])


def test_demo_config_runs_on_the_builtin_checkpoint(plugins):
    """configs/sana_video_demo.yaml names the shipped tiny checkpoint and passes every check (the e2e tests run
    the same folder's pipeline)."""
    from vidax_core import config as config_mod

    demo = os.path.join(os.path.dirname(__file__), "..", "..", "..", "configs", "sana_video_demo.yaml")
    cfg = config_mod.resolve(demo, [], plugins.preset_for)
    spec = plugins.registry.get(MODEL)
    assert plugins.call("check_run", spec, run=cfg) == []
    ckpt = Checkpoint(plugins.call("builtin_checkpoint", spec, name="tiny-random"))
    assert plugins.call("check_checkpoint", spec, ckpt=ckpt, run=cfg) == []
    assert np.prod(plugins.call("vae_latent_shape", spec, ckpt=ckpt, run=cfg)) > 0
