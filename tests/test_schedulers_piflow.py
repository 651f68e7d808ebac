"""PiFlow (the distilled Kandinsky 6 sampler) against diffusers' ``PiflowScheduler``, trajectory by trajectory."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from diffusers import PiflowScheduler

from vidax_core.schedulers import PiflowSampler, SchedulerConfigError, sampler_from_scheduler_config

SHAPE = (1, 3, 4, 4, 5)  # channels last, as the step reads them


def widened(x: np.ndarray, t: float, n_grid: int) -> np.ndarray:
    """A fixed smooth 'model' with ``n_grid`` velocities per channel (the grid predictions differ)."""
    tt = np.float32(t / 1000.0)
    k = np.arange(1, n_grid + 1, dtype=np.float32)
    v = (np.tanh(np.float32(0.5) * x[..., None, :] * k[:, None])
         + np.float32(0.2) * tt * np.sin(x[..., None, :] + k[:, None]))
    return v.reshape(*x.shape[:-1], n_grid * x.shape[-1]).astype(np.float32)


def _diffusers(sched: PiflowScheduler, x0: np.ndarray, n: int) -> list[np.ndarray]:
    sched.set_timesteps(n)
    x = torch.from_numpy(x0.copy())
    out = []
    for t in sched.timesteps:
        mo = torch.from_numpy(widened(x.numpy(), float(t), sched.n_grid))
        x = sched.step(mo, t, x, return_dict=False)[0]
        out.append(x.numpy().copy())
    return out


def _vidax(sampler: PiflowSampler, x0: np.ndarray, n: int) -> tuple[list[np.ndarray], object]:
    plan = sampler.plan(n)
    pa = plan.arrays()
    step = jax.jit(lambda pa, i, mo, x: sampler.step(pa, {}, i, mo, x)[0])
    x = jnp.asarray(x0)
    out = []
    for i in range(n):
        mo = jnp.asarray(widened(np.asarray(x), float(plan.timesteps[i]), sampler.n_grid))
        x = step(pa, jnp.asarray(i, jnp.int32), mo, x)
        out.append(np.asarray(x).copy())
    return out, plan


def _rel(a, b) -> float:
    return float(np.max(np.abs(np.float64(a) - b)) / np.max(np.abs(b)))


@pytest.mark.parametrize("n,config", [
    (16, {}),
    (1, {}),
    (4, {"shift": 3.0, "n_grid": 4, "final_step_size_scale": 1.0, "num_policy_substeps": 37}),
])
def test_piflow_matches_diffusers(n, config):
    x0 = np.random.default_rng(n).standard_normal(SHAPE).astype(np.float32)
    sched = PiflowScheduler(**config)
    ref = _diffusers(sched, x0, n)
    sampler = sampler_from_scheduler_config({"_class_name": "PiflowScheduler", **config})
    ours, plan = _vidax(sampler, x0, n)
    np.testing.assert_array_equal(plan.timesteps, sched.timesteps.numpy())
    np.testing.assert_array_equal(plan.sigmas, sched.sigmas.numpy())
    for i, (a, b) in enumerate(zip(ours, ref)):
        assert _rel(a, b) < 1e-5, (i, _rel(a, b))


def test_piflow_a_wrong_policy_is_caught():
    """Interpolating the wrong neighbour (the mutation a broken index gives) moves the trajectory far past the
    tolerance above, so the parity test can fail."""
    n = 6
    x0 = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    ref = _diffusers(PiflowScheduler(), x0, n)
    sampler = PiflowSampler()
    plan = sampler.plan(n)
    bad = dict(plan.extras, lo=np.maximum(plan.extras["lo"] - 1, 0))
    pa = {**plan.arrays(), "lo": jnp.asarray(bad["lo"])}
    x = jnp.asarray(x0)
    for i in range(n):
        mo = jnp.asarray(widened(np.asarray(x), float(plan.timesteps[i]), sampler.n_grid))
        x = sampler.step(pa, {}, jnp.asarray(i), mo, x)[0]
    assert _rel(np.asarray(x), ref[-1]) > 1e-3


def test_piflow_refuses_what_diffusers_refuses():
    with pytest.raises(SchedulerConfigError, match="n_grid"):
        sampler_from_scheduler_config({"_class_name": "PiflowScheduler", "n_grid": 1})
    with pytest.raises(SchedulerConfigError, match="unrecognised field"):
        sampler_from_scheduler_config({"_class_name": "PiflowScheduler", "stochastic": 0.5})
    with pytest.raises(ValueError, match="n_grid=10"):
        PiflowSampler().step(PiflowSampler().plan(2).arrays(), {}, 0, jnp.zeros((1, 3, 7)), jnp.zeros((1, 3, 2)))
