"""Shared harness for the sampler-vs-diffusers trajectory tests (no tests of its own).

Both sides are driven by the same deterministic synthetic denoiser evaluated in numpy float32 on
each side's own current sample, so errors propagate along the trajectory exactly as they would in
a real run. The vidax loop calls one ``jax.jit``-compiled step with a traced ``i``.
"""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import torch

SHAPE = (1, 4, 2, 6, 6)
WORST: dict[str, float] = {}


def denoiser(x: np.ndarray, t: float) -> np.ndarray:
    """Fixed smooth 'model': bounded, contracting, timestep dependent (float32 in, float32 out)."""
    x = np.asarray(x, dtype=np.float32)
    tt = np.float32(t / 1000.0)
    return (np.tanh(np.float32(0.5) * x) + np.float32(0.1) * tt * np.sin(np.float32(3.0) * x)
            - np.float32(0.2) * (np.float32(1.0) - tt)).astype(np.float32)


def initial_sample(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(SHAPE).astype(np.float32)


def noises(n: int, seed: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(SHAPE).astype(np.float32) for _ in range(n)]


def run_diffusers(sched, x0: np.ndarray, noise_list=None, noise_patch=None, scale_input=False, step_kwargs=None,
                  max_steps=None):
    """Run a diffusers scheduler loop; returns the list of samples after each step.

    ``noise_patch``: module whose ``randn_tensor`` is replaced to hand out ``noise_list`` in order.
    """
    x = torch.from_numpy(x0.copy())
    traj = []
    it = iter(noise_list or [])
    ctx = contextlib.nullcontext()
    if noise_patch is not None:
        orig = noise_patch.randn_tensor

        def fake(shape, generator=None, device=None, dtype=None, **kw):
            return torch.from_numpy(next(it)).to(dtype or torch.float32).reshape(shape)

        noise_patch.randn_tensor = fake
        ctx = contextlib.ExitStack()
        ctx.callback(setattr, noise_patch, "randn_tensor", orig)
    with ctx:
        for t in sched.timesteps[:max_steps]:
            xin = sched.scale_model_input(x, t) if scale_input else x
            mo = torch.from_numpy(denoiser(xin.numpy(), float(t)))
            x = sched.step(mo, t, x, **(step_kwargs or {})).prev_sample
            traj.append(x.numpy().astype(np.float32).copy())
    return traj


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


def run_vidax(sampler, plan, x0: np.ndarray, noise_list=None):
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
        mo = jnp.asarray(denoiser(np.asarray(xin), float(plan.timesteps[i])))
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


TOL_L2 = 1e-6  # step-wise ||ours - ref|| / ||ref||
TOL_MAX = 2e-6  # step-wise max|ours - ref| / max|ref| (fp32 noise floor over 50 multistep steps, see docs)


def check(key: str, ours, ref, upto=None) -> tuple[float, float]:
    """Record and assert the worst step-wise relative errors (L2 and max-abs) of a trajectory."""
    e2 = traj_err_l2(ours, ref, upto)
    em = traj_err(ours, ref, upto)
    a, b = WORST.get(key, (0.0, 0.0))
    WORST[key] = (max(a, e2), max(b, em))
    assert e2 <= TOL_L2 and em <= TOL_MAX, f"{key}: l2 {e2:.3e} max {em:.3e}"
    return e2, em


def report(prefix: str = "") -> str:
    return "\n".join(f"{k}: l2 {v[0]:.2e}  max {v[1]:.2e}" for k, v in sorted(WORST.items()) if k.startswith(prefix))
