"""CogVideoX samplers: diffusers ``CogVideoXDDIMScheduler`` and ``CogVideoXDPMScheduler``.

Both use a VP schedule whose ``alphas_cumprod`` is SNR-shifted (``abar / (s + (1 - s) abar)``,
``snr_shift_scale``) and optionally rescaled to zero terminal SNR (on ``abar`` directly, unlike the other
schedulers), in the dtype diffusers uses (float64 for ``scaled_linear`` betas, float32 otherwise). The model
is fed the sample unchanged and the integer timestep (``plan.timesteps`` holds float32 copies of the
integers). The step moves from ``t`` to ``t - T // N`` (which for ``trailing`` spacing is not always the next
timestep, as in diffusers); below 0 it lands on ``final_alpha_cumprod``.

* DDIM (deterministic; CogVideoX's ``eta`` is ignored by diffusers and by vidax)::

      x0 = sqrt(abar_t) x - sqrt(1 - abar_t) v                      (v_prediction)
      x_prev = sqrt((1 - abar_p) / (1 - abar_t)) x + (sqrt(abar_p) - sqrt(abar_t) a_t) x0

* DPM (stochastic, 2nd order through the previous step's x0 prediction, kept as state ``old_x0``)::

      h = lambda_p - lambda_t,  r = h_last / h
      d = (1 + 1/(2r)) x0 - 1/(2r) old_x0          (first step / last step: d = x0)
      x_prev = sqrt((1-abar_p)/(1-abar_t)) e^-h x - expm1(-2h) sqrt(abar_p) d + sqrt(1-abar_p) sqrt(1-e^-2h) noise

  diffusers draws a noise tensor before deciding whether the second-order branch runs and then draws a second
  one for it, so a second-order step consumes two draws and uses the second; vidax's ``step`` takes the one
  noise array actually used.

``plan.sigmas`` holds ``sqrt((1 - abar) / abar)`` at each step's timestep plus the level the last step lands on
(``inf`` at zero terminal SNR, 0 when ``set_alpha_to_one``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from vidax_core.schedulers.base import (ConfigReader, Sampler, SamplerPlan, SchedulerConfigError, _check_noise, gather,
                                        register_sampler, register_scheduler_class)
from vidax_core.schedulers.vp import betas_for_alpha_bar, torch_linspace

__all__ = ["CogVideoXDDIMSampler", "CogVideoXDPMSampler"]

_F = np.float32
_PREDICTIONS = ("epsilon", "sample", "v_prediction")


@dataclass(frozen=True)
class _CogVideoXBase(Sampler):
    """Shared options (defaults are diffusers' class defaults; CogVideoX checkpoints set v_prediction,
    zero terminal SNR and trailing spacing in their scheduler_config.json)."""

    step_fields = ("prediction_type",)

    num_train_timesteps: int = 1000
    beta_start: float = 0.00085
    beta_end: float = 0.012
    beta_schedule: str = "scaled_linear"
    trained_betas: tuple[float, ...] | None = None
    set_alpha_to_one: bool = True
    steps_offset: int = 0
    prediction_type: str = "epsilon"
    timestep_spacing: str = "leading"
    rescale_betas_zero_snr: bool = False
    snr_shift_scale: float = 3.0

    def __post_init__(self):
        if self.trained_betas is not None:
            object.__setattr__(self, "trained_betas", tuple(float(b) for b in self.trained_betas))
        if self.prediction_type not in _PREDICTIONS:
            raise ValueError(f"{self.name} prediction_type must be one of {', '.join(_PREDICTIONS)}, "
                             f"got {self.prediction_type!r}")
        if self.timestep_spacing not in ("linspace", "leading", "trailing"):
            raise ValueError(f"{self.name} timestep_spacing must be linspace, leading or trailing, "
                             f"got {self.timestep_spacing!r}")
        if self.beta_schedule not in ("linear", "scaled_linear", "squaredcos_cap_v2"):
            raise ValueError(f"{self.name} beta_schedule must be linear, scaled_linear or squaredcos_cap_v2, "
                             f"got {self.beta_schedule!r}")

    # ------------------------------------------------------------------ host
    def alphas_cumprod(self) -> tuple[np.ndarray, np.generic]:
        """``(alphas_cumprod, final_alpha_cumprod)`` in diffusers' dtypes."""
        T = self.num_train_timesteps
        if self.trained_betas is not None:
            betas = np.asarray(self.trained_betas, dtype=_F)
        elif self.beta_schedule == "linear":
            betas = torch_linspace(self.beta_start, self.beta_end, T, np.float32)
        elif self.beta_schedule == "scaled_linear":
            betas = torch_linspace(self.beta_start ** 0.5, self.beta_end ** 0.5, T, np.float64) ** 2
        else:
            betas = betas_for_alpha_bar(T)
        dt = betas.dtype.type
        alphas = dt(1.0) - betas
        abar = np.cumprod(alphas.astype(np.float64)).astype(dt)
        s = self.snr_shift_scale
        abar = abar / (dt(s) + dt(1 - s) * abar)
        if self.rescale_betas_zero_snr:
            sq = np.sqrt(abar)
            s0, sT = sq[0].copy(), sq[-1].copy()
            sq = sq - sT
            sq = sq * (s0 / (s0 - sT))
            abar = sq ** 2
        final = _F(1.0) if self.set_alpha_to_one else abar[0]
        return abar.astype(dt), final

    def schedule(self, num_steps: int) -> np.ndarray:
        """Integer timesteps (int64) exactly as ``set_timesteps`` builds them."""
        T, N = self.num_train_timesteps, num_steps
        if N is None or N < 1:
            raise ValueError("num_steps must be >= 1")
        if N > T:
            raise ValueError(f"{self.name}: num_steps={N} cannot exceed num_train_timesteps={T}")
        if self.timestep_spacing == "linspace":
            return np.linspace(0, T - 1, N).round()[::-1].copy().astype(np.int64)
        if self.timestep_spacing == "leading":
            ratio = T // N
            return (np.arange(0, N) * ratio).round()[::-1].copy().astype(np.int64) + self.steps_offset
        ratio = T / N
        return np.round(np.arange(T, 0, -ratio)).astype(np.int64) - 1

    def _walk(self, num_steps: int):
        """Per step: ``(abar_t, abar_prev, prev_timestep)`` and the SamplerPlan skeleton."""
        abar, final = self.alphas_cumprod()
        ts = self.schedule(num_steps)
        N = len(ts)
        jump = self.num_train_timesteps // N
        rows = []
        for i in range(N):
            t = int(ts[i])
            prev_t = t - jump
            rows.append((abar[t], abar[prev_t] if prev_t >= 0 else final, prev_t))
        with np.errstate(divide="ignore"):
            lv = [a for a, _, _ in rows] + [rows[-1][1]]
            sig = np.array([math.sqrt((1 - float(a)) / float(a)) if float(a) > 0 else math.inf for a in lv], dtype=_F)
        return ts, abar, rows, sig

    def _x0_coeffs(self, a_t):
        """``(c_x, c_m)`` of the x0 prediction, as float32 multipliers (diffusers rounds its scalars at the op)."""
        b_t = 1 - a_t
        p = self.prediction_type
        if p == "epsilon":  # (x - sqrt(b) m) / sqrt(a)
            return _F(a_t ** 0.5), _F(b_t ** 0.5)
        if p == "v_prediction":  # sqrt(a) x - sqrt(b) m
            return _F(a_t ** 0.5), _F(b_t ** 0.5)
        return _F(0), _F(0)

    # ---------------------------------------------------------------- device
    def _x0(self, pa, i, model_output, x):
        p = self.prediction_type
        if p == "sample":
            return model_output
        cx, cm = gather(pa, "x0_cx", i), gather(pa, "x0_cm", i)
        if p == "epsilon":
            return (x - cm * model_output) / cx
        return cx * x - cm * model_output


