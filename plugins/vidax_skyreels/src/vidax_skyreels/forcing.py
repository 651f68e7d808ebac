"""SkyReels-V2 diffusion forcing (diffusers ``SkyReelsV2DiffusionForcingPipeline``) as a chunked run.

A video of ``num_frames`` longer than ``base_num_frames`` is made in windows of the base length that overlap by
``overlap_history`` frames (in latent frames ``(n - 1) // 4 + 1`` each): the first window is all new; each later
one starts from the last overlap latents of the video so far as a clean prefix (cut to a whole number of causal
blocks), denoises the rest, and adds its frames past the overlap. Inside a window every latent frame follows the
forcing table (:func:`vidax_core.schedulers.frame_schedule.forcing_rows`: synchronous, or asynchronous causal
blocks lagging by ``ar_step``) with its own sampler history (:class:`PerFrameSampler`); with
``addnoise_condition`` > 0 the prefix frames the model sees are re-noised at every step with fresh noise and
given that timestep. The pipeline decodes the joined latents once, so the windows are one decode stream.

Draws, in the reference's order: per window, its noise (1, C, window frames, h, w) (the prefix positions then
overwritten), then with ``addnoise_condition`` > 0 and a prefix, one (1, C, prefix, h, w) per row.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from vidax_core.model_api import Conditioning
from vidax_core.windows import CONTINUE, Window, WindowDone, WindowedSampling, WindowStart

TEMPORAL = 4  # the Wan VAE's time compression
NOT_STARTED_T = 999.0  # the model timestep of a frame not yet started (the reference's step_template[0])


def latent_frames(frames: int) -> int:
    return (int(frames) - 1) // TEMPORAL + 1


@dataclass(frozen=True)
class Geometry:
    """The windows of a run in latent frames: each window's length and clean prefix, and how many of its
    frames it adds (the first window all, a later one those past the overlap)."""

    frames: tuple[int, ...]
    prefixes: tuple[int, ...]
    overlap: int

    @property
    def total(self) -> int:
        return self.frames[0] + sum(f - self.overlap for f in self.frames[1:])


def geometry(run: Any) -> Geometry:
    """The reference's window plan for ``run`` (``num_frames``, ``options.base_num_frames``, ``overlap_history``,
    ``causal_block_size``)."""
    opts = dict(run.options or {})
    total = latent_frames(run.sampling.num_frames)
    base_frames, overlap = int(opts.get("base_num_frames") or 97), opts.get("overlap_history")
    cbs = int(opts.get("causal_block_size") or 1)
    if overlap is None or run.sampling.num_frames <= base_frames:
        return Geometry((total,), (0,), 0)
    base, lap = latent_frames(base_frames), latent_frames(overlap)
    n = 1 + (total - base - 1) // (base - lap) + 1
    frames, prefixes = [base], [0]
    for k in range(1, n):
        done = k * (base - lap) + lap
        frames.append(min(total - done + lap, base))
        prefixes.append(lap - lap % cbs)
    return Geometry(tuple(frames), tuple(prefixes), lap)


def fps_row(fps: int) -> int:
    """The fps embedding's table row the pipeline picks: 0 for 16 fps, 1 for any other rate."""
    return 0 if int(fps) == 16 else 1


