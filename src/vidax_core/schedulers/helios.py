"""diffusers' ``HeliosScheduler`` and ``HeliosDMDScheduler`` (Helios) read as the core samplers they are.

With ``stages: 1`` (HeliosPipeline) HeliosScheduler is UniPC (``scheduler_type: unipc``) or flow Euler (``euler``)
on flow sigmas the pipeline hands it (``set_timesteps(sigmas=..., mu=...)``), time-shifted by ``mu`` when
``use_dynamic_shifting`` is on, with float model timesteps ``sigma x T``; the config's ``shift`` applies only when
no sigmas are given, which HeliosPipeline never does, so the samplers are built unshifted. The last step lands on
sigma 0, where diffusers clamps sigma to 1e-8 (a 1e-8 relative difference).

With more stages (HeliosPyramidPipeline: Helios-Mid, Helios-Distilled) each chunk is denoised coarse to fine, one
denoising loop per stage (:class:`HeliosPyramidSampler`): stage ``s`` runs ``n_s`` steps on the within-stage flow
sigmas ``linspace(0.999, 0.000999, n_s)`` (then 0), shifted by ``mu`` with dynamic shifting, while the model sees
timesteps inside the stage's slice of the global schedule (``stage_range``, corrected by ``gamma`` for the
re-noising between stages), cut to integers as the pipeline casts them. The stepping is UniPC (HeliosScheduler) or
the DMD step (HeliosDMDScheduler, :class:`HeliosDMDSampler`: predict x0, then re-noise it towards the stage's
starting latents to the next step's level; ``n_s + 1`` planned levels, or ``2 n_s + 1`` for an amplified first
chunk, the last level dropped). :meth:`HeliosPyramidSampler.renoise` gives the ``(alpha, beta)`` that start a stage
from the upsampled previous one and correlated block noise.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from .base import (ConfigReader, Sampler, SamplerPlan, SchedulerConfigError, calculate_shift, gather,
                   register_scheduler_class)
from .flow_euler import FlowEulerSampler
from .sigmas import time_shift
from .unipc import UniPCSampler

__all__ = ["HeliosPyramidSampler", "HeliosDMDSampler"]


@dataclass(frozen=True)
class HeliosDMDSampler(Sampler):
    """HeliosDMDScheduler's step over a plan whose ``extras`` hold, per step, the sigma the x0 prediction uses
    (``x0_sigma``), the level the next step starts from (``next_sigma``) and whether to re-noise (all but the
    last step): ``x0 = x - x0_sigma v``, then ``(1 - next_sigma) x0 + next_sigma start`` where ``start`` is the
    stage's initial latents (kept in the state)."""

    name = "helios_dmd"
    step_fields = ()

    def plan(self, num_steps=None, **kw) -> SamplerPlan:  # pragma: no cover - plans come from the pyramid
        raise ValueError("the DMD step is planned per pyramid stage (HeliosPyramidSampler.stage_plan)")

    @staticmethod
    def stage_plan(timesteps: np.ndarray, sigmas: np.ndarray) -> SamplerPlan:
        """The plan of one stage from the scheduler's float timesteps (N,) and sigmas (N+1,): the model sees the
        timesteps cut to integers; every sigma is looked up as the scheduler does, at the timestep nearest to the
        integer one."""
        ts, sig = np.asarray(timesteps, np.float64), np.asarray(sigmas, np.float64)
        n = len(ts)
        nearest = lambda t: int(np.argmin(np.abs(ts - np.trunc(t))))  # noqa: E731
        x0_sigma = np.array([sig[nearest(t)] for t in ts], np.float32)
        next_sigma = np.array([sig[nearest(ts[i + 1])] if i + 1 < n else 0.0 for i in range(n)], np.float32)
        return SamplerPlan(timesteps=np.trunc(ts).astype(np.float32), sigmas=sig.astype(np.float32), num_steps=n,
                           extras={"x0_sigma": x0_sigma, "next_sigma": next_sigma,
                                   "renoise": np.arange(n) < n - 1})

    def init_state(self, plan, sample):
        return {"start": jnp.asarray(sample, jnp.float32)}

    def step(self, plan_arrays, state, i, model_output, sample, noise=None):
        x0 = sample.astype(jnp.float32) - gather(plan_arrays, "x0_sigma", i) * model_output.astype(jnp.float32)
        s = gather(plan_arrays, "next_sigma", i)
        out = jnp.where(gather(plan_arrays, "renoise", i), (1.0 - s) * x0 + s * state["start"], x0)
        return out.astype(sample.dtype), state


