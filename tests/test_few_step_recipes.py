"""Few-step distilled recipes: explicit ``sigmas`` / ``timesteps`` lists in ``sampling.scheduler``, checked against
diffusers' ``FlowMatchEulerDiscreteScheduler.set_timesteps(sigmas=..., timesteps=...)`` and against the lightx2v
schedule (its ``denoising_step_list`` warped at ``sample_shift``), guidance off dropping the unconditional batch,
and the shipped 4-step configs (Wan2.2 A14B: the expert switch after step 2)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from vidax_core import config as config_mod
from vidax_core.errors import UserError
from vidax_core.plugins import get_plugins
from vidax_core.runner import plan as planning
from vidax_core.runner.preflight import check_sampler

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS = [1000, 750, 500, 250]


def run_config(scheduler, num_steps=4, model="wan2.1-t2v-1.3b", **sampling):
    plugins = get_plugins()
    data = {"model": {"id": model}, "sampling": {"num_steps": num_steps, "scheduler": scheduler, **sampling}}
    return config_mod.resolve_layers(data, [], plugins.preset_for), plugins


def vidax_plan(scheduler, num_steps=4):
    cfg, plugins = run_config(scheduler, num_steps)
    spec = plugins.registry.get(cfg.model.id)
    check_sampler(cfg)
    sampler = planning.select_sampler(spec, None, cfg, plugins)
    return planning.sampling_plan(spec, None, cfg, plugins, sampler, (2, 4, 4))


def lightx2v_schedule(steps, shift, T=1000):
    """lightx2v's WanStepDistillScheduler: 1000 shifted training sigmas, picked at index T - step."""
    sig = np.linspace(1.0, 0.0, T + 1)[:-1]
    sig = shift * sig / (1 + (shift - 1) * sig)
    idx = [T - s for s in steps]
    return sig[idx] * T, sig[idx]


def test_sigma_list_matches_diffusers_and_lightx2v():
    import torch
    from diffusers import FlowMatchEulerDiscreteScheduler

    plan = vidax_plan({"name": "flow_euler", "shift": 5.0, "sigmas": [1.0, 0.75, 0.5, 0.25]})
    ref = FlowMatchEulerDiscreteScheduler(shift=5.0)
    ref.set_timesteps(sigmas=[1.0, 0.75, 0.5, 0.25], device="cpu")
    np.testing.assert_array_equal(plan.sigmas, ref.sigmas.numpy())
    np.testing.assert_array_equal(plan.timesteps, ref.timesteps.numpy())
    t, s = lightx2v_schedule(STEPS, 5.0)
    np.testing.assert_allclose(plan.timesteps, t, rtol=1e-6)
    np.testing.assert_allclose(plan.sigmas[:-1], s, rtol=1e-6)
    assert plan.sigmas[-1] == 0.0  # flow Euler to 0
    plain = vidax_plan({"name": "flow_euler", "shift": 5.0})  # the list really changes the schedule
    assert np.abs(plain.timesteps - plan.timesteps).max() > 50
    del torch


def test_timestep_list_matches_diffusers():
    from diffusers import FlowMatchEulerDiscreteScheduler

    plan = vidax_plan({"name": "flow_euler", "shift": 3.0, "timesteps": [999.0, 800.0, 500.0]}, num_steps=3)
    ref = FlowMatchEulerDiscreteScheduler(shift=3.0)
    ref.set_timesteps(timesteps=[999.0, 800.0, 500.0], device="cpu")
    np.testing.assert_allclose(plan.sigmas, ref.sigmas.numpy(), rtol=0, atol=1e-7)
    np.testing.assert_allclose(plan.timesteps, ref.timesteps.numpy(), rtol=0, atol=1e-4)


@pytest.mark.parametrize("scheduler, steps, fragment", [
    ({"name": "flow_euler", "sigmas": [1.0, 0.5]}, 4,
     "sigmas has 2 entries but sampling.num_steps=4: set sampling.num_steps=2"),
    ({"name": "dpm_solver++", "sigmas": [1.0, 0.5]}, 2, "sampler dpm_solver++ takes no sigmas list"),
    ({"name": "flow_euler", "sigmas": [1.0, 0.5], "timesteps": [999.0]}, 2, "timesteps has 1 entries"),
])
def test_bad_lists_are_one_line(scheduler, steps, fragment):
    cfg, _ = run_config(scheduler, steps)
    with pytest.raises(UserError) as err:
        check_sampler(cfg)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def shipped(name):
    plugins = get_plugins()
    cfg = config_mod.resolve(os.path.join(ROOT, "configs", name), [], plugins.preset_for)
    return cfg, plugins, plugins.registry.get(cfg.model.id)


@pytest.mark.parametrize("name", ["wan21_t2v_14b_lightx2v_4step.yaml", "wan21_i2v_14b_480p_lightx2v_4step.yaml",
                                  "wan22_t2v_a14b_lightning_4step.yaml"])
def test_shipped_recipe(name):
    """4 steps of the lightx2v schedule, guidance off (one branch: no unconditional batch), an adapter per expert."""
    import types

    cfg, plugins, spec = shipped(name)
    check_sampler(cfg)
    assert cfg.sampling.num_steps == 4 and cfg.sampling.guidance_scale == 1.0
    sampler = planning.select_sampler(spec, None, cfg, plugins)
    plan = planning.sampling_plan(spec, None, cfg, plugins, sampler, (21, 60, 104))
    np.testing.assert_allclose(plan.timesteps, lightx2v_schedule(STEPS, 5.0)[0], rtol=1e-6)
    two = "a14b" in name
    index = {"boundary_ratio": 0.875 if two else None, "transformer_2": ["diffusers", "x"] if two else [None, None]}
    ckpt = types.SimpleNamespace(model_index=index, has=lambda c: True, config=lambda c: {"num_train_timesteps": 1000})
    guide = planning.select_guidance(spec, ckpt, cfg, plugins)
    assert len(guide.branches) == 1
    assert [e.expert for e in cfg.lora] == (["high_noise", "low_noise"] if two else [None])
    if two:  # the checkpoint's boundary puts the switch after step 2, as the recipe's boundary_step_index = 2
        from vidax_wan.experts import boundary

        assert [t >= boundary(ckpt) for t in plan.timesteps] == [True, True, False, False]
        assert cfg.sampling.boundary_step_index == 2
