"""DPM-Solver++ multistep (diffusers ``DPMSolverMultistepScheduler``, ``algorithm_type="dpmsolver++"``).

Orders 1-3, ``solver_type`` midpoint / heun, ``lower_order_final`` / ``euler_at_final``, VP (beta) schedules
with epsilon / sample / v prediction and Karras / exponential / beta / Lu-lambda spacing, and flow sigmas
(``use_flow_sigmas`` + ``flow_shift``, flow prediction) as Wan-style pipelines configure it.

All per-step scalars (``sigma_t / sigma_s0``, ``alpha_t (e^-h - 1)``, ``1/r0``, ...) are computed on the host in
float32 in diffusers' operation order. The device step is one fixed combination::

    D1_0 = (1/r0) (m0 - m1);   D1_1 = (1/r1) (m1 - m2)
    D1   = D1_0 + k (D1_0 - D1_1);   D2 = q (D1_0 - D1_1)
    x_t  = A x - B m0 + C D1 - E D2

where lower orders simply have zero ``k, q, C, E`` (and ``1/r``), so a whole run compiles once.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from vidax_core.schedulers.base import (ConfigReader, Sampler, SamplerPlan, SchedulerConfigError, gather,
                                        register_sampler, register_scheduler_class)
from vidax_core.schedulers.sigmas import convert_sigmas, sigma_kind
from vidax_core.schedulers.unipc import _sigma_to_t
from vidax_core.schedulers.vp import VPSchedule

__all__ = ["DPMSolverSampler"]

_F = np.float32
_PREDICTIONS = ("epsilon", "sample", "v_prediction", "flow_prediction")


@dataclass(frozen=True)
class DPMSolverSampler(Sampler):
    """DPM-Solver++ multistep. Options and defaults mirror ``DPMSolverMultistepScheduler``'s config.

    ``plan(num_steps, mu=None)``: with ``use_dynamic_shifting`` (flow sigmas) ``mu`` sets
    ``flow_shift = exp(mu)`` for that plan, as diffusers does.
    """

    name = "dpm_solver++"
    step_fields = ("solver_order", "prediction_type")

    solver_order: int = 2
    prediction_type: str = "epsilon"
    algorithm_type: str = "dpmsolver++"
    solver_type: str = "midpoint"
    lower_order_final: bool = True
    euler_at_final: bool = False
    final_sigmas_type: str = "zero"
    num_train_timesteps: int = 1000
    beta_start: float = 0.0001
    beta_end: float = 0.02
    beta_schedule: str = "linear"
    trained_betas: tuple[float, ...] | None = None
    rescale_betas_zero_snr: bool = False
    timestep_spacing: str = "linspace"
    steps_offset: int = 0
    lambda_min_clipped: float = -float("inf")
    use_karras_sigmas: bool = False
    use_exponential_sigmas: bool = False
    use_beta_sigmas: bool = False
    use_lu_lambdas: bool = False
    use_flow_sigmas: bool = False
    flow_shift: float = 1.0
    use_dynamic_shifting: bool = False
    time_shift_type: str = "exponential"

    def __post_init__(self):
        if self.trained_betas is not None:
            object.__setattr__(self, "trained_betas", tuple(float(b) for b in self.trained_betas))
        if self.solver_order not in (1, 2, 3):
            raise ValueError(f"dpm_solver++ solver_order must be 1, 2 or 3, got {self.solver_order}")
        if self.algorithm_type != "dpmsolver++":
            raise ValueError(f"dpm_solver++ algorithm_type must be 'dpmsolver++', got {self.algorithm_type!r}")
        if self.solver_type not in ("midpoint", "heun"):
            raise ValueError(f"dpm_solver++ solver_type must be 'midpoint' or 'heun', got {self.solver_type!r}")
        if self.prediction_type not in _PREDICTIONS:
            raise ValueError(f"dpm_solver++ prediction_type must be one of {', '.join(_PREDICTIONS)}, "
                             f"got {self.prediction_type!r}")
        if self.final_sigmas_type not in ("zero", "sigma_min"):
            raise ValueError("dpm_solver++ final_sigmas_type must be 'zero' or 'sigma_min', "
                             f"got {self.final_sigmas_type!r}")
        if self.timestep_spacing not in ("linspace", "leading", "trailing"):
            raise ValueError("dpm_solver++ timestep_spacing must be linspace, leading or trailing, "
                             f"got {self.timestep_spacing!r}")
        if self.time_shift_type != "exponential":
            raise ValueError("dpm_solver++ time_shift_type must be 'exponential'")
        kind = sigma_kind(self.use_karras_sigmas, self.use_exponential_sigmas, self.use_beta_sigmas)
        if self.use_flow_sigmas and (kind is not None or self.use_lu_lambdas):
            raise ValueError("dpm_solver++: use_flow_sigmas cannot be combined with "
                             "karras / exponential / beta / lu spacing")
        if self.prediction_type == "flow_prediction" and not self.use_flow_sigmas:
            raise ValueError("dpm_solver++ prediction_type='flow_prediction' needs use_flow_sigmas=True")

    # ------------------------------------------------------------------ host: schedule
    def _vp(self) -> VPSchedule:
        return VPSchedule.make(self.num_train_timesteps, self.beta_start, self.beta_end, self.beta_schedule,
                               self.trained_betas, self.rescale_betas_zero_snr)

    def _alpha_sigma(self, s):
        if self.use_flow_sigmas:
            return _F(1) - s, s
        alpha = _F(1) / ((s * s + _F(1)) ** _F(0.5))
        return alpha, s * alpha

    def schedule(self, num_steps: int, mu: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(timesteps int64 (N,), sigmas float32 (N+1,))`` exactly as ``set_timesteps`` builds them."""
        if num_steps is None or num_steps < 1:
            raise ValueError("num_steps must be >= 1")
        N, T = num_steps, self.num_train_timesteps
        flow_shift = self.flow_shift
        if mu is not None:
            if not self.use_dynamic_shifting:
                raise ValueError("dpm_solver++: `mu` needs use_dynamic_shifting=True")
            flow_shift = np.exp(mu)
        vp = self._vp()
        abar = vp.alphas_cumprod
        with np.errstate(divide="ignore"):
            lambda_t = np.log(np.sqrt(abar)) - np.log(np.sqrt(_F(1) - abar))
        clipped_idx = int(np.searchsorted(np.flip(lambda_t), self.lambda_min_clipped, side="left"))
        last_timestep = T - clipped_idx
        if self.timestep_spacing == "linspace":
            ts = np.linspace(0, last_timestep - 1, N + 1).round()[::-1][:-1].copy().astype(np.int64)
        elif self.timestep_spacing == "leading":
            ratio = last_timestep // (N + 1)
            ts = (np.arange(0, N + 1) * ratio).round()[::-1][:-1].copy().astype(np.int64) + self.steps_offset
        else:
            ratio = T / N
            ts = np.arange(last_timestep, 0, -ratio).round().copy().astype(np.int64) - 1
        sig = vp.sigmas.copy()
        log_sigmas = np.log(sig)
        kind = sigma_kind(self.use_karras_sigmas, self.use_exponential_sigmas, self.use_beta_sigmas)
        if kind is not None:
            s = convert_sigmas(kind, np.flip(sig).copy(), N)
            ts = np.array([_sigma_to_t(x, log_sigmas) for x in s])
            if kind == "karras" and self.beta_schedule != "squaredcos_cap_v2":
                ts = ts.round()
        elif self.use_lu_lambdas:
            lambdas = np.flip(log_sigmas.copy())
            lmin, lmax = lambdas[-1].item(), lambdas[0].item()
            lam = lmax + np.linspace(0, 1, N) * (lmin - lmax)
            s = np.exp(lam)
            ts = np.array([_sigma_to_t(x, log_sigmas) for x in s])
            if self.beta_schedule != "squaredcos_cap_v2":
                ts = ts.round()
        elif self.use_flow_sigmas:
            alphas = np.linspace(1, 1 / T, N + 1)
            s = 1.0 - alphas
            s = np.flip(flow_shift * s / (1 + (flow_shift - 1) * s))[:-1].copy()
            ts = (s * T).copy()
        else:
            s = np.interp(ts, np.arange(0, len(sig)), sig)
        last = vp.sigma_first if self.final_sigmas_type == "sigma_min" else 0
        s = np.concatenate([s, [last]]).astype(np.float32)
        ts = np.trunc(np.asarray(ts, dtype=np.float64)).astype(np.int64)
        return ts, s

    def orders(self, num_steps: int) -> np.ndarray:
        """Solver order at each step (warm-up, lower_order_final / euler_at_final, as diffusers' ``step``)."""
        N, K = num_steps, self.solver_order
        out = []
        for i in range(N):
            lof = i == N - 1 and (self.euler_at_final or (self.lower_order_final and N < 15)
                                  or self.final_sigmas_type == "zero")
            los = i == N - 2 and self.lower_order_final and N < 15
            lon = min(i, K)
            if K == 1 or lon < 1 or lof:
                out.append(1)
            elif K == 2 or lon < 2 or los:
                out.append(2)
            else:
                out.append(3)
        return np.asarray(out, dtype=np.int32)

    def plan(self, num_steps: int, *, mu: float | None = None) -> SamplerPlan:
        ts, sig = self.schedule(num_steps, mu=mu)
        N = len(ts)
        orders = self.orders(N)
        one = _F(1)
        cols = {k: np.zeros(N, _F) for k in ("A", "B", "C", "E", "inv_r0", "inv_r1", "k", "q")}
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            al_sg = [self._alpha_sigma(s) for s in sig]
            lam = np.array([np.log(a) - np.log(s) for a, s in al_sg], dtype=_F)
            for i in range(N):
                alpha_t, sigma_t = al_sg[i + 1]
                _, sigma_s0 = al_sg[i]
                h = lam[i + 1] - lam[i]
                em1 = np.exp(-h) - one
                cols["A"][i] = sigma_t / sigma_s0
                cols["B"][i] = alpha_t * em1
                o = orders[i]
                if o == 2:
                    r0 = (lam[i] - lam[i - 1]) / h
                    cols["inv_r0"][i] = one / r0
                    if self.solver_type == "midpoint":
                        cols["C"][i] = -(_F(0.5) * (alpha_t * em1))
                    else:
                        cols["C"][i] = alpha_t * (em1 / h + one)
                elif o == 3:
                    r0 = (lam[i] - lam[i - 1]) / h
                    r1 = (lam[i - 1] - lam[i - 2]) / h
                    cols["inv_r0"][i] = one / r0
                    cols["inv_r1"][i] = one / r1
                    cols["k"][i] = r0 / (r0 + r1)
                    cols["q"][i] = one / (r0 + r1)
                    cols["C"][i] = alpha_t * (em1 / h + one)
                    cols["E"][i] = alpha_t * ((np.exp(-h) - one + h) / h ** 2 - _F(0.5))
            conv_alpha = np.array([a for a, _ in al_sg[:N]], dtype=_F)
            conv_sigma = np.array([s for _, s in al_sg[:N]], dtype=_F)
        extras = {f"dpm_{k}": v for k, v in cols.items()}
        extras.update(conv_alpha=conv_alpha, conv_sigma=conv_sigma, orders=orders)
        return SamplerPlan(timesteps=ts.astype(np.float32), sigmas=sig, num_steps=N, extras=extras)

    # ---------------------------------------------------------------- device
    def init_state(self, plan: SamplerPlan, sample):
        return {"hist": jnp.zeros((self.solver_order, *jnp.shape(sample)), jnp.float32)}

    def _convert(self, pa, i, model_output, sample):
        """Model output -> x0 prediction (diffusers' ``convert_model_output`` for dpmsolver++)."""
        p = self.prediction_type
        if p == "sample":
            return model_output
        if p == "flow_prediction":
            return sample - gather(pa, "sigmas", i) * model_output
        alpha = gather(pa, "conv_alpha", i)
        sigma = gather(pa, "conv_sigma", i)
        if p == "epsilon":
            return (sample - sigma * model_output) / alpha
        return alpha * sample - sigma * model_output  # v_prediction

    def step(self, plan_arrays, state, i, model_output, sample, noise=None):
        pa = plan_arrays
        m0 = self._convert(pa, i, model_output.astype(jnp.float32), sample.astype(jnp.float32))
        hist = jnp.concatenate([state["hist"][1:], m0[None]], axis=0)
        x = sample.astype(jnp.float32)
        g = lambda k: gather(pa, f"dpm_{k}", i)  # noqa: E731
        x_t = g("A") * x - g("B") * m0
        K = self.solver_order
        if K >= 2:
            m1 = hist[K - 2]
            d10 = g("inv_r0") * (m0 - m1)
            if K == 3:
                m2 = hist[K - 3]
                d11 = g("inv_r1") * (m1 - m2)
                d1 = d10 + g("k") * (d10 - d11)
                d2 = g("q") * (d10 - d11)
                x_t = x_t + g("C") * d1 - g("E") * d2
            else:
                x_t = x_t + g("C") * d10
        return x_t.astype(sample.dtype), {"hist": hist}


