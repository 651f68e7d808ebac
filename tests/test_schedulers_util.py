"""Shared harness for the sampler-vs-diffusers trajectory tests (no tests of its own).

Both sides are driven by the same deterministic synthetic denoiser evaluated in numpy float32 on
each side's own current sample, so errors propagate along the trajectory exactly as they would in
a real run. The vidax loop calls one ``jax.jit``-compiled step with a traced ``i``.

Tolerances are not constants: every diffusers trajectory is also run in float64 (the same scheduler,
its tables and the denoiser in float64), and vidax's fp32 error against that float64 trajectory must
stay within ``FACTOR`` x diffusers' own fp32 error against it, plus ``FLOOR`` (a few fp32 ulps, for
steps that are exact in fp32). CPU rounding differences move both errors alike; a wrong formula or
sigma moves only vidax's.
"""

from __future__ import annotations

import contextlib
import copy

import jax
import jax.numpy as jnp
import numpy as np
import torch

SHAPE = (1, 4, 2, 6, 6)


def denoiser(x: np.ndarray, t: float, dtype=np.float32) -> np.ndarray:
    """Fixed smooth 'model': bounded, contracting, timestep dependent (``dtype`` in, ``dtype`` out)."""
    c = np.dtype(dtype).type
    x = np.asarray(x, dtype=dtype)
    tt = c(float(t) / 1000.0)
    return (np.tanh(c(0.5) * x) + c(0.1) * tt * np.sin(c(3.0) * x) - c(0.2) * (c(1.0) - tt)).astype(dtype)


