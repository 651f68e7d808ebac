"""Flow-map Euler sampler (diffusers ``FlowMapEulerDiscreteScheduler``; AnyFlow).

A flow-map model predicts the mean velocity that takes ``x_t`` to ``x_r`` for any pair of noise levels, so a step
moves from this step's level to the next one's in one jump: ``x_r = x_t - (sigma_t - sigma_r) * u``. The model is
conditioned on both ends: it reads the next step's model timestep (``r = sigmas[i + 1] * T``, 0 after the last
step), which the runner hands to a model as ``next_timestep`` (:attr:`vidax_core.model_api.Conditioning.step_kwargs`).

The schedule is diffusers': ``N`` levels from ``linspace(1, 0, N + 1)[:-1]`` (or the given ``sigmas``, or the
given ``timesteps / T``), shifted by ``shift * s / (1 + (shift - 1) s)``, a terminal 0 appended; computed in
float64 as the reference and rounded once.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from .base import ConfigReader, Sampler, SamplerPlan, gather, register_sampler, register_scheduler_class

__all__ = ["FlowMapEulerSampler"]


@dataclass(frozen=True)
class FlowMapEulerSampler(Sampler):
    """Options mirror ``FlowMapEulerDiscreteScheduler``'s config (``num_train_timesteps``, ``shift``)."""

    name = "flow_map_euler"
    step_fields = ()

    num_train_timesteps: int = 1000
    shift: float = 1.0

    def __post_init__(self):
        if self.num_train_timesteps < 1:
            raise ValueError("num_train_timesteps must be >= 1")
        if not self.shift > 0:
            raise ValueError(f"shift must be > 0, got {self.shift}")

    def plan(self, num_steps: int | None = None, *, sigmas=None, timesteps=None) -> SamplerPlan:
        T = float(self.num_train_timesteps)
        if sigmas is not None and timesteps is not None and len(sigmas) != len(timesteps):
            raise ValueError("`sigmas` and `timesteps` must have the same length")
        given = sigmas if sigmas is not None else timesteps
        if given is not None:
            if num_steps is not None and len(given) != num_steps:
                raise ValueError("`sigmas` / `timesteps` must have num_steps entries")
            num_steps = len(given)
        if num_steps is None or num_steps < 1:
            raise ValueError("plan() needs num_steps >= 1, sigmas or timesteps")
        if sigmas is not None:
            s = np.asarray(sigmas, np.float64)
        elif timesteps is not None:
            s = np.asarray(timesteps, np.float64) / T
        else:
            s = np.linspace(1.0, 0.0, num_steps + 1, dtype=np.float64)[:-1]
        if self.shift != 1.0:
            s = self.shift * s / (1.0 + (self.shift - 1.0) * s)
        full = np.concatenate([s, np.zeros(1, np.float64)])
        return SamplerPlan(timesteps=(full[:-1] * T).astype(np.float32), sigmas=full.astype(np.float32),
                           num_steps=int(num_steps))

    def step(self, plan_arrays, state, i, model_output, sample, noise=None):
        """``x - (sigma_i - sigma_{i+1}) * u`` in float32."""
        sigma = gather(plan_arrays, "sigmas", i)
        sigma_next = gather(plan_arrays, "sigmas", i + 1)
        x = sample.astype(jnp.float32)
        return (x - (sigma - sigma_next) * model_output.astype(jnp.float32)).astype(sample.dtype), state


register_sampler("flow_map_euler", FlowMapEulerSampler)


def _from_config(cfg: dict, name: str = "FlowMapEulerDiscreteScheduler") -> FlowMapEulerSampler:
    r = ConfigReader(name, cfg)
    opts = {"num_train_timesteps": int(r.take("num_train_timesteps", 1000) or 1000),
            "shift": float(r.take("shift", 1.0) or 1.0)}
    r.finish()
    return FlowMapEulerSampler(**opts)


register_scheduler_class("FlowMapEulerDiscreteScheduler", _from_config)
# the original AnyFlow release names its scheduler so in model_index.json / scheduler_config.json
register_scheduler_class("FlowMapDiscreteScheduler", lambda cfg: _from_config(cfg, "FlowMapDiscreteScheduler"))
