"""PiFlow (diffusers ``PiflowScheduler``): the few-step sampler of policy-distilled flow models (Kandinsky 6's
distilled checkpoints).

The model is evaluated once per step but predicts ``n_grid`` velocities per latent channel (its output's last axis
holds ``n_grid`` groups of the sample's channels, the sample's channels last). They are turned into ``n_grid`` clean
estimates ``x0_k = x - sigma v_k`` on an even grid over the step's raw-time segment, and a network-free policy is
integrated across the segment in Euler substeps: at raw time ``r`` the velocity is ``(x - x0(r)) / sigma(r)``, with
``x0(r)`` linearly interpolated between the two grid points around ``r``.

Raw time ``r`` runs from 1 to 0 on ``num_steps`` segments of equal length, the last one ``final_step_size_scale`` as
long (it ends at ``eps``); the model sees ``sigma = shift r / (1 + (shift - 1) r)`` times ``num_train_timesteps``.
A step covering ``d`` raw time takes ``max(1, round(d num_policy_substeps))`` substeps.

Every scalar of the integration (each substep's noise levels and its interpolation weights) depends only on the
plan, so :meth:`PiflowSampler.plan` computes them on the host in float32, as the reference's tensors do, into
``(num_steps, max_substeps)`` tables; the traced step runs ``max_substeps`` substeps, the unused ones holding the
sample.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .base import ConfigReader, Sampler, SamplerPlan, SchedulerConfigError, gather, register_sampler, \
    register_scheduler_class

__all__ = ["PiflowSampler"]

F = np.float32


def _shift(raw: np.ndarray, shift: float) -> np.ndarray:
    """``shift_timesteps``: raw flow time -> the shifted sigma, float32."""
    raw = np.asarray(raw, F)
    return (F(shift) * raw / (F(1) + F(shift - 1) * raw)).astype(F)


def _unwarp(sigma, shift: float):
    """The inverse map, as the policy computes it: ``sigma / (shift + (1 - shift) sigma)``."""
    sigma = np.asarray(sigma, F)
    return (sigma / (F(shift) + F(1 - shift) * sigma)).astype(F)


@dataclass(frozen=True)
class PiflowSampler(Sampler):
    """Options mirror ``PiflowScheduler``'s config. The step takes the widened model output
    (``(..., n_grid * C)`` for a ``(..., C)`` sample)."""

    name = "piflow"
    step_fields = ("n_grid",)

    num_train_timesteps: int = 1000
    shift: float = 5.0
    n_grid: int = 10
    eps: float = 1e-6
    final_step_size_scale: float = 0.5
    num_policy_substeps: int = 128

    def __post_init__(self):
        if self.n_grid < 2:
            raise ValueError(f"piflow: n_grid must be >= 2, got {self.n_grid}")
        if self.eps <= 0:
            raise ValueError(f"piflow: eps must be > 0, got {self.eps}")
        if not 0 < self.final_step_size_scale <= 1:
            raise ValueError(f"piflow: final_step_size_scale must be in (0, 1], got {self.final_step_size_scale}")
        if self.num_policy_substeps < 1:
            raise ValueError(f"piflow: num_policy_substeps must be >= 1, got {self.num_policy_substeps}")

    # ------------------------------------------------------------------ host
    def raw_times(self, num_steps: int) -> np.ndarray:
        """The raw flow time at each step's start, (N,) float32."""
        segment = 1.0 / (num_steps - (1.0 - self.final_step_size_scale))
        return (F(1) - np.arange(num_steps, dtype=F) * F(segment)).astype(F)

    def plan(self, num_steps: int | None = None) -> SamplerPlan:
        if num_steps is None or num_steps < 1:
            raise ValueError(f"piflow: num_steps must be positive, got {num_steps}")
        raw = self.raw_times(num_steps)
        sigmas = _shift(raw, self.shift)
        timesteps = (sigmas * F(self.num_train_timesteps)).astype(F)
        tables = [self._substeps(raw, sigmas, i) for i in range(num_steps)]
        k = max(len(t["sigma"]) for t in tables)
        extras = {}
        for name in ("sigma", "sigma_next", "lo", "w_lo", "w_hi"):
            dtype = np.int32 if name == "lo" else F
            out = np.zeros((num_steps, k), dtype)
            for i, t in enumerate(tables):
                n = len(t[name])
                out[i, :n] = t[name]
                if name in ("sigma", "sigma_next") and n < k:  # unused substeps: no move (sigma_next == sigma)
                    out[i, n:] = t["sigma_next"][-1]
            extras[name] = out
        extras["active"] = np.array([[j < len(t["sigma"]) for j in range(k)] for t in tables], bool)
        return SamplerPlan(timesteps=timesteps, sigmas=np.concatenate([sigmas, np.zeros(1, F)]),
                           num_steps=num_steps, extras=extras)

    def _substeps(self, raw: np.ndarray, sigmas: np.ndarray, i: int) -> dict[str, np.ndarray]:
        """Step ``i``'s substeps: the noise level each starts and ends at, and its interpolation between the
        grid estimates (lower index, weights), computed in the reference's float32 order of operations."""
        eps, shift, n = F(self.eps), self.shift, self.n_grid
        raw_src = raw[i]
        raw_dst = raw[i + 1] if i + 1 < len(raw) else eps
        sigma_src = sigmas[i]
        segment = F(raw_src - raw_dst)
        # DXPolicy: the segment measured from the unwarped source level
        t_src = _unwarp(sigma_src, shift)
        t_dst = max(F(t_src - segment), F(0))
        seg_size = max(F(t_src - t_dst), eps)
        # policy_rollout_fm
        delta = F(raw_src - raw_dst)
        count = max(int(np.round(F(delta * F(self.num_policy_substeps)))), 1)
        size = F(delta / F(count))
        out = {k: [] for k in ("sigma", "sigma_next", "lo", "w_lo", "w_hi")}
        r, s = F(raw_src), F(sigma_src)
        for _ in range(count):
            t = F((_unwarp(s, shift) - t_dst) / seg_size)
            t = F(min(max(t, F(0)), F(1)) * F(n - 1))
            lo = min(max(int(np.floor(t)), 0), n - 2)
            r_next = max(F(r - size), F(0))
            s_next = _shift(r_next, shift)[()]
            out["sigma"].append(s)
            out["sigma_next"].append(s_next)
            out["lo"].append(lo)
            out["w_lo"].append(F(F(lo + 1) - t))
            out["w_hi"].append(F(t - F(lo)))
            r, s = r_next, s_next
        return {k: np.asarray(v) for k, v in out.items()}

    # ---------------------------------------------------------------- device
    def step(self, plan_arrays, state, i, model_output, sample, noise=None):
        """Integrate the policy of this step's grid predictions across the step's segment."""
        n = self.n_grid
        x = sample.astype(jnp.float32)
        c = x.shape[-1]
        if model_output.shape[:-1] != x.shape[:-1] or model_output.shape[-1] != n * c:
            raise ValueError(f"piflow: the model output {tuple(model_output.shape)} must hold n_grid={n} "
                             f"predictions per channel of the sample {tuple(x.shape)} (channels last)")
        v = model_output.astype(jnp.float32).reshape(*x.shape[:-1], n, c)
        sigma_src = gather(plan_arrays, "sigmas", i)
        grid = x[..., None, :] - sigma_src * v  # (..., n, C): the clean estimates
        tables = {k: gather(plan_arrays, k, i) for k in ("sigma", "sigma_next", "lo", "w_lo", "w_hi", "active")}
        eps = jnp.float32(self.eps)

        def substep(k, xt):
            s, s_next = tables["sigma"][k], tables["sigma_next"][k]
            lo = tables["lo"][k]
            g_lo = jax.lax.dynamic_index_in_dim(grid, lo, axis=-2, keepdims=False)
            g_hi = jax.lax.dynamic_index_in_dim(grid, lo + 1, axis=-2, keepdims=False)
            x0 = tables["w_lo"][k] * g_lo + tables["w_hi"][k] * g_hi
            velocity = (xt - x0) / jnp.maximum(s, eps)
            return jnp.where(tables["active"][k], xt + velocity * (s_next - s), xt)

        x = jax.lax.fori_loop(0, plan_arrays["sigma"].shape[1], substep, x)
        return x.astype(sample.dtype), state


register_sampler("piflow", PiflowSampler)


def _from_config(cfg: dict) -> PiflowSampler:
    r = ConfigReader("PiflowScheduler", cfg)
    opts = {name: r.take(name, default) for name, default in (
        ("num_train_timesteps", 1000), ("shift", 5.0), ("n_grid", 10), ("eps", 1e-6),
        ("final_step_size_scale", 0.5), ("num_policy_substeps", 128))}
    r.finish()
    try:
        return PiflowSampler(**{k: v for k, v in opts.items() if v is not None})
    except ValueError as exc:
        raise SchedulerConfigError(f"PiflowScheduler: {exc}") from None


register_scheduler_class("PiflowScheduler", _from_config)
