"""The run contract every family fits, exercised through a toy plugin (vidax_core.testing.contract_plugin).

Each case runs the real pipeline (``vidax_core.runner.loaded.run``) and compares its final latents with the same
generation written as a float64 numpy loop (``numpy_reference``): pytree text contexts with masks and per-prompt
lengths, every guidance strategy (two formulas, per-step scales, rescale, a three-branch one, embedded guidance
with and without true CFG), pytree latents with an audio stream muxed into the mp4, an explicit sigma list,
per-token timesteps in the sampler update, post-step conditioning, a prediction the denoiser fixes from a keyword
input (carried from ``pre`` to ``post`` under offload), a ``video:`` input with a per-branch value, options
validation, and offload of two heterogeneous block groups.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from vidax_core import config as config_mod
from vidax_core.errors import UserError
from vidax_core.io.audio import audio_stream_count
from vidax_core.plugins import Plugins
from vidax_core.runner import loaded, preflight
from vidax_core.report.progress import Reporter
from vidax_core.schedulers.flow_euler import FlowEulerSampler
from vidax_core.testing import contract_plugin as toy

pytestmark = pytest.mark.xdist_group("contract")


@pytest.fixture(scope="module")
def plugins():
    p = Plugins()
    toy.register(p)
    return p


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return toy.make_checkpoint(str(tmp_path_factory.mktemp("toy")))


def make_cfg(plugins, ckpt, tmp, **over):
    overrides = [f"model.id={toy.ID}", f"model.checkpoint={ckpt}", "prompt=a red fox in snow",
                 f"output.path={tmp}/v.mp4", f"output.save_latents={tmp}/lat.npz", "output.overwrite=true"]
    overrides += [f"{k}={json.dumps(v) if isinstance(v, (list, bool)) else v}" for k, v in over.items()]
    return config_mod.resolve(None, overrides, plugins.preset_for)


def plan_sigmas(cfg) -> np.ndarray:
    s = FlowEulerSampler(num_train_timesteps=1000, shift=1.0)
    sig = cfg.options["sigmas"]
    plan = s.plan(None, sigmas=sig) if sig else s.plan(cfg.sampling.num_steps)
    return np.asarray(plan.sigmas, np.float64)


def run_and_reference(plugins, ckpt, tmp, video_feat=None, **over):
    cfg = make_cfg(plugins, ckpt, tmp, **over)
    noise_shapes = {"video": (1, 3 * 4 * 4, toy.C), "audio": (1, 3 * toy.AUDIO_PER_FRAME, toy.CA)}
    rng = np.random.default_rng(7)
    if cfg.options["audio"]:
        noise = {k: rng.standard_normal(v).astype(np.float32) for k, v in noise_shapes.items()}
        path = os.path.join(tmp, "noise.npz")
        np.savez(path, **noise)
    else:
        noise = rng.standard_normal(noise_shapes["video"]).astype(np.float32)
        path = os.path.join(tmp, "noise.npy")
        np.save(path, noise)
    cfg = make_cfg(plugins, ckpt, tmp, **over, **{"sampling.initial_noise": path})
    result = loaded.run(cfg, plugins, Reporter(quiet=True))
    ref = toy.numpy_reference(ckpt, cfg, noise, plan_sigmas(cfg), video_feat)
    return cfg, result, ref


def rel_err(a, b) -> float:
    if isinstance(b, dict):
        return max(rel_err(a[k], b[k]) for k in b)
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-12))


# fp32 pipeline against a float64 loop over a few tanh layers and steps: fp32 rounding stays below 1e-5 relative.
TOL = 2e-5


@pytest.mark.parametrize("mode", toy.GUIDANCE_MODES)
def test_guidance_strategies(plugins, ckpt, tmp_path, mode):
    cfg, result, ref = run_and_reference(plugins, ckpt, str(tmp_path), **{"options.guidance_mode": mode})
    err = rel_err(result.latents, ref)
    print(f"{mode}: rel err {err:.2e}, branches {result.metrics['guidance_branches']}, "
          f"calls {result.metrics['model_calls_per_step']}")
    assert err < TOL
    expected_calls = {"none": [["cond"]], "embedded": [["cond"]], "stg": [["cond", "uncond"], ["perturbed"]]}
    assert result.metrics["model_calls_per_step"] == expected_calls.get(mode, [["cond", "uncond"]])


def test_a_wrong_formula_is_caught(plugins, ckpt, tmp_path):
    """The comparison can fail: the reference with the other CFG formula differs far beyond the tolerance."""
    cfg, result, _ = run_and_reference(plugins, ckpt, str(tmp_path), **{"options.guidance_mode": "cfg"})
    other = make_cfg(plugins, ckpt, str(tmp_path), **{"options.guidance_mode": "cfg_cond"})
    noise = np.load(cfg.sampling.initial_noise)
    wrong = toy.numpy_reference(ckpt, other, noise, plan_sigmas(cfg))
    assert rel_err(result.latents, wrong) > 100 * TOL


def test_masked_context_differs_per_branch_and_unpadded_lengths_run_apart(plugins, ckpt, tmp_path):
    cfg, result, ref = run_and_reference(plugins, ckpt, str(tmp_path), **{"options.unpadded": True})
    assert rel_err(result.latents, ref) < TOL
    assert result.metrics["model_calls_per_step"] == [["cond"], ["uncond"]]  # different lengths: two calls
    # the mask is honoured: padding both prompts to 40 masked tokens (batched in one call) changes nothing
    _, padded, _ = run_and_reference(plugins, ckpt, str(tmp_path), **{"sampling.max_sequence_length": 40})
    assert padded.metrics["model_calls_per_step"] == [["cond", "uncond"]]
    assert rel_err(padded.latents, result.latents) < TOL


def test_audio_latents_sigma_list_per_token_and_conditioning(plugins, ckpt, tmp_path):
    tmp = str(tmp_path)
    cfg, result, ref = run_and_reference(plugins, ckpt, tmp, **{
        "options.audio": True, "options.first_frame": True, "options.sigmas": [1.0, 0.7, 0.35, 0.1]})
    assert set(result.latents) == {"video", "audio"}
    assert result.metrics["num_steps"] == 4
    assert rel_err(result.latents, ref) < TOL
    # the clean first frame is back in place after every step, exactly
    clean = toy.clean_first_frame((3, 4, 4))
    np.testing.assert_array_equal(result.latents["video"][:, :16], clean)
    saved = np.load(os.path.join(tmp, "lat.npz"))
    np.testing.assert_array_equal(saved["audio"], result.latents["audio"])
    assert audio_stream_count(os.path.join(tmp, "v.mp4")) == 1
    assert result.metrics["audio"] is True


@pytest.mark.parametrize("over", [{}, {"offload.enabled": True}])
def test_the_denoiser_sets_the_clean_frame_velocity(plugins, ckpt, tmp_path, over):
    """The clean first frame's known velocity is the denoiser's own doing, from the conditioning's ``keep`` mask
    passed as a keyword input (under offload ``pre`` hands it to ``post`` in the aux). Guidance rescale reads every
    token's velocity, so the result depends on that frame's."""
    cfg, result, ref = run_and_reference(plugins, ckpt, str(tmp_path), **{
        "options.first_frame": True, "options.guidance_mode": "rescale", **over})
    assert rel_err(result.latents, ref) < TOL


def test_video_input_with_a_negative_branch_value(plugins, ckpt, tmp_path):
    from vidax_core.io.clip import read_video
    from vidax_core.io.video import write_mp4

    tmp = str(tmp_path)
    frames = np.zeros((5, 8, 8, 3), np.float32)
    frames[..., 0] = 0.8  # a red clip
    clip = os.path.join(tmp, "clip.mp4")
    write_mp4(clip, frames, 8)
    feat = read_video(clip, height=8, width=8).mean(axis=(0, 1, 2))
    cfg, result, ref = run_and_reference(plugins, ckpt, tmp, video_feat=feat, video=clip)
    assert rel_err(result.latents, ref) < TOL
    no_clip = toy.numpy_reference(ckpt, cfg, np.load(cfg.sampling.initial_noise), plan_sigmas(cfg), None)
    assert rel_err(result.latents, no_clip) > 100 * TOL  # the clip reached the model


@pytest.mark.parametrize("over, message", [
    ({"options.guidance_mod": "cfg"}, "did you mean options.guidance_mode"),
    ({"options.audio": 3}, "options.audio must be true/false"),
    ({"options.guidance_mode": "magic"}, "options.guidance_mode must be one of"),
    ({"options.sigmas": "[1, a]"}, "options.sigmas"),
])
def test_options_are_validated(plugins, ckpt, tmp_path, over, message):
    cfg = make_cfg(plugins, ckpt, str(tmp_path), **over)
    with pytest.raises(UserError, match=message.replace(".", r"\.")):
        preflight.preflight(cfg, plugins.registry.get(toy.ID), plugins)


def test_vae_tiling_reaches_the_decoder(plugins, ckpt, tmp_path, monkeypatch):
    seen = {}
    original = toy.ToyVAE.decode_video

    def spy(self, latents, on_chunk=None, **params):
        seen.update(params)
        return original(self, latents, on_chunk, **params)

    monkeypatch.setattr(toy.ToyVAE, "decode_video", spy)
    cfg = make_cfg(plugins, ckpt, str(tmp_path),
                   **{"vae.tiling": "{tile_sample_min_height: 64, tile_sample_stride_height: 48}"})
    loaded.run(cfg, plugins, Reporter(quiet=True))
    assert seen["tiling"] == {"tile_sample_min_height": 64, "tile_sample_stride_height": 48}


def test_show_config_lists_the_options(plugins):
    preset = plugins.preset_for(toy.ID)
    assert preset["options"]["guidance_mode"] == "cfg" and preset["options"]["sigmas"] is None


@pytest.mark.parametrize("over", [
    {"offload.enabled": True},  # both groups streamed, one block at a time
    {"offload.enabled": True, "offload.chunk_size": "{blocks_a: 2, blocks_b: 3}"},  # a chunk size per group
    {"offload.enabled": True, "options.stream_groups": ["blocks_a"]},  # blocks_b stays resident but runs
])
def test_two_group_offload_equals_resident(plugins, ckpt, tmp_path, over):
    tmp = str(tmp_path)
    base = {"options.audio": True, "options.guidance_mode": "stg"}
    _, resident, _ = run_and_reference(plugins, ckpt, tmp, **base)
    _, streamed, _ = run_and_reference(plugins, ckpt, tmp, **base, **over)
    err = rel_err(streamed.latents, resident.latents)
    print(f"offload {over}: rel err vs resident {err:.2e}, groups {streamed.metrics['offload']['groups']}")
    assert err < 1e-6
    assert streamed.metrics["offload"]["enabled"]


def test_offload_refuses_a_model_that_hides_a_stacked_group(plugins, ckpt, tmp_path):
    cfg = make_cfg(plugins, ckpt, str(tmp_path), **{"offload.enabled": True, "options.declare_all_groups": False})
    with pytest.raises(UserError, match="blocks_b .*not in the model's block_groups"):
        loaded.run(cfg, plugins, Reporter(quiet=True))


def test_hooks_reach_only_the_owning_plugin(plugins):
    """A second plugin answering every hook for any model never sees the toy's calls."""
    from vidax_core import FamilyPlugin

    class Greedy(FamilyPlugin):
        family = "greedy"

        def build_vae(self, spec, ckpt, run):
            return "greedy"

    p = Plugins()
    p.add(Greedy(), name="greedy")
    toy.register(p)
    spec = p.registry.get(toy.ID)
    cfg = make_cfg(p, "unused", "/tmp")
    assert isinstance(p.call("build_vae", spec, ckpt=None, run=cfg), toy.ToyVAE)