class ForcingWindows(WindowedSampling):
    """The windows of one diffusion-forcing call (see the module docstring)."""

    decode = CONTINUE

    def __init__(self, run: Any, grid_hw: tuple[int, int], channels: int, *, fps_embedding: bool) -> None:
        from vidax_core.schedulers.frame_schedule import forcing_rows

        opts = dict(run.options or {})
        self.run, self.channels, self.hw = run, int(channels), tuple(int(v) for v in grid_hw)
        self.geo = geometry(run)
        self.ar_step, self.cbs = int(opts.get("ar_step") or 0), int(opts.get("causal_block_size") or 1)
        self.addnoise = float(opts.get("addnoise_condition") or 0.0)
        self.fps = fps_row(run.output.fps) if fps_embedding else None
        steps = int(run.sampling.num_steps)
        self.tables = [forcing_rows(f, steps, ar_step=self.ar_step, causal_block_size=self.cbs, num_pre_ready=p)
                       for f, p in zip(self.geo.frames, self.geo.prefixes)]
        windows = []
        for f, p, (rows, _) in zip(self.geo.frames, self.geo.prefixes, self.tables):
            renoise = self.addnoise > 0 and p > 0
            draws = (self._shape(f),) + ((self._shape(p),) * len(rows) if renoise else ())
            windows.append(Window((f, *self.hw), len(rows), draws, key=("forcing", p if renoise else 0)))
        self.windows = tuple(windows)
        self.history: np.ndarray | None = None

    def _shape(self, frames: int) -> tuple[int, ...]:
        return (1, self.channels, frames, *self.hw)

    def start(self, k: int, draw: Callable, sampler: Any) -> WindowStart:
        from vidax_core.schedulers.frame_schedule import PerFrameSampler
        from vidax_core.schedulers.unipc import UniPCSampler

        frames, prefix = self.geo.frames[k], self.geo.prefixes[k]
        latents = np.array(draw(self._shape(frames)), np.float32)
        if prefix:
            latents[:, :, :prefix] = self.history[:, :, :prefix]
        if isinstance(sampler, UniPCSampler):  # the reference writes each frame's update in place
            sampler = dataclasses.replace(sampler, last_in_place=True)
        per_frame = PerFrameSampler(sampler)
        rows, update = self.tables[k]
        plan = per_frame.plan_rows(sampler.plan(int(self.run.sampling.num_steps)), rows, update,
                                   start=NOT_STARTED_T)
        cond, step_noise = self._conditioning(frames, prefix, draw)
        return WindowStart(latents, per_frame, plan, cond, step_noise)

    def _conditioning(self, frames: int, prefix: int, draw: Callable) -> tuple[Conditioning | None, Any]:
        arrays: dict[str, np.ndarray] = {}
        kwargs: tuple[str, ...] = ()
        if self.fps is not None:
            arrays["fps"], kwargs = np.asarray([self.fps], np.int32), ("fps",)
        if not (self.addnoise > 0 and prefix):
            return (Conditioning(arrays=arrays, model_kwargs=kwargs) if arrays else None), None
        arrays["prefix"] = np.arange(frames) < prefix
        shape = self._shape(frames)

        def step_noise(i: int) -> np.ndarray:
            out = np.zeros(shape, np.float32)
            out[:, :, :prefix] = draw(self._shape(prefix))
            return out

        return Conditioning(arrays=arrays, model_kwargs=kwargs, prepare=_renoise(self.addnoise),
                            step_noise_shape=shape), step_noise

    def finish(self, k: int, latents: np.ndarray) -> WindowDone:
        latents = np.asarray(latents, np.float32)
        new = latents if k == 0 else latents[:, :, self.geo.overlap:]
        lap = self.geo.overlap
        joined = new if self.history is None else np.concatenate([self.history, new], axis=2)
        self.history = joined[:, :, -lap:] if lap else None
        return WindowDone(output=new, decode=new)


def _renoise(level: float):
    """``Conditioning.prepare`` of ``addnoise_condition``: the prefix frames the model sees are
    ``x (1 - f) + noise f`` with ``f = 0.001 level``, at timestep ``level`` (cut to an integer, as the reference
    writes it into its integer timestep tensor)."""
    keep, f = np.float32(1.0 - 0.001 * level), np.float32(0.001 * level)
    t_level = np.float32(int(level))

    def prepare(x, t, arrays):
        import jax.numpy as jnp

        mask = arrays["prefix"]
        noisy = x * keep + arrays["step_noise"].astype(x.dtype) * f
        x = jnp.where(mask[None, None, :, None, None], noisy, x)
        return x, jnp.where(mask[None, :], t_level, t)

    return prepare
