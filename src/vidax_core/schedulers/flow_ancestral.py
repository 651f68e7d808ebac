"""Ancestral rectified-flow Euler (LTX family), diffusers ``LTXEulerAncestralRFScheduler``.

This is ComfyUI's ``sample_euler_ancestral_RF`` for the CONST / flow parametrisation
(``x_t = (1 - sigma) x0 + sigma eps``, model predicts ``v = eps - x0``). Per step, with
``x0 = x - sigma * v``::

    sigma_down = sigma_next * (1 + (sigma_next / sigma - 1) * eta)
    x'         = (sigma_down / sigma) * x + (1 - sigma_down / sigma) * x0         # Euler step to sigma_down
    x_next     = (1 - sigma_next) / (1 - sigma_down) * x'                           # rescale signal to sigma_next
                 + sqrt(sigma_next^2 - sigma_down^2 (1 - sigma_next)^2 / (1 - sigma_down)^2) * s_noise * noise

and the step onto ``sigma_next = 0`` returns ``x0``. ``eta = 0`` is the deterministic flow Euler step
(no noise is drawn); ``eta = 1`` is ComfyUI's default. Coefficients are computed on the host in float32
in diffusers' operation order (including its ``+ 1e-12`` guards).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from vidax_core.schedulers.base import (ConfigReader, SamplerPlan, SchedulerConfigError, _check_noise, gather,
                                        register_sampler, register_scheduler_class)
from vidax_core.schedulers.flow_euler import FlowEulerSampler

__all__ = ["FlowEulerAncestralSampler"]

_F = np.float32


@dataclass(frozen=True)
class FlowEulerAncestralSampler(FlowEulerSampler):
    """Ancestral RF Euler with ``eta`` / ``s_noise``; the schedule options are flow Euler's.

    ``plan(num_steps, mu=..., seq_len=...)`` builds the flow-match schedule exactly like
    ``FlowMatchEulerDiscreteScheduler`` (diffusers delegates to it). ``plan(sigmas=[..., 0.0])`` takes an
    explicit ComfyUI-style schedule *including* the terminal sigma (``num_steps = len(sigmas) - 1``),
    used as given (no shift), with ``timesteps = sigmas * num_train_timesteps``.
    """

    name = "flow_euler_ancestral"
    step_fields = ()

    eta: float = 1.0
    s_noise: float = 1.0

    def __post_init__(self):
        super().__post_init__()
        if self.stochastic_sampling:
            raise ValueError("flow_euler_ancestral: stochastic_sampling is a flow_euler option; use eta instead")
        if self.eta < 0 or self.s_noise < 0:
            raise ValueError("flow_euler_ancestral: eta and s_noise must be >= 0")

    @property
    def needs_noise(self) -> bool:
        return self.eta > 0.0 and self.s_noise > 0.0

    def step_key(self) -> tuple:
        return (type(self), self.needs_noise)

    # ------------------------------------------------------------------ host
    def plan(self, num_steps: int | None = None, *, sigmas=None, timesteps=None,
             mu: float | None = None, seq_len: int | None = None) -> SamplerPlan:
        if sigmas is None and timesteps is not None:
            sigmas = timesteps  # diffusers treats `timesteps` as an alias of sigmas here
        if sigmas is not None:
            s = np.asarray(sigmas, dtype=np.float64).astype(_F)
            if s.ndim != 1 or len(s) < 2:
                raise ValueError("flow_euler_ancestral: explicit `sigmas` must be 1-D and include the terminal sigma")
            n = len(s) - 1
            if num_steps is not None and num_steps != n:
                raise ValueError(f"flow_euler_ancestral: num_steps={num_steps} but len(sigmas)-1={n}")
            ts = s[:-1] * _F(self.num_train_timesteps)
            base = SamplerPlan(timesteps=ts.astype(_F), sigmas=s, num_steps=n)
        else:
            base = super().plan(num_steps, mu=mu, seq_len=seq_len)
        return SamplerPlan(timesteps=base.timesteps, sigmas=base.sigmas, num_steps=base.num_steps,
                           extras=self._coefficients(base.sigmas))

    def _coefficients(self, sig: np.ndarray) -> dict[str, np.ndarray]:
        N = len(sig) - 1
        a = np.zeros(N, _F)  # weight of x
        b = np.ones(N, _F)  # weight of x0
        c = np.ones(N, _F)  # signal rescale
        r = np.zeros(N, _F)  # renoise coefficient
        eta, one = _F(self.eta), _F(1)
        for i in range(N):
            sigma, sigma_next = sig[i], sig[i + 1]
            if abs(sigma_next) < 1e-8:
                continue  # x_next = x0
            downstep = one + (sigma_next / sigma - one) * eta
            sigma_down = sigma_next * downstep
            alpha_ip1 = one - sigma_next
            alpha_down = one - sigma_down
            ratio = sigma_down / sigma
            a[i], b[i] = ratio, one - ratio
            if self.needs_noise:
                rc = sigma_next ** 2 - sigma_down ** 2 * alpha_ip1 ** 2 / (alpha_down ** 2 + _F(1e-12))
                r[i] = np.sqrt(max(rc, _F(0)))
                c[i] = alpha_ip1 / (alpha_down + _F(1e-12))
        return {"anc_a": a, "anc_b": b, "anc_c": c, "anc_r": r, "anc_s": np.full(N, self.s_noise, _F)}

    # ---------------------------------------------------------------- device
    def step(self, plan_arrays, state, i, model_output, sample, noise=None):
        _check_noise(self, noise)
        pa = plan_arrays
        x = sample.astype(jnp.float32)
        v = model_output.astype(jnp.float32)
        x0 = x - gather(pa, "sigmas", i) * v
        out = gather(pa, "anc_a", i) * x + gather(pa, "anc_b", i) * x0
        if self.needs_noise:
            out = (gather(pa, "anc_c", i) * out
                   + noise.astype(jnp.float32) * gather(pa, "anc_r", i) * gather(pa, "anc_s", i))
        return out.astype(sample.dtype), state


register_sampler("flow_euler_ancestral", FlowEulerAncestralSampler)


_FLOW_FIELDS = [
    ("num_train_timesteps", 1000), ("shift", 1.0), ("use_dynamic_shifting", False),
    ("base_shift", 0.5), ("max_shift", 1.15), ("base_image_seq_len", 256), ("max_image_seq_len", 4096),
    ("time_shift_type", "exponential"), ("invert_sigmas", False), ("shift_terminal", None),
    ("use_karras_sigmas", False), ("use_exponential_sigmas", False), ("use_beta_sigmas", False),
]


def _from_config(cfg: dict) -> FlowEulerAncestralSampler:
    # diffusers builds the default schedule with FlowMatchEulerDiscreteScheduler.from_config(self.config),
    # so flow-match fields stored alongside eta / s_noise shape the schedule too.
    r = ConfigReader("LTXEulerAncestralRFScheduler", cfg)
    opts = {}
    for name, default in _FLOW_FIELDS + [("eta", 1.0), ("s_noise", 1.0)]:
        v = r.take(name, default)
        opts[name] = default if v is None and default is not None else v
    r.require_default("stochastic_sampling", False)
    r.finish()
    try:
        return FlowEulerAncestralSampler(**opts)
    except ValueError as e:
        raise SchedulerConfigError(f"LTXEulerAncestralRFScheduler: {e}") from None


register_scheduler_class("LTXEulerAncestralRFScheduler", _from_config)