@pytest.mark.parametrize("args, message", [
    (["options.flow_shift=3"],
     "unknown config key options.flow_shift for wan2.1-t2v-1.3b (wan2.1-t2v-1.3b takes no options)"),
    (["options=[1]"], "config key options must be a mapping"),
    (["video=clip.mp4"], "model wan2.1-t2v-1.3b takes no conditioning video"),
    (["sampling.height=null"], "config key sampling.height is not set"),
    (["offload.chunk_size={blocks: 0}"], "offload.chunk_size must map block groups to integers >= 1"),
    (["vae.tiling={tile_sample_min_height: 0}"],
     "vae.tiling.tile_sample_min_height must be an integer from 1 to 65536, got 0"),
    (["vae.tiling={tile_size: 64}"], "config key vae.tiling: unknown VAE tiling option"),
    (["vae.tiling=3"], "config key vae.tiling must be true/false or a mapping"),
])
def test_contract_mistakes_are_one_line_errors(tmp_path, capsys, monkeypatch, args, message):
    """Through the CLI: the new contract keys fail before anything loads, exit 2, one line."""
    from vidax_core import cli

    monkeypatch.chdir(tmp_path)
    open("clip.mp4", "wb").close()
    code = cli.main(["run", "model.id=wan2.1-t2v-1.3b", "model.checkpoint=builtin:tiny-random", *args,
                     "output.path=out.mp4"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: ") and message in err[0], err
    assert not os.path.exists("out.mp4")
