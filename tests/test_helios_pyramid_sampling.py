"""Helios' pyramid schedulers and CFG-Zero* against diffusers: every stage's timesteps and sigmas of HeliosScheduler
and HeliosDMDScheduler with stages (dynamic shifting on and off, both time-shift kinds, the amplified first chunk),
the re-noising coefficients between stages, a stage's UniPC and DMD stepping from the same model outputs, and the
CFG-Zero* combination with its zero-init (diffusers' pipeline_helios_pyramid formulas)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vidax_core.schedulers.base import sampler_from_scheduler_config

torch = pytest.importorskip("torch")

SHIFTS = [(False, "exponential"), (True, "linear"), (True, "exponential")]


def _pair(cls_name: str, dynamic: bool, kind: str, gamma: float = 1 / 3):
    import diffusers

    ref = getattr(diffusers, cls_name)(stages=3, use_dynamic_shifting=dynamic, time_shift_type=kind, gamma=gamma)
    return ref, sampler_from_scheduler_config({**ref.config, "_class_name": cls_name})


@pytest.mark.parametrize("cls_name", ["HeliosScheduler", "HeliosDMDScheduler"])
@pytest.mark.parametrize("dynamic,kind", SHIFTS)
def test_stage_schedules(cls_name, dynamic, kind):
    ref, ours = _pair(cls_name, dynamic, kind)
    assert ours.kind == ("dmd" if cls_name == "HeliosDMDScheduler" else "unipc")
    for stage in range(3):
        for amplify in (False, True):
            ref.set_timesteps(4, stage, mu=0.8, is_amplify_first_chunk=amplify)
            ts, sig = ours.stage_schedule(stage, 4, 0.8, amplify)
            np.testing.assert_allclose(ts, ref.timesteps.numpy(), rtol=0, atol=1e-9)
            np.testing.assert_allclose(sig, ref.sigmas.numpy(), rtol=0, atol=1e-12)
        if stage:
            o, g = 1 - ref.ori_start_sigmas[stage], ref.config.gamma
            alpha = 1 / (math.sqrt(1 + (1 / g)) * (1 - o) + o)
            assert ours.renoise(stage) == pytest.approx((alpha, alpha * (1 - o) / math.sqrt(g)), rel=1e-15)


@pytest.mark.parametrize("cls_name", ["HeliosScheduler", "HeliosDMDScheduler"])
def test_stage_steps(cls_name):
    """A stage's loop from the same model outputs (the DMD step re-noises towards the stage's start)."""
    ref, ours = _pair(cls_name, True, "linear")
    rng = np.random.default_rng(0)
    for stage in range(3):
        ref.set_timesteps(5, stage, mu=0.9)
        plan, inner = ours.stage_plan(stage, 5, 0.9), ours.stage_sampler()
        np.testing.assert_array_equal(plan.timesteps, np.trunc(ref.timesteps.numpy()).astype(np.float32))
        x0 = rng.standard_normal((1, 4, 2, 4, 4)).astype(np.float32)
        xr, xv = torch.from_numpy(x0.copy()), jnp.asarray(x0)
        arrays, state = plan.arrays(), inner.init_state(plan, xv)
        for i, t in enumerate(ref.timesteps):
            v = rng.standard_normal(x0.shape).astype(np.float32)
            extra = dict(cur_sampling_step=i, dmd_noisy_tensor=torch.from_numpy(x0), dmd_sigmas=ref.sigmas,
                         dmd_timesteps=ref.timesteps, all_timesteps=ref.timesteps) if ours.kind == "dmd" else {}
            xr = ref.step(torch.from_numpy(v), t, xr, return_dict=False, **extra)[0]
            xv, state = inner.step(arrays, state, jnp.int32(i), jnp.asarray(v), xv)
        rel = np.linalg.norm(np.asarray(xv) - xr.numpy()) / np.linalg.norm(xr.numpy())
        assert rel < 2e-6, (stage, rel)


def test_unsupported_pyramid_configs_are_refused():
    from vidax_core.schedulers.base import SchedulerConfigError

    base = {"_class_name": "HeliosScheduler", "stages": 3}
    with pytest.raises(SchedulerConfigError, match="euler"):
        sampler_from_scheduler_config({**base, "scheduler_type": "euler"})
    with pytest.raises(SchedulerConfigError, match="stage_range"):
        sampler_from_scheduler_config({**base, "stage_range": [0, 0.5, 1]})
    with pytest.raises(SchedulerConfigError, match="stages=1"):
        sampler_from_scheduler_config({"_class_name": "HeliosDMDScheduler", "stages": 1})


def test_cfg_zero_star():
    """diffusers' ``optimized_scale`` and its zero-init (the first ``zero_steps + 1`` steps predict zero)."""
    from vidax_core.guidance import CFGZeroStar

    rng = np.random.default_rng(1)
    cond, uncond = (rng.standard_normal((2, 4, 3, 4, 4)).astype(np.float32) for _ in range(2))
    g = CFGZeroStar(scale=5.0, zero_steps=1)
    scales = g.scales(np.zeros(4, np.float32))
    np.testing.assert_array_equal(scales["zero"], [1, 1, 0, 0])
    pos, neg = torch.from_numpy(cond).view(2, -1), torch.from_numpy(uncond).view(2, -1)
    alpha = (torch.sum(pos * neg, dim=1, keepdim=True) / (torch.sum(neg**2, dim=1, keepdim=True) + 1e-8))
    alpha = alpha.view(2, 1, 1, 1, 1)
    want = (torch.from_numpy(uncond) * alpha + 5.0 * (torch.from_numpy(cond) - torch.from_numpy(uncond) * alpha))
    combine = jax.jit(g.combine)
    at = lambda i: {k: v[i] for k, v in scales.items()}  # noqa: E731
    got = combine({"cond": cond, "uncond": uncond}, at(2))
    np.testing.assert_allclose(np.asarray(got), want.numpy(), rtol=1e-5, atol=1e-5)
    assert not np.asarray(combine({"cond": cond, "uncond": uncond}, at(1))).any()
    assert not CFGZeroStar(scale=5.0).scales(np.zeros(3, np.float32))["zero"].any()
