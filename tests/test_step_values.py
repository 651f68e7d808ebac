"""The per-step values the core hands ``Conditioning.step_kwargs``: this step's noise level and model timestep, and
the next step's model timestep, 0 after the last (what a meanflow DiT takes as ``timestep_r``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from vidax_core.runner.step import step_values


def test_next_timestep_is_the_plans_next_and_zero_at_the_end():
    timesteps = np.array([1000.0, 750.0, 400.0], np.float32)
    plan = {"timesteps": jnp.asarray(timesteps), "sigmas": jnp.asarray([1.0, 0.75, 0.5, 0.0], jnp.float32)}
    at = jax.jit(lambda i: step_values(plan, i))  # the step index is traced, as in the sampling loop
    got = [{k: float(v) for k, v in at(i).items()} for i in range(3)]
    assert got == [{"sigma": 1.0, "timestep": 1000.0, "next_timestep": 750.0},
                   {"sigma": 0.75, "timestep": 750.0, "next_timestep": 400.0},
                   {"sigma": 0.5, "timestep": 400.0, "next_timestep": 0.0}]
