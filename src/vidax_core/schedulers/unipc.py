"""UniPC multistep sampler (diffusers ``UniPCMultistepScheduler``), predictor + corrector.

All scalar work (lambdas, ``h``, the B(h) variant, the order ramp, the ``rk`` ratios and the
predictor / corrector weights ``rhos``, obtained from small linear solves) is done on the host in
float32, in the same operation order diffusers uses, and stored per step in the plan. The device
step is then a fixed linear combination of the sample, the previous sample and the last
``solver_order`` converted model outputs; lower orders use zero weights, so one compiled step
serves every step of the run.

Noise-level conventions:

* ``use_flow_sigmas=True`` (Wan, Cosmos): ``alpha = 1 - sigma``, ``sigma_t = sigma``;
* otherwise VP (``sigma = sqrt((1 - abar) / abar)``): ``alpha = 1/sqrt(1 + sigma^2)``,
  ``sigma_t = sigma * alpha``.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from .base import (
    ConfigReader,
    Sampler,
    SamplerPlan,
    SchedulerConfigError,
    calculate_shift,
    gather,
    register_sampler,
    register_scheduler_class,
)
from vidax_core.schedulers.sigmas import convert_sigmas, shift_sigmas, sigma_kind, stretch_to_terminal, time_shift
from vidax_core.schedulers.vp import VPSchedule

__all__ = ["UniPCSampler"]

_F = np.float32
_PREDICTIONS = ("epsilon", "sample", "v_prediction", "flow_prediction")


@dataclass(frozen=True)
class UniPCSampler(Sampler):
    """UniPC (bh1 / bh2, orders 1-3) with the UniC corrector.

    Defaults are Wan's: flow prediction on flow sigmas with ``flow_shift=3.0``, order 2, bh2.
    ``use_corrector=False`` disables the corrector everywhere; ``disable_corrector`` lists step
    indices ``k`` whose result is not corrected (diffusers semantics: the corrector that would run
    at the start of step ``k+1`` is skipped).

    ``last_in_place``: the sample a step keeps for the next step's corrector is its own output whenever the step
    ran no corrector (the first step, and after a disabled one). diffusers' SkyReels-V2 diffusion-forcing loop
    works so: it writes each frame's update into the latents its per-frame scheduler holds as ``last_sample``.
    """

    name = "unipc"
    step_fields = ("solver_order", "prediction_type", "predict_x0", "use_corrector", "last_in_place")

    solver_order: int = 2
    solver_type: str = "bh2"
    prediction_type: str = "flow_prediction"
    predict_x0: bool = True
    lower_order_final: bool = True
    use_corrector: bool = True
    disable_corrector: tuple[int, ...] = ()
    final_sigmas_type: str = "zero"
    num_train_timesteps: int = 1000
    # flow sigmas
    use_flow_sigmas: bool = True
    flow_shift: float = 3.0
    use_dynamic_shifting: bool = False
    time_shift_type: str = "exponential"
    shift_terminal: float | None = None
    # VP (beta) schedule, used when use_flow_sigmas=False or for Karras / exponential / beta spacing
    beta_start: float = 0.0001
    beta_end: float = 0.02
    beta_schedule: str = "linear"
    trained_betas: tuple[float, ...] | None = None
    rescale_betas_zero_snr: bool = False
    timestep_spacing: str = "linspace"
    steps_offset: int = 0
    use_karras_sigmas: bool = False
    use_exponential_sigmas: bool = False
    use_beta_sigmas: bool = False
    sigma_min: float | None = None
    sigma_max: float | None = None
    last_in_place: bool = False
    #: the model timestep of a flow sigma is ``sigma x T`` cut to an integer, as diffusers casts it; HeliosScheduler
    #: keeps the float
    integer_timesteps: bool = True

    def __post_init__(self):
        object.__setattr__(self, "disable_corrector", tuple(int(k) for k in self.disable_corrector))
        if self.trained_betas is not None:
            object.__setattr__(self, "trained_betas", tuple(float(b) for b in self.trained_betas))
        if self.solver_order not in (1, 2, 3):
            raise ValueError(f"unipc solver_order must be 1, 2 or 3, got {self.solver_order}")
        if self.solver_type not in ("bh1", "bh2"):
            raise ValueError(f"unipc solver_type must be 'bh1' or 'bh2', got {self.solver_type!r}")
        if self.prediction_type not in _PREDICTIONS:
            raise ValueError(f"unipc prediction_type must be one of {', '.join(_PREDICTIONS)}, "
                             f"got {self.prediction_type!r}")
        if self.prediction_type == "flow_prediction" and not self.use_flow_sigmas:
            raise ValueError("unipc prediction_type='flow_prediction' needs use_flow_sigmas=True")
        if not self.predict_x0 and self.prediction_type == "flow_prediction":
            raise ValueError("unipc predict_x0=False does not support flow_prediction")
        if self.final_sigmas_type not in ("zero", "sigma_min"):
            raise ValueError(f"unipc final_sigmas_type must be 'zero' or 'sigma_min', got {self.final_sigmas_type!r}")
        if self.timestep_spacing not in ("linspace", "leading", "trailing"):
            raise ValueError("unipc timestep_spacing must be linspace, leading or trailing, "
                             f"got {self.timestep_spacing!r}")
        if self.time_shift_type not in ("exponential", "linear"):
            raise ValueError(f"time_shift_type must be 'exponential' or 'linear', got {self.time_shift_type!r}")
        if self.shift_terminal is not None and not self.use_flow_sigmas:
            raise ValueError("shift_terminal needs use_flow_sigmas=True")
        sigma_kind(self.use_karras_sigmas, self.use_exponential_sigmas, self.use_beta_sigmas)

    # ------------------------------------------------------------------ host: schedule
    def _vp(self) -> VPSchedule:
        return VPSchedule.make(self.num_train_timesteps, self.beta_start, self.beta_end, self.beta_schedule,
                               self.trained_betas, self.rescale_betas_zero_snr)

    def _alpha_sigma(self, s: np.float32) -> tuple[np.float32, np.float32]:
        if self.use_flow_sigmas:
            return _F(1) - s, s
        alpha = _F(1) / ((s * s + _F(1)) ** _F(0.5))
        return alpha, s * alpha

    def schedule(self, num_steps: int, sigmas=None, mu=None, seq_len=None) -> tuple[np.ndarray, np.ndarray]:
        """``(timesteps (N,), sigmas float32 (N+1,))`` exactly as ``set_timesteps`` builds them (int64 timesteps
        unless ``integer_timesteps`` is off)."""
        T = self.num_train_timesteps
        if self.use_dynamic_shifting and mu is None:
            if seq_len is None:
                raise ValueError("unipc with use_dynamic_shifting needs `mu` or `seq_len` in plan()")
            mu = calculate_shift(seq_len)
        if sigmas is not None:
            if not self.use_flow_sigmas:
                raise ValueError("custom sigmas need use_flow_sigmas=True")
            num_steps = len(sigmas)
        if num_steps is None or num_steps < 1:
            raise ValueError("num_steps must be >= 1")
        N = num_steps
        if self.timestep_spacing == "linspace":
            ts = np.linspace(0, T - 1, N + 1).round()[::-1][:-1].copy().astype(np.int64)
        elif self.timestep_spacing == "leading":
            ratio = T // (N + 1)
            ts = (np.arange(0, N + 1) * ratio).round()[::-1][:-1].copy().astype(np.int64)
            ts += self.steps_offset
        else:
            ratio = T / N
            ts = np.arange(T, 0, -ratio).round().copy().astype(np.int64) - 1

        kind = sigma_kind(self.use_karras_sigmas, self.use_exponential_sigmas, self.use_beta_sigmas)
        if kind is not None:
            vp = self._vp()
            base = np.asarray(sigmas, dtype=np.float64) if sigmas is not None else vp.sigmas.copy()
            log_sigmas = np.log(base)
            s = convert_sigmas(kind, np.flip(base).copy(), N, self.sigma_min, self.sigma_max)
            if kind == "karras" and self.use_flow_sigmas:
                s = s / (s + 1)
                ts = s * T
            elif kind == "karras":
                ts = np.array([_sigma_to_t(x, log_sigmas) for x in s]).round()
            else:
                ts = np.array([_sigma_to_t(x, log_sigmas) for x in s])
            last = s[-1] if self.final_sigmas_type == "sigma_min" else 0
            s = np.concatenate([s, [last]]).astype(np.float32)
        elif self.use_flow_sigmas:
            if sigmas is None:
                s = np.linspace(1, 1 / T, N + 1)[:-1]
            else:
                s = np.asarray(sigmas, dtype=np.float64).copy()
            if self.use_dynamic_shifting:
                s = time_shift(s, mu, self.time_shift_type)
            else:
                s = shift_sigmas(s, self.flow_shift)
            if self.shift_terminal:
                s = stretch_to_terminal(s, self.shift_terminal)
            s = np.array(s, dtype=np.float64)
            if np.fabs(s[0] - 1) < 1e-6:
                s[0] -= 1e-6
            ts = s * T
            last = s[-1] if self.final_sigmas_type == "sigma_min" else 0
            s = np.concatenate([s, [last]]).astype(np.float32)
        else:
            vp = self._vp()
            s = np.interp(ts, np.arange(0, len(vp.sigmas)), vp.sigmas)
            last = vp.sigma_first if self.final_sigmas_type == "sigma_min" else 0
            s = np.concatenate([s, [last]]).astype(np.float32)
        ts = np.asarray(ts, dtype=np.float64)
        if self.integer_timesteps:  # torch's float -> int64 conversion truncates toward zero
            ts = np.trunc(ts).astype(np.int64)
        return ts, s

    def orders(self, num_steps: int) -> np.ndarray:
        """Predictor order used at each step (warm-up ramp, lower_order_final)."""
        N = num_steps
        out = []
        for i in range(N):
            cap = min(self.solver_order, N - i) if self.lower_order_final else self.solver_order
            out.append(min(cap, i + 1))
        return np.asarray(out, dtype=np.int32)

    # ------------------------------------------------------------------ host: coefficients
    def _coeffs(self, lam: np.ndarray, sig: np.ndarray, t_idx: int, s0_idx: int, hist_idx: list[int],
                order: int, corrector: bool):
        """UniP / UniC weights for a step from ``sig[s0_idx]`` to ``sig[t_idx]`` (float32, diffusers' op order).

        Returns ``(ratio, a, c, rks[K-1], rhos[K-1], rho_t)`` for
        ``x_t = ratio*x - a*m0 - c*(sum_k rhos_k (m_k - m0)/rk_k + rho_t*(m_t - m0))``.
        """
        K = self.solver_order
        alpha_t, sigma_t = self._alpha_sigma(sig[t_idx])
        alpha_s0, sigma_s0 = self._alpha_sigma(sig[s0_idx])
        h = lam[t_idx] - lam[s0_idx]
        rks = np.ones(max(K - 1, 0), _F)
        rhos = np.zeros(max(K - 1, 0), _F)
        if self.predict_x0:
            ratio, scale = sigma_t / sigma_s0, alpha_t
        else:
            ratio, scale = alpha_t / alpha_s0, sigma_t
        if h == 0:  # zero-length step (final_sigmas_type="sigma_min"): identity
            return _F(1), _F(0), _F(0), rks, rhos, _F(0)
        rk_list = [(lam[j] - lam[s0_idx]) / h for j in hist_idx[: order - 1]]
        hh = -h if self.predict_x0 else h
        h_phi_1 = np.expm1(hh)
        h_phi_k = h_phi_1 / hh - _F(1)
        B_h = hh if self.solver_type == "bh1" else np.expm1(hh)
        R, b = [], []
        rk_all = np.array(rk_list + [_F(1)], dtype=_F)
        fact = 1
        for k in range(1, order + 1):
            R.append(rk_all ** (k - 1))
            b.append(h_phi_k * _F(fact) / B_h)
            fact *= k + 1
            h_phi_k = h_phi_k / hh - _F(1 / fact)
        R = np.stack(R).astype(_F)
        b = np.array(b, dtype=_F)
        a = scale * h_phi_1
        c = scale * B_h
        rho_t = _F(0)
        if corrector:
            if order == 1:
                rho_t = _F(0.5)
            else:
                sol = np.linalg.solve(R, b).astype(_F)
                rhos[: order - 1] = sol[:-1]
                rho_t = sol[-1]
        else:
            if order == 2:
                rhos[0] = _F(0.5)
            elif order == 3:
                rhos[:2] = np.linalg.solve(R[:-1, :-1], b[:-1]).astype(_F)
            if order == 1:
                c = _F(0)  # no history term (also avoids 0 * inf when the target sigma is 0 with bh1)
        rks[: order - 1] = np.array(rk_list, dtype=_F)
        return _F(ratio), _F(a), _F(c), rks, rhos, _F(rho_t)

    def plan(self, num_steps: int | None = None, *, sigmas=None, mu: float | None = None,
             seq_len: int | None = None) -> SamplerPlan:
        ts, sig = self.schedule(num_steps, sigmas=sigmas, mu=mu, seq_len=seq_len)
        N = len(ts)
        K = self.solver_order
        orders = self.orders(N)
        if sig[N] == 0:
            # The last step lands on sigma=0 where lambda=inf: multistep terms are undefined there
            # (diffusers yields NaN). Fall back to first order, as lower_order_final does.
            orders[N - 1] = 1
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            alphas_sigmas = [self._alpha_sigma(s) for s in sig]
            lam = np.array([np.log(a) - np.log(s) for a, s in alphas_sigmas], dtype=_F)
            conv_alpha = np.array([a for a, _ in alphas_sigmas[:N]], dtype=_F)
            conv_sigma = np.array([s for _, s in alphas_sigmas[:N]], dtype=_F)
            P = {k: [] for k in ("p_ratio", "p_a", "p_c", "p_rk", "p_rho")}
            C = {k: [] for k in ("c_on", "c_ratio", "c_a", "c_c", "c_rk", "c_rho", "c_rho_t")}
            disabled = set(self.disable_corrector)
            for i in range(N):
                ratio, a, c, rks, rhos, _ = self._coeffs(lam, sig, i + 1, i, [i - k for k in range(1, K)],
                                                         int(orders[i]), corrector=False)
                for key, v in zip(("p_ratio", "p_a", "p_c", "p_rk", "p_rho"), (ratio, a, c, rks, rhos)):
                    P[key].append(v)
                on = self.use_corrector and i > 0 and (i - 1) not in disabled
                if on:
                    ratio, a, c, rks, rhos, rho_t = self._coeffs(lam, sig, i, i - 1, [i - 1 - k for k in range(1, K)],
                                                                 int(orders[i - 1]), corrector=True)
                else:
                    ratio, a, c = _F(0), _F(0), _F(0)
                    rks, rhos, rho_t = np.ones(K - 1, _F), np.zeros(K - 1, _F), _F(0)
                for key, v in zip(("c_on", "c_ratio", "c_a", "c_c", "c_rk", "c_rho", "c_rho_t"),
                                  (on, ratio, a, c, rks, rhos, rho_t)):
                    C[key].append(v)
        extras = {k: np.asarray(v, dtype=_F).reshape(N, -1) if k.endswith(("rk", "rho")) else np.asarray(v, dtype=_F)
                  for k, v in {**P, **C}.items() if k != "c_on"}
        extras["c_on"] = np.asarray(C["c_on"], dtype=bool)
        extras["conv_alpha"] = conv_alpha
        extras["conv_sigma"] = conv_sigma
        extras["orders"] = orders
        return SamplerPlan(timesteps=ts.astype(np.float32), sigmas=sig, num_steps=N, extras=extras)

    # ---------------------------------------------------------------- device
    def init_state(self, plan: SamplerPlan, sample):
        shape = jnp.shape(sample)
        return {
            "hist": jnp.zeros((self.solver_order, *shape), jnp.float32),
            "last": jnp.zeros(shape, jnp.float32),
        }

    def _convert(self, pa, i, model_output, sample):
        """Model output -> x0 prediction (predict_x0) or epsilon, diffusers' ``convert_model_output``."""
        alpha = gather(pa, "conv_alpha", i)
        sigma = gather(pa, "conv_sigma", i)
        p = self.prediction_type
        if self.predict_x0:
            if p == "epsilon":
                return (sample - sigma * model_output) / alpha
            if p == "sample":
                return model_output
            if p == "v_prediction":
                return alpha * sample - sigma * model_output
            return sample - gather(pa, "sigmas", i) * model_output  # flow_prediction
        if p == "epsilon":
            return model_output
        if p == "sample":
            return (sample - alpha * model_output) / sigma
        return alpha * model_output + sigma * sample  # v_prediction

    @staticmethod
    def _history_sum(hist, m0, rks, rhos):
        """``sum_k rhos[k] * (hist[-(k+2)] - m0) / rks[k]`` over the K-1 older outputs (zeros if none)."""
        K = hist.shape[0]
        acc = None
        for k in range(K - 1):
            term = rhos[k] * ((hist[K - 2 - k] - m0) / rks[k])
            acc = term if acc is None else acc + term
        return jnp.zeros_like(m0) if acc is None else acc

    def step(self, plan_arrays, state, i, model_output, sample, noise=None):
        pa = plan_arrays
        x = sample.astype(jnp.float32)
        m_t = self._convert(pa, i, model_output.astype(jnp.float32), x)
        hist, last = state["hist"], state["last"]
        K = self.solver_order

        # UniC corrector: refine the sample produced by the previous predictor with m_t
        if self.use_corrector:
            m0 = hist[K - 1]
            res = self._history_sum(hist, m0, gather(pa, "c_rk", i), gather(pa, "c_rho", i))
            res = res + gather(pa, "c_rho_t", i) * (m_t - m0)
            x_c = gather(pa, "c_ratio", i) * last - gather(pa, "c_a", i) * m0 - gather(pa, "c_c", i) * res
            x = jnp.where(gather(pa, "c_on", i), x_c, x)

        hist = jnp.concatenate([hist[1:], m_t[None]], axis=0)
        # UniP predictor
        res = self._history_sum(hist, m_t, gather(pa, "p_rk", i), gather(pa, "p_rho", i))
        x_t = gather(pa, "p_ratio", i) * x - gather(pa, "p_a", i) * m_t - gather(pa, "p_c", i) * res
        last = jnp.where(gather(pa, "c_on", i), x, x_t) if self.last_in_place else x
        return x_t.astype(sample.dtype), {"hist": hist, "last": last}


def _sigma_to_t(sigma, log_sigmas):
    """Interpolated training timestep of ``sigma`` (diffusers ``_sigma_to_t``)."""
    log_sigma = np.log(np.maximum(sigma, 1e-10))
    dists = log_sigma - log_sigmas[:, np.newaxis]
    low_idx = np.cumsum((dists >= 0), axis=0).argmax(axis=0).clip(max=log_sigmas.shape[0] - 2)
    high_idx = low_idx + 1
    low = log_sigmas[low_idx]
    high = log_sigmas[high_idx]
    w = np.clip((low - log_sigma) / (low - high), 0, 1)
    t = (1 - w) * low_idx + w * high_idx
    return t.reshape(np.shape(sigma))


register_sampler("unipc", UniPCSampler)


_UNIPC_DEFAULTS = dict(
    num_train_timesteps=1000, beta_start=0.0001, beta_end=0.02, beta_schedule="linear", trained_betas=None,
    solver_order=2, prediction_type="epsilon", predict_x0=True, solver_type="bh2", lower_order_final=True,
    disable_corrector=[], use_karras_sigmas=False, use_exponential_sigmas=False, use_beta_sigmas=False,
    use_flow_sigmas=False, flow_shift=1.0, timestep_spacing="linspace", steps_offset=0, final_sigmas_type="zero",
    rescale_betas_zero_snr=False, use_dynamic_shifting=False, time_shift_type="exponential", sigma_min=None,
    sigma_max=None, shift_terminal=None,
)


def _from_config(cfg: dict) -> UniPCSampler:
    r = ConfigReader("UniPCMultistepScheduler", cfg,
                     cosmetic=("dynamic_thresholding_ratio", "sample_max_value"))
    opts = {}
    for name, default in _UNIPC_DEFAULTS.items():
        v = r.take(name, default)
        opts[name] = default if (v is None and default is not None) else v
    r.require_default("thresholding", False)
    r.require_default("solver_p", None)
    r.finish()
    solver_type = opts["solver_type"]
    if solver_type in ("midpoint", "heun", "logrho"):  # diffusers silently maps these to bh2
        opts["solver_type"] = "bh2"
    try:
        return UniPCSampler(**opts)
    except ValueError as e:
        raise SchedulerConfigError(f"UniPCMultistepScheduler: {e}") from None


register_scheduler_class("UniPCMultistepScheduler", _from_config)
