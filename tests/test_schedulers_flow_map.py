"""The flow-map Euler sampler (AnyFlow) against diffusers' FlowMapEulerDiscreteScheduler: its plan (float64 sigmas
and timesteps, rounded once) and its trajectory, step by step, with the harness of test_schedulers_util; the
scheduler configs of the diffusers port and of the original release both resolve to it."""

from __future__ import annotations

import numpy as np
import pytest
from diffusers import FlowMapEulerDiscreteScheduler

from test_schedulers_util import check, initial_sample, run_diffusers, run_vidax
from vidax_core.schedulers import FlowMapEulerSampler, get_sampler, sampler_from_scheduler_config


@pytest.mark.parametrize("n,shift", [(1, 1.0), (4, 5.0), (7, 3.0)])
def test_flow_map_matches_diffusers(n, shift):
    sched = FlowMapEulerDiscreteScheduler(shift=shift)
    sched.set_timesteps(n)
    sampler = get_sampler("flow_map_euler", shift=shift)
    plan = sampler.plan(n)
    np.testing.assert_array_equal(plan.sigmas, sched.sigmas.numpy().astype(np.float32))
    np.testing.assert_array_equal(plan.timesteps, sched.timesteps.numpy().astype(np.float32))
    x0 = initial_sample()
    check("flow_map_euler", run_vidax(sampler, plan, x0), run_diffusers(sched, x0))


@pytest.mark.parametrize("kind", ["sigmas", "timesteps"])
def test_flow_map_given_lists(kind):
    """Custom lists are shifted as diffusers shifts them (``timesteps`` become sigmas first)."""
    values = [0.9, 0.5, 0.2] if kind == "sigmas" else [950.0, 600.0, 250.0]
    sched = FlowMapEulerDiscreteScheduler(shift=3.0)
    sched.set_timesteps(**{kind: values})
    plan = FlowMapEulerSampler(shift=3.0).plan(**{kind: values})
    np.testing.assert_array_equal(plan.sigmas, sched.sigmas.numpy().astype(np.float32))
    np.testing.assert_array_equal(plan.timesteps, sched.timesteps.numpy().astype(np.float32))


def test_flow_map_scheduler_configs():
    for name in ("FlowMapEulerDiscreteScheduler", "FlowMapDiscreteScheduler"):
        s = sampler_from_scheduler_config({"_class_name": name, "num_train_timesteps": 1000, "shift": 5.0})
        assert s == FlowMapEulerSampler(shift=5.0)
