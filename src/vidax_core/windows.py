"""The contract of a chunked (autoregressive) run: a video made in windows, each a denoising loop conditioned on
latents made before it (Helios' chunks with their multi-scale history, SkyReels-V2's overlapping diffusion-forcing
windows).

A family returns a :class:`WindowedSampling` from its ``sampling_windows`` hook. The core plans every window
before any weight loads (each window's latent grid meets the parallel rules; a noise file holds every draw), then,
window by window: asks the plugin for the window's start (:meth:`WindowedSampling.start`: initial latents,
sampler plan, conditioning), runs the ordinary denoising loop over it (one compiled step per window shape, the
loaded weights, offload and parallel layouts as any run), hands the final latents back
(:meth:`WindowedSampling.finish`), decodes the new frames and appends them to the output as they come. Device
memory holds one window and its conditioning: the finished windows' latents and frames live on the host.

A causal family (each chunk attends to the keys and values of the chunks before it, :mod:`vidax_core.causal`)
declares its cache in :attr:`WindowedSampling.cache`: the core then allocates it for the call, hands every
window's steps the cache under the window's view (:attr:`WindowStart.cache_view`, the model's ``kv_cache`` keyword
input) and, after each window, runs the cache-writing model call the window asks for (:attr:`WindowDone.cache_fill`).
A window of no steps (``Window.num_steps == 0``) is not sampled: its start latents are its result (a chunk of a
conditioning clip the reference only writes into the cache).

Noise: a window draws noise through the ``draw(shape)`` it is given, in the reference pipeline's draw order and
layout; draw ``n`` is the array ``noise_n`` of a ``sampling.initial_noise`` .npz, else
``jax.random.normal(fold_in(key(seed), n), shape)``. Step noise a conditioning asks for
(:attr:`WindowStart.step_noise`) is drawn the same way, so a run replays a reference's every draw.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Mapping, Sequence

import numpy as np

CONTINUE = "continue"  # the reference decodes the joined latents once: the windows are decoded as one stream
SEPARATE = "separate"  # the reference decodes each window's latents on their own and joins the frames


@dataclass(frozen=True)
class Window:
    """One window as planned before any weight loads: the latent grid (frames, height, width) its denoiser runs
    on, its number of denoiser evaluations (steps, or diffusion-forcing rows), the shapes of the noise it draws in
    order (its initial noise first, then any per-step draws), and ``key``: whatever besides array shapes decides
    its compiled step (windows with equal grids and keys share one)."""

    grid: tuple[int, int, int]
    num_steps: int
    draws: tuple[tuple[int, ...], ...] = ()
    key: Hashable = ()


@dataclass(frozen=True)
class CacheFill:
    """A model call that writes into a causal run's KV cache: the model at ``latents`` (batch 1, the DiT's layout),
    a ``timestep`` for every row and the keyword inputs ``arrays`` (batch 1), with the cache under ``view``
    (:class:`vidax_core.causal.kv.View`, with writes) whose write ``starts`` (one per write) are traced; the
    model returns the written cache."""

    latents: np.ndarray
    view: Any
    starts: tuple[int, ...] = ()
    timestep: float = 0.0
    arrays: Mapping[str, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True)
class WindowStart:
    """What a window starts from: its initial ``latents`` (in the DiT's layout), the ``sampler`` and its ``plan``,
    the :class:`vidax_core.model_api.Conditioning` (history or prefix, per-frame inputs; None for none), and
    ``step_noise(i)``: the array the conditioning reads as ``step_noise`` at step ``i`` (None: the core's seeded
    draw of ``Conditioning.step_noise_shape``); ``guide``: the window's guidance when it differs from the run's
    (same branches: a per-stage zero-init), None for the run's; ``cache_view``: how a causal run's steps read its
    KV cache (:class:`vidax_core.causal.kv.View`), None for no cache."""

    latents: np.ndarray
    sampler: Any = None
    plan: Any = None
    conditioning: Any = None
    step_noise: Callable[[int], np.ndarray] | None = None
    guide: Any = None
    cache_view: Any = None


@dataclass(frozen=True)
class WindowDone:
    """What a finished window leaves: ``output``, the latents it adds to what ``output.save_latents`` writes
    (joined on the frame axis over the windows), and ``decode``, the latents whose frames it adds to the video; both
    None for a window whose latents only start the next one (a coarse stage of a coarse-to-fine chunk);
    ``cache_fill``: the model call that writes this window into a causal run's KV cache, None for none."""

    output: np.ndarray | None
    decode: np.ndarray | None
    cache_fill: CacheFill | None = None


class WindowedSampling:
    """A chunked run's plan and state (one object per call). A family subclasses it and fills:

    * ``windows``: every :class:`Window`, in order, known before anything loads;
    * ``decode``: :data:`CONTINUE` or :data:`SEPARATE` (how the reference decodes, see the module docstring);
    * ``num_frames``: the frames the video keeps (a reference that trims the joined frames), None for all;
    * ``cache``: a causal run's :class:`vidax_core.causal.kv.CacheSpec`, None for none;
    * ``output_axis``: the axis the windows' outputs are joined on (the frame axis of (B, C, F, H, W) by default;
      0 for windows that are spatial tiles of one video, each output a batch of tiles);
    * :meth:`start` and :meth:`finish`, called once per window in order.
    """

    windows: Sequence[Window] = ()
    decode: str = CONTINUE
    num_frames: int | None = None
    output_axis: int = 2
    cache: Any = None

    def prepare(self, vae: Any) -> None:
        """Called once, before the first window, with the call's VAE: encode the media the windows start from (an
        image, a clip to continue). The default does nothing."""

    def start(self, k: int, draw: Callable[[tuple[int, ...]], np.ndarray], sampler: Any) -> WindowStart:
        """Window ``k``'s start. ``draw(shape)`` gives the run's next noise draw; ``sampler`` is the run's sampler
        (``sampling.scheduler``, the family's ``scheduler`` hook or the checkpoint's scheduler config)."""
        raise NotImplementedError

    def finish(self, k: int, latents: np.ndarray) -> WindowDone:
        """Window ``k``'s final latents (host, after the conditioning's ``finalize``) -> what it leaves; keep
        whatever later windows condition on."""
        raise NotImplementedError

    def extend(self, run: Any) -> "WindowedSampling":
        """A causal run kept its cache (and this object, its history): the windows that continue its video by the
        frames ``run`` asks for (``run.sampling.num_frames - 1`` frames, a whole number of the VAE's frame groups),
        with ``run``'s prompt and seed. Raises :class:`vidax_core.errors.UserError` when the family cannot."""
        from vidax_core.errors import UserError

        raise UserError("this model's video cannot be continued from its kept state")

    def pending_fill(self) -> CacheFill | None:
        """The cache write a continuation runs before its first window: the last window's, which a causal reference
        does not make (no chunk follows it). None: nothing to write."""
        return None

    @property
    def draws(self) -> list[tuple[int, ...]]:
        """Every draw of the run, in order (what a ``sampling.initial_noise`` .npz holds as noise_0, noise_1...)."""
        return [tuple(int(v) for v in d) for w in self.windows for d in w.draws]

    @property
    def total_steps(self) -> int:
        return int(sum(w.num_steps for w in self.windows))