@dataclass(frozen=True)
class CogVideoXDDIMSampler(_CogVideoXBase):
    """Deterministic CogVideoX DDIM (``CogVideoXDDIMScheduler``)."""

    name = "cogvideox_ddim"

    def plan(self, num_steps: int) -> SamplerPlan:
        ts, abar, rows, sig = self._walk(num_steps)
        N = len(ts)
        cols = {k: np.zeros(N, _F) for k in ("x0_cx", "x0_cm", "ddim_a", "ddim_b")}
        with np.errstate(divide="ignore", invalid="ignore"):
            for i, (a_t, a_p, _) in enumerate(rows):
                cols["x0_cx"][i], cols["x0_cm"][i] = self._x0_coeffs(a_t)
                at = ((1 - a_p) / (1 - a_t)) ** 0.5
                bt = a_p ** 0.5 - a_t ** 0.5 * at
                cols["ddim_a"][i], cols["ddim_b"][i] = _F(at), _F(bt)
        return SamplerPlan(timesteps=ts.astype(_F), sigmas=sig, num_steps=N, extras=cols)

    def step(self, plan_arrays, state, i, model_output, sample, noise=None):
        pa = plan_arrays
        x = sample.astype(jnp.float32)
        x0 = self._x0(pa, i, model_output.astype(jnp.float32), x)
        prev = gather(pa, "ddim_a", i) * x + gather(pa, "ddim_b", i) * x0
        return prev.astype(sample.dtype), state


