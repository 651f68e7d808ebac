"""Diffusion forcing: every latent frame at its own point of a sampler's schedule (SkyReels-V2 DF, CausVid-style
pipelines).

A run of ``N`` sampler steps becomes ``R`` rows; at each row every frame is not started (row value 0), being
denoised at step ``k`` of the base sampler (value ``k + 1``, 1..N) or finished (``N + 1``). Synchronous forcing
(``ar_step`` 0) moves every frame together; asynchronous forcing lets each causal block of frames lag the one
before it by ``ar_step`` steps, so earlier frames are cleaner than later ones; frames given as a clean prefix
start finished. :func:`forcing_rows` builds that table on the host (the reference's
``generate_timestep_matrix``).

:class:`PerFrameSampler` runs any core sampler per frame over such a table: its plan carries the base plan and
the table, its step updates each frame with the base sampler's step at that frame's own step index (``vmap`` over
the frame axis) and keeps the frames that do not move this row, and :meth:`PerFrameSampler.model_timesteps`
hands the denoiser one timestep per frame. One compiled step serves every row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from vidax_core.schedulers.base import Sampler, SamplerPlan

FRAME_AXIS = 2  # latents (B, C, F, H, W)
BASE = "base:"  # prefix of the base plan's arrays inside the per-frame plan


def forcing_rows(num_frames: int, num_steps: int, *, ar_step: int = 0, causal_block_size: int = 1,
                 num_pre_ready: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(rows, update): ``rows`` (R, F) int32 of row values 0..N+1 per frame, ``update`` (R, F) bool, True where a
    frame takes a sampler step at that row. Frames form causal blocks of ``causal_block_size``; the first
    ``num_pre_ready`` frames (a whole number of blocks) start finished."""
    cbs = int(causal_block_size)
    if cbs < 1 or num_frames % cbs:
        raise ValueError(f"{num_frames} latent frames do not split into causal blocks of {cbs}")
    if num_pre_ready % cbs:
        raise ValueError(f"{num_pre_ready} ready frames are not a whole number of causal blocks of {cbs}")
    if num_steps < 1 or ar_step < 0:
        raise ValueError("diffusion forcing needs num_steps >= 1 and ar_step >= 0")
    n, blocks = int(num_steps), num_frames // cbs
    done = n + 1
    prev = np.zeros(blocks, np.int64)
    prev[: num_pre_ready // cbs] = done
    rows, update = [], []
    while not np.all(prev >= n):
        new = np.zeros(blocks, np.int64)
        for b in range(blocks):
            new[b] = prev[b] + 1 if b == 0 or prev[b - 1] >= n else new[b - 1] - ar_step
        new = np.clip(new, 0, done)
        update.append((new != prev) & (new != done))
        rows.append(new)
        prev = new
    rows_a = np.repeat(np.stack(rows), cbs, axis=1).astype(np.int32)
    return rows_a, np.repeat(np.stack(update), cbs, axis=1)


def model_timesteps(rows: np.ndarray, timesteps: np.ndarray, *, start: float, end: float = 0.0) -> np.ndarray:
    """(R, F) float32 timesteps the denoiser sees: ``start`` for frames not started (pure noise), the base plan's
    ``timesteps[k]`` while a frame is at step ``k``, ``end`` once it is finished."""
    template = np.concatenate([[start], np.asarray(timesteps, np.float64), [end]])
    return template[rows].astype(np.float32)


@dataclass(frozen=True)
class PerFrameSampler(Sampler):
    """A core sampler run per frame over a diffusion-forcing table (see the module docstring); build its plan
    with :meth:`plan_rows`."""

    base: Sampler
    name = "per_frame"

    @property
    def needs_noise(self) -> bool:
        return self.base.needs_noise

    @property
    def init_noise_sigma(self) -> float:
        return self.base.init_noise_sigma

    def step_key(self) -> tuple:
        return (type(self), self.base.step_key())

    def options(self) -> dict[str, Any]:
        return {"base": self.base.options()}

    def plan(self, num_steps: int, **kw) -> SamplerPlan:
        raise ValueError("a per-frame plan is built from a base plan and a forcing table: use plan_rows")

    def plan_rows(self, base_plan: SamplerPlan, rows: np.ndarray, update: np.ndarray, *, start: float,
                  end: float = 0.0) -> SamplerPlan:
        """The plan of ``rows`` / ``update`` (:func:`forcing_rows`) over ``base_plan``: per row, the model timesteps
        of every frame (``frame_t``), each frame's base step index (``frame_step``) and whether it moves
        (``frame_update``). Its ``timesteps`` / ``sigmas`` per row (the largest of the moving frames') serve only
        what reads one value per step (guidance tables, reports)."""
        n = base_plan.num_steps
        frame_t = model_timesteps(rows, base_plan.timesteps, start=start, end=end)
        step = np.clip(rows - 1, 0, n - 1).astype(np.int32)
        moving = np.where(update, frame_t, -np.inf).max(axis=1)
        row_t = np.where(np.isfinite(moving), moving, 0).astype(np.float32)
        first = np.where(update, step, n).min(axis=1)
        sig = np.asarray(base_plan.sigmas, np.float32)
        row_sigma = np.concatenate([sig[np.minimum(first, n)], [sig[-1]]]).astype(np.float32)
        extras = {BASE + "timesteps": base_plan.timesteps, BASE + "sigmas": base_plan.sigmas,
                  **{BASE + k: v for k, v in base_plan.extras.items()},
                  "frame_t": frame_t, "frame_step": step, "frame_update": np.asarray(update, bool)}
        return SamplerPlan(timesteps=row_t, sigmas=row_sigma, num_steps=int(rows.shape[0]), extras=extras)

    def init_state(self, plan: SamplerPlan, sample) -> Any:
        base = SamplerPlan(timesteps=np.asarray(plan.extras[BASE + "timesteps"]),
                           sigmas=np.asarray(plan.extras[BASE + "sigmas"]),
                           num_steps=len(plan.extras[BASE + "timesteps"]))
        return self.base.init_state(base, sample)

    def model_timesteps(self, plan_arrays, i):
        """(1, F): the timestep of every frame at row ``i``."""
        return jnp.take(plan_arrays["frame_t"], i, axis=0)[None]

    def scale_model_input(self, plan_arrays, i, sample):
        if type(self.base).scale_model_input is Sampler.scale_model_input:
            return sample
        raise ValueError(f"sampler {self.base.name} scales its model input: it cannot run per frame")

    def step(self, plan_arrays, state, i, model_output, sample, noise=None):
        pa = plan_arrays
        base_arrays = {k[len(BASE):]: v for k, v in pa.items() if k.startswith(BASE)}
        k = jnp.take(pa["frame_step"], i, axis=0)
        moving = jnp.take(pa["frame_update"], i, axis=0)
        nd = jnp.ndim(sample)
        axes = jax.tree.map(lambda a: jnp.ndim(a) - nd + FRAME_AXIS, state)

        def one(kf, out_f, x_f, state_f, noise_f):
            return self.base.step(base_arrays, state_f, kf, out_f, x_f, noise_f)

        n_axis = None if noise is None else FRAME_AXIS
        new, new_state = jax.vmap(one, in_axes=(0, FRAME_AXIS, FRAME_AXIS, axes, n_axis),
                                  out_axes=(FRAME_AXIS, axes))(k, model_output, sample, state, noise)

        def keep(a_new, a_old, axis):
            shape = [1] * jnp.ndim(a_old)
            shape[axis] = -1
            return jnp.where(moving.reshape(shape), a_new, a_old)

        new = keep(new, sample, FRAME_AXIS)
        new_state = jax.tree.map(keep, new_state, state, axes)
        return new.astype(sample.dtype), new_state