@dataclass(frozen=True)
class HeliosPyramidSampler(Sampler):
    """HeliosScheduler / HeliosDMDScheduler with ``stages`` > 1 (see the module docstring). ``kind`` is ``unipc``
    or ``dmd``; the UniPC fields are HeliosScheduler's. :meth:`stage_plan` plans one stage, :meth:`stage_sampler`
    steps it; ``plan`` / ``step`` are stage 0's (what generic code asks of a sampler)."""

    name = "helios_pyramid"

    kind: str = "unipc"
    stages: int = 3
    stage_range: tuple[float, ...] = (0.0, 1 / 3, 2 / 3, 1.0)
    gamma: float = 1 / 3
    shift: float = 1.0
    num_train_timesteps: int = 1000
    use_dynamic_shifting: bool = False
    time_shift_type: str = "exponential"
    solver_order: int = 2
    solver_type: str = "bh2"
    predict_x0: bool = True
    lower_order_final: bool = True
    disable_corrector: tuple[int, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "stage_range", tuple(float(v) for v in self.stage_range))
        object.__setattr__(self, "disable_corrector", tuple(int(v) for v in self.disable_corrector))
        if self.kind not in ("unipc", "dmd"):
            raise ValueError(f"helios_pyramid kind must be 'unipc' or 'dmd', got {self.kind!r}")
        if self.stages < 2 or len(self.stage_range) != self.stages + 1:
            raise ValueError(f"helios_pyramid needs stages >= 2 and stages + 1 stage_range entries, got stages="
                             f"{self.stages} and {len(self.stage_range)} entries")
        if self.time_shift_type not in ("exponential", "linear"):
            raise ValueError(f"time_shift_type must be 'exponential' or 'linear', got {self.time_shift_type!r}")
        if self.use_dynamic_shifting and self.shift != 1.0:
            raise ValueError("use_dynamic_shifting needs shift 1.0 (the scheduler asserts it)")

    # ---- the scheduler's tables (float64, as its torch code computes them) --------------------------------------
    def _global(self) -> tuple[np.ndarray, np.ndarray]:
        T = self.num_train_timesteps
        s = 1.0 - np.linspace(1, 1 / T, T + 1)
        s = np.flip(self.shift * s / (1 + (self.shift - 1) * s))[:-1].copy()
        return s, s * T

    def tables(self) -> tuple[list[float], list[np.ndarray]]:
        """(the original start sigma of each stage, each stage's 1000 timesteps) of ``init_sigmas_for_each_stage``."""
        T, S = self.num_train_timesteps, self.stages
        sigmas, timesteps = self._global()
        ori, distance = [], []
        for i in range(S):
            start = max(int(self.stage_range[i] * T), 0)
            end = min(int(self.stage_range[i + 1] * T), T)
            start_sigma = float(sigmas[start])
            end_sigma = float(sigmas[end]) if end < T else 0.0
            ori.append(start_sigma)
            if i:
                o = 1 - start_sigma
                start_sigma = 1 - (1 / (math.sqrt(1 + (1 / self.gamma)) * (1 - o) + o)) * o
            distance.append(start_sigma - end_sigma)
        total = sum(distance)
        per_stage = []
        for i in range(S):
            r0 = 0.0 if i == 0 else sum(distance[:i]) / total
            r1 = 0.9999999999999999 if i == S - 1 else sum(distance[: i + 1]) / total
            t_max = min(float(timesteps[int(r0 * T)]), 999)
            t_min = float(timesteps[min(int(r1 * T), T - 1)])
            per_stage.append(np.linspace(t_max, t_min, T + 1)[:-1])
        return ori, per_stage

    def stage_schedule(self, stage: int, num_steps: int, mu: float | None = None,
                       amplify: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(float timesteps (N,), sigmas (N+1,)) of ``set_timesteps(num_steps, stage, mu=mu, is_amplify_first_chunk=
        amplify)``."""
        if not 0 <= stage < self.stages:
            raise ValueError(f"stage {stage} of a {self.stages}-stage schedule")
        if num_steps < 1:
            raise ValueError("each pyramid stage needs at least one step")
        n = num_steps
        if self.kind == "dmd":
            n = num_steps * 2 + 1 if amplify else num_steps + 1
        stage_ts = self.tables()[1][stage]
        T = self.num_train_timesteps
        timesteps = np.linspace(stage_ts[0], stage_ts[-1], n)
        top = np.linspace(0.999, 0, T + 1)[:-1]
        sigmas = np.concatenate([np.linspace(top[0], top[-1], n), [0.0]])
        if self.kind == "dmd":
            timesteps, sigmas = timesteps[:-1], np.concatenate([sigmas[:-2], sigmas[-1:]])
        if self.use_dynamic_shifting:
            if mu is None:
                raise ValueError("a dynamically shifted Helios schedule needs mu")
            with np.errstate(divide="ignore"):
                sigmas = time_shift(sigmas, mu, self.time_shift_type)
            timesteps = stage_ts.min() + sigmas[:-1] * (stage_ts.max() - stage_ts.min())
        return np.asarray(timesteps, np.float64), np.asarray(sigmas, np.float64)

    def renoise(self, stage: int) -> tuple[float, float]:
        """(alpha, beta) of the pipeline's ``alpha * upsampled + beta * block_noise`` that starts ``stage`` > 0."""
        o = 1 - self.tables()[0][stage]
        alpha = 1 / (math.sqrt(1 + (1 / self.gamma)) * (1 - o) + o)
        return alpha, alpha * (1 - o) / math.sqrt(self.gamma)

    # ---- stepping ---------------------------------------------------------------------------------------------
    def stage_sampler(self) -> Sampler:
        if self.kind == "dmd":
            return HeliosDMDSampler()
        return UniPCSampler(solver_order=self.solver_order, solver_type=self.solver_type,
                            prediction_type="flow_prediction", predict_x0=self.predict_x0,
                            lower_order_final=self.lower_order_final, disable_corrector=self.disable_corrector,
                            num_train_timesteps=self.num_train_timesteps, use_flow_sigmas=True, flow_shift=1.0,
                            integer_timesteps=False)

    def stage_plan(self, stage: int, num_steps: int, mu: float | None = None, amplify: bool = False) -> SamplerPlan:
        """Stage ``stage``'s plan for :meth:`stage_sampler`; the model timesteps are cut to integers (the pipeline
        casts them to int64)."""
        ts, sig = self.stage_schedule(stage, num_steps, mu, amplify)
        if self.kind == "dmd":
            return HeliosDMDSampler.stage_plan(ts, sig)
        plan = self.stage_sampler().plan(sigmas=sig[:-1])
        return dataclasses.replace(plan, timesteps=np.trunc(ts).astype(np.float32))

    def plan(self, num_steps: int | None = None, *, mu: float | None = None, seq_len: int | None = None,
             stage: int = 0, amplify: bool = False) -> SamplerPlan:
        if mu is None and seq_len is not None:
            mu = calculate_shift(seq_len)
        return self.stage_plan(stage, int(num_steps or 1), mu, amplify)

    def init_state(self, plan, sample):
        return self.stage_sampler().init_state(plan, sample)

    def step(self, plan_arrays, state, i, model_output, sample, noise=None):
        return self.stage_sampler().step(plan_arrays, state, i, model_output, sample, noise)


def _pyramid(r: ConfigReader, kind: str, stages: int) -> HeliosPyramidSampler:
    opts = dict(kind=kind, stages=stages, stage_range=tuple(r.take("stage_range", [0, 1 / 3, 2 / 3, 1])),
                gamma=float(r.take("gamma", 1 / 3)), shift=float(r.take("shift", 1.0)),
                num_train_timesteps=int(r.take("num_train_timesteps", 1000)),
                use_dynamic_shifting=r.take("use_dynamic_shifting", False))
    r.require_default("use_flow_sigmas", True)
    r.require_default("prediction_type", "flow_prediction")
    if kind == "unipc":
        opts.update(solver_order=r.take("solver_order", 2), solver_type=r.take("solver_type", "bh2"),
                    predict_x0=r.take("predict_x0", True), lower_order_final=r.take("lower_order_final", True),
                    disable_corrector=tuple(r.take("disable_corrector", []) or ()),
                    time_shift_type=r.take("time_shift_type", "exponential"))
        if opts["solver_type"] in ("midpoint", "heun", "logrho"):
            opts["solver_type"] = "bh2"
    else:
        opts["time_shift_type"] = r.take("time_shift_type", "linear")
    r.finish()
    try:
        return HeliosPyramidSampler(**opts)
    except ValueError as e:
        raise SchedulerConfigError(f"{r.cls_name}: {e}") from None


def _from_config(cfg: dict):
    r = ConfigReader("HeliosScheduler", cfg, cosmetic=("stage_range", "gamma", "shift"))
    stages = r.take("stages", 3)
    kind = r.take("scheduler_type", "unipc")
    r.require_default("thresholding", False)
    r.require_default("solver_p", None)
    if stages != 1:
        if kind != "unipc":
            raise SchedulerConfigError(f"HeliosScheduler: scheduler_type={kind!r} with stages={stages} is not "
                                       "supported (the pyramid runs unipc; HeliosDMDScheduler is the DMD one)")
        return _pyramid(r, "unipc", stages)
    dynamic = r.take("use_dynamic_shifting", False)
    shift_type = r.take("time_shift_type", "exponential")
    T = r.take("num_train_timesteps", 1000)
    r.require_default("use_flow_sigmas", True)
    if kind == "euler":
        for name, default in (("prediction_type", "flow_prediction"), ("solver_order", 2), ("predict_x0", True),
                              ("solver_type", "bh2"), ("lower_order_final", True), ("disable_corrector", [])):
            r.take(name, default)  # UniPC's fields: the Euler step reads none of them
        r.finish()
        return FlowEulerSampler(num_train_timesteps=T, use_dynamic_shifting=dynamic, time_shift_type=shift_type)
    if kind != "unipc":
        raise SchedulerConfigError(f"HeliosScheduler: scheduler_type={kind!r} is not supported (unipc or euler)")
    opts = dict(
        prediction_type=r.take("prediction_type", "flow_prediction"), solver_order=r.take("solver_order", 2),
        predict_x0=r.take("predict_x0", True), solver_type=r.take("solver_type", "bh2"),
        lower_order_final=r.take("lower_order_final", True),
        disable_corrector=tuple(r.take("disable_corrector", []) or ()))
    r.finish()
    if opts["solver_type"] in ("midpoint", "heun", "logrho"):  # diffusers maps these to bh2
        opts["solver_type"] = "bh2"
    try:
        return UniPCSampler(num_train_timesteps=T, use_flow_sigmas=True, flow_shift=1.0,
                            use_dynamic_shifting=dynamic, time_shift_type=shift_type, integer_timesteps=False, **opts)
    except ValueError as e:
        raise SchedulerConfigError(f"HeliosScheduler: {e}") from None


def _dmd_from_config(cfg: dict):
    r = ConfigReader("HeliosDMDScheduler", cfg)
    stages = r.take("stages", 3)
    if stages < 2:
        raise SchedulerConfigError(f"HeliosDMDScheduler: stages={stages}: vidax runs the DMD step in the pyramid "
                                   "pipeline's stages (2 or more)")
    return _pyramid(r, "dmd", stages)


register_scheduler_class("HeliosScheduler", _from_config)
register_scheduler_class("HeliosDMDScheduler", _dmd_from_config)