@dataclass(frozen=True)
class CogVideoXDPMSampler(_CogVideoXBase):
    """Stochastic CogVideoX DPM (``CogVideoXDPMScheduler``); state ``old_x0`` is the previous x0 prediction."""

    name = "cogvideox_dpm"

    @property
    def needs_noise(self) -> bool:
        return True

    def plan(self, num_steps: int) -> SamplerPlan:
        ts, abar, rows, sig = self._walk(num_steps)
        N = len(ts)
        cols = {k: np.zeros(N, _F) for k in ("x0_cx", "x0_cm", "dpm_m1", "dpm_m2", "dpm_m3", "dpm_m4", "dpm_noise")}
        second = np.zeros(N, bool)

        def lamb(a):
            return np.log((a / (1 - a)) ** 0.5)

        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            for i, (a_t, a_p, prev_t) in enumerate(rows):
                cols["x0_cx"][i], cols["x0_cm"][i] = self._x0_coeffs(a_t)
                lam_t = lamb(a_t)
                h = lamb(a_p) - lam_t
                cols["dpm_m1"][i] = _F(((1 - a_p) / (1 - a_t)) ** 0.5 * np.exp(-h))
                cols["dpm_m2"][i] = _F(np.expm1(-2 * h) * a_p ** 0.5)
                cols["dpm_noise"][i] = _F((1 - a_p) ** 0.5 * (1 - np.exp(-2 * h)) ** 0.5)
                if i > 0 and prev_t >= 0:
                    second[i] = True
                    h_last = lam_t - lamb(abar[int(ts[i - 1])])
                    r = h_last / h
                    cols["dpm_m3"][i] = _F(1 + 1 / (2 * r))
                    cols["dpm_m4"][i] = _F(1 / (2 * r))
                else:
                    cols["dpm_m3"][i], cols["dpm_m4"][i] = _F(1), _F(0)
        extras = dict(cols, second_order=second)
        return SamplerPlan(timesteps=ts.astype(_F), sigmas=sig, num_steps=N, extras=extras)

    def init_state(self, plan: SamplerPlan, sample):
        return {"old_x0": jnp.zeros(jnp.shape(sample), jnp.float32)}

    def step(self, plan_arrays, state, i, model_output, sample, noise=None):
        _check_noise(self, noise)
        pa = plan_arrays
        g = lambda k: gather(pa, f"dpm_{k}", i)  # noqa: E731
        x = sample.astype(jnp.float32)
        x0 = self._x0(pa, i, model_output.astype(jnp.float32), x)
        d = g("m3") * x0 - g("m4") * state["old_x0"]
        prev = g("m1") * x - g("m2") * d + g("noise") * noise.astype(jnp.float32)
        return prev.astype(sample.dtype), {"old_x0": x0}


register_sampler("cogvideox_ddim", CogVideoXDDIMSampler)
register_sampler("cogvideox_dpm", CogVideoXDPMSampler)


_COG_DEFAULTS = dict(
    num_train_timesteps=1000, beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", trained_betas=None,
    set_alpha_to_one=True, steps_offset=0, prediction_type="epsilon", timestep_spacing="leading",
    rescale_betas_zero_snr=False, snr_shift_scale=3.0,
)


def _cog_converter(cls_name: str, sampler_cls):
    def convert(cfg: dict):
        # clip_sample / clip_sample_range / sample_max_value are stored but never read by diffusers' step
        r = ConfigReader(cls_name, cfg, cosmetic=("clip_sample", "clip_sample_range", "sample_max_value"))
        opts = {}
        for name, default in _COG_DEFAULTS.items():
            v = r.take(name, default)
            opts[name] = default if (v is None and default is not None) else v
        r.finish()
        try:
            return sampler_cls(**opts)
        except ValueError as e:
            raise SchedulerConfigError(f"{cls_name}: {e}") from None

    return convert


register_scheduler_class("CogVideoXDDIMScheduler", _cog_converter("CogVideoXDDIMScheduler", CogVideoXDDIMSampler))
register_scheduler_class("CogVideoXDPMScheduler", _cog_converter("CogVideoXDPMScheduler", CogVideoXDPMSampler))