register_sampler("dpm_solver++", DPMSolverSampler)


_DPM_DEFAULTS = dict(
    num_train_timesteps=1000, beta_start=0.0001, beta_end=0.02, beta_schedule="linear", trained_betas=None,
    solver_order=2, prediction_type="epsilon", algorithm_type="dpmsolver++", solver_type="midpoint",
    lower_order_final=True, euler_at_final=False, use_karras_sigmas=False, use_exponential_sigmas=False,
    use_beta_sigmas=False, use_lu_lambdas=False, use_flow_sigmas=False, flow_shift=1.0, final_sigmas_type="zero",
    lambda_min_clipped=-float("inf"), timestep_spacing="linspace", steps_offset=0, rescale_betas_zero_snr=False,
    use_dynamic_shifting=False, time_shift_type="exponential",
)


def _from_config(cfg: dict) -> DPMSolverSampler:
    r = ConfigReader("DPMSolverMultistepScheduler", cfg, cosmetic=("dynamic_thresholding_ratio", "sample_max_value"))
    opts = {}
    for name, default in _DPM_DEFAULTS.items():
        v = r.take(name, default)
        opts[name] = default if (v is None and default is not None) else v
    r.require_default("thresholding", False)
    r.require_default("variance_type", None)
    r.finish()
    if opts["algorithm_type"] == "deis":  # diffusers silently maps deis to dpmsolver++
        opts["algorithm_type"] = "dpmsolver++"
    if opts["algorithm_type"] != "dpmsolver++":
        raise SchedulerConfigError(
            f"DPMSolverMultistepScheduler: algorithm_type={opts['algorithm_type']!r} "
            "is not supported (supported: dpmsolver++)")
    if opts["solver_type"] in ("logrho", "bh1", "bh2"):  # diffusers silently maps these to midpoint
        opts["solver_type"] = "midpoint"
    try:
        return DPMSolverSampler(**opts)
    except ValueError as e:
        raise SchedulerConfigError(f"DPMSolverMultistepScheduler: {e}") from None


register_scheduler_class("DPMSolverMultistepScheduler", _from_config)