def initial_sample(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(SHAPE).astype(np.float32)


def noises(n: int, seed: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(SHAPE).astype(np.float32) for _ in range(n)]


class Trajectory(list):
    """A reference trajectory (fp32 samples after each step) with its float64 twin in ``f64``."""

    def __init__(self, steps, f64) -> None:
        super().__init__(steps)
        self.f64 = list(f64)


def float64_scheduler(sched):
    """A copy of a diffusers scheduler (after ``set_timesteps``) whose floating tables are float64."""
    twin = copy.deepcopy(sched)
    for k, v in vars(twin).items():
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            setattr(twin, k, v.double())
    return twin


@contextlib.contextmanager
def keep_float64():
    """Inside: ``tensor.to(torch.float32)`` of a float64 tensor keeps float64 (diffusers' schedulers "upcast"
    samples to float32 inside ``step``, which would round the float64 run)."""
    orig = torch.Tensor.to

    def to(self, *args, **kwargs):
        if self.dtype == torch.float64:
            args = tuple(torch.float64 if a is torch.float32 else a for a in args)
            if kwargs.get("dtype") is torch.float32:
                kwargs["dtype"] = torch.float64
        return orig(self, *args, **kwargs)

    torch.Tensor.to = to
    try:
        yield
    finally:
        torch.Tensor.to = orig


def _diffusers_loop(sched, x0, noise_list, noise_patch, scale_input, step_kwargs, max_steps, dtype):
    tdtype = torch.float64 if dtype == np.float64 else torch.float32
    x = torch.from_numpy(np.asarray(x0, dtype).copy())
    traj = []
    it = iter(noise_list or [])
    ctx = contextlib.ExitStack()
    if noise_patch is not None:
        orig = noise_patch.randn_tensor

        def fake(shape, generator=None, device=None, dtype=None, **kw):
            return torch.from_numpy(np.asarray(next(it), np.float64)).to(tdtype).reshape(shape)

        noise_patch.randn_tensor = fake
        ctx.callback(setattr, noise_patch, "randn_tensor", orig)
    if dtype == np.float64:
        ctx.enter_context(keep_float64())
    with ctx:
        for t in sched.timesteps[:max_steps]:
            xin = sched.scale_model_input(x, t) if scale_input else x
            mo = torch.from_numpy(denoiser(xin.numpy(), float(t), dtype))
            x = sched.step(mo, t, x, **(step_kwargs or {})).prev_sample
            assert x.dtype == tdtype, (x.dtype, tdtype)
            traj.append(x.numpy().astype(dtype).copy())
    return traj


def run_diffusers(sched, x0: np.ndarray, noise_list=None, noise_patch=None, scale_input=False, step_kwargs=None,
                  max_steps=None) -> Trajectory:
    """Run a diffusers scheduler loop in fp32 and, on a float64 copy, in float64; returns the fp32 samples
    after each step, with the float64 ones in ``.f64``.

    ``noise_patch``: module whose ``randn_tensor`` is replaced to hand out ``noise_list`` in order.
    """
    twin = float64_scheduler(sched)
    args = (noise_list, noise_patch, scale_input, step_kwargs, max_steps)
    return Trajectory(_diffusers_loop(sched, x0, *args, np.float32), _diffusers_loop(twin, x0, *args, np.float64))


_JIT: dict = {}


def _jitted_step(sampler):
    """One jitted step per ``sampler.step_key()`` (shared across e.g. shifts), with a trace counter."""
    key = sampler.step_key()
    if key not in _JIT:
        traces = []

        def body(pa, state, i, mo, x, noise):
            traces.append(1)
            return sampler.step(pa, state, i, mo, x, noise)

        _JIT[key] = (jax.jit(body), traces)
    return _JIT[key]


def run_vidax(sampler, plan, x0: np.ndarray, noise_list=None, model=denoiser):
    """Run the vidax sampler with a jitted step and traced step index.

    Asserts the whole loop traces (compiles) at most once: only the first call may trace (and does
    unless an identically-shaped plan of a sampler with the same step_key ran before).
    """
    step, traces = _jitted_step(sampler)
    before = len(traces)
    pa = plan.arrays()
    x = jnp.asarray(x0)
    state = sampler.init_state(plan, x)
    traj = []
    for i in range(plan.num_steps):
        i_dev = jnp.asarray(i, jnp.int32)
        xin = sampler.scale_model_input(pa, i_dev, x)
        mo = jnp.asarray(model(np.asarray(xin), float(plan.timesteps[i])))
        noise = None if noise_list is None else jnp.asarray(noise_list[i])
        x, state = step(pa, state, i_dev, mo, x, noise)
        traj.append(np.asarray(x).copy())
        if i == 0:
            after_first = len(traces)
    assert after_first - before <= 1 and len(traces) == after_first, f"step traced {len(traces) - before} times"
    return traj


def rel_err(a: np.ndarray, b: np.ndarray) -> float:
    """max |a-b| / max |b| (relative to the reference's scale)."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def rel_err_l2(a: np.ndarray, b: np.ndarray) -> float:
    """||a-b||_2 / ||b||_2."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def traj_err(ours, ref, upto=None) -> float:
    """Worst step-wise max-abs relative error over the trajectory."""
    n = len(ref) if upto is None else upto
    assert len(ours) == len(ref)
    return max([rel_err(o, r) for o, r in zip(ours[:n], ref[:n])], default=0.0)


def traj_err_l2(ours, ref, upto=None) -> float:
    n = len(ref) if upto is None else upto
    return max([rel_err_l2(o, r) for o, r in zip(ours[:n], ref[:n])], default=0.0)


FACTOR = 4.0  # vidax's error vs float64 may be this many times diffusers' own fp32 error vs float64
FLOOR = 4 * 2.0**-24  # plus 4 half-ulps of fp32 relative: steps exact in fp32 (reference error 0) may round


def tolerance(ref_error: float) -> float:
    return FACTOR * ref_error + FLOOR


def check(key: str, ours, ref, upto=None) -> tuple[float, float]:
    """Assert vidax's worst step-wise relative errors (L2 and max-abs) against the float64 twin of ``ref`` stay
    within :func:`tolerance` of the reference's own fp32 errors against it."""
    assert isinstance(ref, Trajectory), f"{key}: the reference needs its float64 twin (run_diffusers / Trajectory)"
    assert len(ours) == len(ref) == len(ref.f64), (len(ours), len(ref), len(ref.f64))
    e2, em = traj_err_l2(ours, ref.f64, upto), traj_err(ours, ref.f64, upto)
    r2, rm = traj_err_l2(ref, ref.f64, upto), traj_err(ref, ref.f64, upto)
    assert e2 <= tolerance(r2) and em <= tolerance(rm), (
        f"{key}: vs float64 l2 {e2:.3e} max {em:.3e}; diffusers fp32 vs float64 l2 {r2:.3e} max {rm:.3e}; "
        f"tolerance {FACTOR:g}x + {FLOOR:.1e}")
    return e2, em


def vp_alphas_cumprod64(cls, **cfg) -> torch.Tensor:
    """A diffusers VP scheduler's ``alphas_cumprod`` recomputed in float64 from its own fp32 beta schedule, with its
    own zero-terminal-SNR rescale (and its 2**-24 floor on the last entry)."""
    import sys

    raw = cls(**dict(cfg, rescale_betas_zero_snr=False)).betas.double()
    zero_snr = cfg.get("rescale_betas_zero_snr", False)
    betas = sys.modules[cls.__module__].rescale_zero_terminal_snr(raw) if zero_snr else raw
    out = torch.cumprod(1.0 - betas, dim=0)
    if zero_snr:
        out[-1] = 2**-24
    return out


def elementwise_rel(a, b) -> float:
    """max over entries of |a-b| / |b| (|a-b| where b is 0)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    d = np.abs(a - b)
    return float(np.max(np.where(b == 0, d, d / np.where(b == 0, 1.0, np.abs(b)))))


def check_table(key: str, ours, ref32, ref64) -> None:
    """A schedule table (alphas_cumprod, sigmas): vidax's entries vs the float64 reference within
    :func:`tolerance` of the fp32 reference's own entry-wise relative error."""
    e, r = elementwise_rel(ours, ref64), elementwise_rel(ref32, ref64)
    assert e <= tolerance(r), (f"{key}: vs float64 {e:.3e}; "
                               f"diffusers fp32 vs float64 {r:.3e}; tolerance {FACTOR:g}x + {FLOOR:.1e}")
