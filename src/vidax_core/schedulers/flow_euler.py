"""Rectified-flow Euler sampler (diffusers ``FlowMatchEulerDiscreteScheduler``).

Convention: ``x_t = (1 - sigma) * x0 + sigma * eps`` and the model predicts the velocity
``v = eps - x0``. The deterministic step is ``x_next = x + (sigma_next - sigma) * v``; with
``stochastic_sampling`` the step re-noises the x0 estimate with fresh noise
``x_next = (1 - sigma_next) * x0 + sigma_next * noise`` (noise supplied by the caller).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from .base import (
    ConfigReader,
    Sampler,
    SamplerPlan,
    _check_noise,
    calculate_shift,
    gather,
    register_sampler,
    register_scheduler_class,
)
from vidax_core.schedulers.sigmas import convert_sigmas, shift_sigmas, sigma_kind, stretch_to_terminal, time_shift

__all__ = ["FlowEulerSampler"]


@dataclass(frozen=True)
class FlowEulerSampler(Sampler):
    """Flow-matching Euler. Options mirror ``FlowMatchEulerDiscreteScheduler``'s config.

    ``plan(num_steps, sigmas=None, timesteps=None, mu=None, seq_len=None)``: with
    ``use_dynamic_shifting`` pass ``mu`` or ``seq_len`` (``mu`` is then derived with the linear
    ``base_shift``/``max_shift`` rule diffusers pipelines use).
    """

    name = "flow_euler"
    step_fields = ("stochastic_sampling",)

    num_train_timesteps: int = 1000
    shift: float = 1.0
    use_dynamic_shifting: bool = False
    base_shift: float = 0.5
    max_shift: float = 1.15
    base_image_seq_len: int = 256
    max_image_seq_len: int = 4096
    time_shift_type: str = "exponential"
    invert_sigmas: bool = False
    shift_terminal: float | None = None
    use_karras_sigmas: bool = False
    use_exponential_sigmas: bool = False
    use_beta_sigmas: bool = False
    stochastic_sampling: bool = False

    def __post_init__(self):
        if self.time_shift_type not in ("exponential", "linear"):
            raise ValueError(f"time_shift_type must be 'exponential' or 'linear', got {self.time_shift_type!r}")
        sigma_kind(self.use_karras_sigmas, self.use_exponential_sigmas, self.use_beta_sigmas)
        if self.num_train_timesteps < 1:
            raise ValueError("num_train_timesteps must be >= 1")

    @property
    def needs_noise(self) -> bool:
        return self.stochastic_sampling

    # ------------------------------------------------------------------ host
    def _train_sigma_range(self) -> tuple[float, float]:
        """``(sigma_min, sigma_max)`` of the training schedule, in float32 as diffusers builds it."""
        T = self.num_train_timesteps
        ends = np.array([T, 1], dtype=np.float32) / T
        if not self.use_dynamic_shifting:
            ends = shift_sigmas(ends, self.shift)
        return float(ends[1]), float(ends[0])

    def plan(self, num_steps: int | None = None, *, sigmas=None, timesteps=None,
             mu: float | None = None, seq_len: int | None = None) -> SamplerPlan:
        T = self.num_train_timesteps
        if self.use_dynamic_shifting and mu is None:
            if seq_len is None:
                raise ValueError("flow_euler with use_dynamic_shifting needs `mu` or `seq_len` in plan()")
            mu = calculate_shift(seq_len, self.base_image_seq_len, self.max_image_seq_len,
                                 self.base_shift, self.max_shift)
        if sigmas is not None and timesteps is not None and len(sigmas) != len(timesteps):
            raise ValueError("`sigmas` and `timesteps` must have the same length")
        if num_steps is None:
            if sigmas is None and timesteps is None:
                raise ValueError("plan() needs num_steps, sigmas or timesteps")
            num_steps = len(sigmas) if sigmas is not None else len(timesteps)
        elif ((sigmas is not None and len(sigmas) != num_steps)
              or (timesteps is not None and len(timesteps) != num_steps)):
            raise ValueError("`sigmas` / `timesteps` must have num_steps entries")
        if num_steps < 1:
            raise ValueError("num_steps must be >= 1")

        given_t = None if timesteps is None else np.asarray(timesteps).astype(np.float32)
        if sigmas is None:
            if given_t is None:
                sigma_min, sigma_max = self._train_sigma_range()
                t = np.linspace(sigma_max * T, sigma_min * T, num_steps)  # float64, as diffusers
            else:
                t = given_t
            s = t / T
        else:
            s = np.asarray(sigmas).astype(np.float32)

        if self.use_dynamic_shifting:
            s = time_shift(s, mu, self.time_shift_type)
        else:
            s = shift_sigmas(s, self.shift)
        if self.shift_terminal:
            s = stretch_to_terminal(s, self.shift_terminal)
        kind = sigma_kind(self.use_karras_sigmas, self.use_exponential_sigmas, self.use_beta_sigmas)
        s = convert_sigmas(kind, s, num_steps)

        s32 = np.asarray(s).astype(np.float32)
        ts = given_t if given_t is not None else s32 * np.float32(T)
        if self.invert_sigmas:
            s32 = np.float32(1.0) - s32
            ts = s32 * np.float32(T)
            s32 = np.concatenate([s32, np.ones(1, np.float32)])
        else:
            s32 = np.concatenate([s32, np.zeros(1, np.float32)])
        return SamplerPlan(timesteps=ts.astype(np.float32), sigmas=s32, num_steps=num_steps)

    # ---------------------------------------------------------------- device
    def step(self, plan_arrays, state, i, model_output, sample, noise=None, per_token_timesteps=None):
        """One Euler step. ``per_token_timesteps`` (B, S) (in model-timestep units; tokens on the sample's last
        axes but one, as the packed (B, S, C) layout LTX uses) gives each token its own sigma: it moves from its own
        sigma to the largest plan sigma strictly below it (0 when none), as diffusers' per-token update does."""
        _check_noise(self, noise)
        sigma = gather(plan_arrays, "sigmas", i)
        sigma_next = gather(plan_arrays, "sigmas", i + 1)
        x = sample.astype(jnp.float32)
        v = model_output.astype(jnp.float32)
        if per_token_timesteps is not None:
            if self.stochastic_sampling:
                raise ValueError("flow_euler: per-token timesteps need stochastic_sampling=false")
            tok = per_token_timesteps.astype(jnp.float32) / self.num_train_timesteps
            sig = plan_arrays["sigmas"].astype(jnp.float32)
            below = jnp.where(sig[:, None, None] < tok[None] - 1e-6, sig[:, None, None], 0.0).max(axis=0)
            dt = (below - tok)[..., None]  # (B, S, 1): broadcast over channels
            return (x + dt * v).astype(sample.dtype), state
        if self.stochastic_sampling:
            x0 = x - sigma * v
            prev = (1.0 - sigma_next) * x0 + sigma_next * noise.astype(jnp.float32)
        else:
            prev = x + (sigma_next - sigma) * v
        return prev.astype(sample.dtype), state


register_sampler("flow_euler", FlowEulerSampler)


def _from_config(cfg: dict) -> FlowEulerSampler:
    r = ConfigReader("FlowMatchEulerDiscreteScheduler", cfg)
    opts = {}
    for name, default in [
        ("num_train_timesteps", 1000), ("shift", 1.0), ("use_dynamic_shifting", False),
        ("base_shift", 0.5), ("max_shift", 1.15), ("base_image_seq_len", 256), ("max_image_seq_len", 4096),
        ("time_shift_type", "exponential"), ("invert_sigmas", False), ("shift_terminal", None),
        ("use_karras_sigmas", False), ("use_exponential_sigmas", False), ("use_beta_sigmas", False),
        ("stochastic_sampling", False),
    ]:
        v = r.take(name, default)
        opts[name] = default if v is None and default is not None else v
    r.finish()
    return FlowEulerSampler(**opts)


register_scheduler_class("FlowMatchEulerDiscreteScheduler", _from_config)
