"""LTX plugin hooks: registry and presets, exact sampler plans against diffusers' scheduler (the LTXPipeline schedule
and the distilled timestep lists), run checks, guidance choice, text encoding against transformers' T5."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from vidax_core.plugins import get_plugins
from vidax_core.schedulers.base import sampler_from_scheduler_config
from vidax_ltx import presets
from vidax_ltx.plugin import LTXPlugin
from vidax_core.testing.tiny.ltx import SCHEDULER

plugin = LTXPlugin()

pytestmark = pytest.mark.xdist_group("ltx_plugin")

IDS = ("ltx-video-2b-0.9.8-distilled", "ltx-video-13b-0.9.8-dev", "ltx-video-13b-0.9.8-distilled")
STATIC = dict(SCHEDULER, use_dynamic_shifting=False, shift_terminal=None, shift=3.0)


def _run(**over):
    s = dict(num_steps=50, guidance_scale=3.0, height=512, width=704, num_frames=161, seed=0,
             max_sequence_length=128, initial_noise=None)
    s.update(over.pop("sampling", {}))
    opts = dict(frame_rate=25.0, decode_timestep=0.05, decode_noise_scale=0.025, guidance_rescale=0.0, timesteps=None,
                pipeline="ltx", multiscale=False)
    opts.update(over.pop("options", {}))
    return SimpleNamespace(sampling=SimpleNamespace(**s), options=opts, image=over.pop("image", None),
                           video=over.pop("video", None))


def test_registered_ids_and_presets():
    reg = get_plugins().registry
    for mid in IDS:
        spec = reg.get(mid)
        assert spec.family == "ltx" and set(spec.tasks) == {"t2v", "i2v", "v2v"}
        s = spec.preset["sampling"]
        assert (s["height"], s["width"], s["num_frames"], s["max_sequence_length"]) == (512, 704, 161, 256)
        o = spec.preset["options"]
        assert (o["pipeline"], o["multiscale"], o["guidance_rescale"]) == ("condition", True, 0.7)
    dev = reg.get(IDS[1]).preset
    assert (dev["sampling"]["guidance_scale"], dev["sampling"]["num_steps"]) == (5.0, 30)
    assert (dev["options"]["second_pass_steps"], dev["options"]["second_pass_denoise_strength"]) == (10, 0.4)
    for mid in (IDS[0], IDS[2]):
        o = reg.get(mid).preset["options"]
        assert o["timesteps"] == presets.DISTILLED_TIMESTEPS
        assert o["second_pass_timesteps"] == presets.DISTILLED_SECOND_PASS_TIMESTEPS
        assert (o["second_pass_denoise_strength"], o["adain_factor"],
                o["tone_map_compression_ratio"]) == (0.999, 1.0, 0.6)
        assert reg.get(mid).preset["sampling"]["guidance_scale"] == 1.0


@pytest.mark.parametrize("config", [SCHEDULER, STATIC], ids=["dynamic-shift", "static-shift"])
@pytest.mark.parametrize("grid", [(21, 16, 22), (3, 2, 2)])
def test_ltxpipeline_schedule_is_exact(config, grid):
    """sigmas = linspace(1, 1/N, N) and mu from the token count, as LTXPipeline hands them to the scheduler."""
    from diffusers import FlowMatchEulerDiscreteScheduler
    from diffusers.pipelines.ltx.pipeline_ltx import calculate_shift

    n = 12
    ref = FlowMatchEulerDiscreteScheduler(**config)
    kw = {}
    if config["use_dynamic_shifting"]:
        kw["mu"] = calculate_shift(int(np.prod(grid)), config["base_image_seq_len"], config["max_image_seq_len"],
                                   config["base_shift"], config["max_shift"])
    ref.set_timesteps(sigmas=np.linspace(1.0, 1 / n, n), **kw)
    sampler = sampler_from_scheduler_config({"_class_name": "FlowMatchEulerDiscreteScheduler", **config})
    plan = sampler.plan(**{"num_steps": n,
                           **plugin.sampling_plan(None, None, _run(sampling={"num_steps": n}), sampler, grid)})
    np.testing.assert_array_equal(plan.sigmas, ref.sigmas.numpy())
    np.testing.assert_array_equal(plan.timesteps, ref.timesteps.numpy())


@pytest.mark.parametrize("config", [SCHEDULER, STATIC], ids=["dynamic-shift", "static-shift"])
@pytest.mark.parametrize("timesteps", [presets.DISTILLED_TIMESTEPS, presets.DISTILLED_SECOND_PASS_TIMESTEPS])
def test_distilled_timestep_lists_are_exact(config, timesteps):
    """options.timesteps reproduce ``set_timesteps(timesteps=...)`` bit for bit (sigmas and model timesteps)."""
    from diffusers import FlowMatchEulerDiscreteScheduler
    from diffusers.pipelines.ltx.pipeline_ltx import calculate_shift

    grid = (21, 16, 22)
    ref = FlowMatchEulerDiscreteScheduler(**config)
    kw = {}
    if config["use_dynamic_shifting"]:
        kw["mu"] = calculate_shift(int(np.prod(grid)), config["base_image_seq_len"], config["max_image_seq_len"],
                                   config["base_shift"], config["max_shift"])
    ref.set_timesteps(timesteps=list(timesteps), **kw)
    sampler = sampler_from_scheduler_config({"_class_name": "FlowMatchEulerDiscreteScheduler", **config})
    kwargs = plugin.sampling_plan(None, None, _run(options={"timesteps": list(timesteps)}), sampler, grid)
    plan = sampler.plan(**kwargs)
    assert plan.num_steps == len(timesteps)
    np.testing.assert_array_equal(plan.sigmas, ref.sigmas.numpy())
    np.testing.assert_array_equal(plan.timesteps, ref.timesteps.numpy())


@pytest.mark.parametrize("over, needle", [
    ({"sampling": {"num_frames": 160}}, "8k+1"),
    ({"sampling": {"height": 500}}, "sampling.height must be a multiple of 32"),
    ({"sampling": {"width": 700}}, "sampling.width must be a multiple of 32"),
    ({"options": {"timesteps": [500.0, 900.0]}}, "strictly decreasing"),
    ({"options": {"timesteps": [1200.0, 10.0]}}, "in [0, 1000]"),
    ({"options": {"frame_rate": 0.0}}, "frame_rate must be from 0.01 to 1000"),
    ({"options": {"decode_noise_scale": 1.5}}, "decode_noise_scale must be in [0, 1]"),
    ({"video": "clip.mp4"}, "video: conditioning belongs to LTXConditionPipeline"),
])
def test_check_run_refusals(over, needle):
    spec = get_plugins().registry.get(IDS[1])
    problems = plugin.check_run(spec, _run(**over))
    assert len(problems) == 1 and needle in problems[0], problems
    assert "\n" not in problems[0]


@pytest.mark.parametrize("over, needle", [
    ({"options": {"pipeline": "ltx", "frame_index": 8}, "image": "a.png"}, "options.frame_index belongs to "
                                                                          "LTXConditionPipeline"),
    ({"options": {"pipeline": "ltx", "multiscale": True, "downscale_factor": 2 / 3}},
     "options.multiscale belongs to LTXConditionPipeline"),
    ({"options": {"frame_index": 161}, "image": "a.png"}, "options.frame_index must be in [0, 160]"),
    ({"options": {"frame_index": 8}}, "set image=... or drop options.frame_index"),
    # 22 latent frames (the keyframe's included) x 16 x 22 tokens = 7744, not a multiple of 3
    ({"options": {"frame_index": 8}, "image": "a.png", "parallel": SimpleNamespace(sp=3)}, "parallel.sp=3"),
    ({"options": {"denoise_strength": 0.0}}, "denoise_strength must be in (0, 1]"),
    ({"options": {"strength": 1.5}}, "options.strength must be in [0, 1]"),
    ({"options": {"image_cond_noise_scale": -0.1}}, "image_cond_noise_scale must be in [0, 10]"),
    ({"options": {"conditions": [{"picture": __file__}]}}, "options.conditions[0] must be {image: PATH} or"),
    ({"options": {"conditions": [{"image": "missing.png"}]}}, "options.conditions[0]: 'missing.png' is not a file"),
    ({"options": {"conditions": [{"image": __file__}, {"video": __file__, "frame_index": 161}]}},
     "options.conditions[1].frame_index must be an integer in [0, 160]"),
    ({"options": {"conditions": [{"image": __file__, "strength": 2}]}}, "options.conditions[0].strength must be"),
    ({"options": {"pipeline": "ltx", "conditions": [{"image": __file__}]}}, "options.conditions belongs to"),
    ({"options": {"pipeline": "ltx", "image_cond_noise_scale": 0.15}}, "options.image_cond_noise_scale belongs to"),
    ({"sampling": {"initial_noise": "z.npy"}}, "used only with options.denoise_strength < 1"),
    ({"options": {"multiscale": True, "downscale_factor": 0.05}}, "below the VAE's 32 pixels"),
    ({"options": {"multiscale": True, "downscale_factor": 2 / 3, "second_pass_timesteps": [0.0, 10.0]}},
     "second_pass_timesteps must be"),
])
def test_condition_check_run_refusals(over, needle):
    """The LTXConditionPipeline and multi-scale options are checked before anything loads."""
    spec = get_plugins().registry.get(IDS[1])
    over.setdefault("options", {}).setdefault("pipeline", "condition")
    parallel = over.pop("parallel", SimpleNamespace(sp=1))
    run = _run(**over)
    run.parallel = parallel
    problems = plugin.check_run(spec, run)
    assert len(problems) == 1 and needle in problems[0], problems
    assert "\n" not in problems[0]


def test_check_run_accepts_the_presets():
    spec = get_plugins().registry.get(IDS[0])
    assert plugin.check_run(spec, _run(options={"timesteps": presets.DISTILLED_TIMESTEPS})) == []


def test_guidance_choice():
    from vidax_core.guidance import ClassifierFree, NoGuidance

    assert isinstance(plugin.guidance(None, None, _run(sampling={"guidance_scale": 1.0})), NoGuidance)
    g = plugin.guidance(None, None, _run(options={"guidance_rescale": 0.7}))
    assert isinstance(g, ClassifierFree) and g.scale == 3.0 and g.rescale_phi == 0.7 and g.formula == "uncond"


def test_guidance_rescale_matches_float64_formula():
    """uncond + g (cond - uncond), then std-matched to cond (unbiased std over all but the batch axis)."""
    import jax.numpy as jnp

    rng = np.random.default_rng(0)
    c, u = rng.standard_normal((2, 1, 12, 8)) * [[[[1.0]]], [[[2.0]]]]
    g = plugin.guidance(None, None, _run(options={"guidance_rescale": 0.7}))
    got = np.asarray(g.combine({"cond": jnp.asarray(c, jnp.float32), "uncond": jnp.asarray(u, jnp.float32)},
                               {"g": jnp.float32(3.0)}))
    guided = u + 3.0 * (c - u)
    want = 0.7 * guided * (c.std(ddof=1) / guided.std(ddof=1)) + 0.3 * guided
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_text_encoding_matches_transformers(tmp_path):
    """Padded to max_sequence_length, encoded without the mask (as the pipeline), mask returned for the DiT."""
    import torch
    from transformers import AutoTokenizer, T5Config as HFT5Config, T5EncoderModel

    from vidax_core import T5Text
    from vidax_core.encoders.t5 import T5Config, load_t5
    from vidax_core.encoders.tokenizer import TextTokenizer
    from vidax_core.testing.tiny.ltx import TINY_T5
    from vidax_core.testing.tokenizers import make_tiny_t5_tokenizer, tokenizer_vocab_size
    from vidax_core.testing.reference import randomize_

    tok_dir = make_tiny_t5_tokenizer(tmp_path / "tok")
    hf_cfg = HFT5Config(vocab_size=tokenizer_vocab_size(tok_dir), **TINY_T5)
    model = T5EncoderModel(hf_cfg).eval()
    randomize_(model, 5, 0.3)
    prompts = ["a small red fox runs in the snow", ""]
    hf_tok = AutoTokenizer.from_pretrained(str(tok_dir))
    inputs = hf_tok(prompts, padding="max_length", max_length=16, truncation=True, add_special_tokens=True,
                    return_tensors="pt")
    with torch.no_grad():
        want = model(inputs.input_ids)[0].numpy()
    enc = T5Text(TextTokenizer.from_dir(tok_dir), load_t5(T5Config.from_config(hf_cfg.to_dict()),
                                                          {k: v.numpy() for k, v in model.state_dict().items()}))
    out = plugin.encode_prompt(None, enc, prompts, _run(sampling={"max_sequence_length": 16}))
    np.testing.assert_array_equal(out["mask"], inputs.attention_mask.numpy().astype(bool))
    err = float(np.abs(out["hidden"] - want).max())
    print(f"ltx t5 text: max_abs={err:.3e}")
    assert err <= 1e-5 * max(1.0, float(np.abs(want).max()))


def test_bench_reference_refuses_the_multi_pass_recipe():
    """`vidax bench --reference diffusers` times one pass: the recipe's three diffusers calls have no one reference."""
    from vidax_core.errors import UserError
    from vidax_ltx.bench_reference import LTXDiffusersReference

    run = _run(options={"pipeline": "condition", "multiscale": True})
    run.sampling.scheduler = None
    with pytest.raises(UserError, match="options.multiscale=false"):
        LTXDiffusersReference("unused", run)
