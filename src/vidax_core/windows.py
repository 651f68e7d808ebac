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

Noise: a window draws noise through the ``draw(shape)`` it is given, in the reference pipeline's draw order and
layout; draw ``n`` is the array ``noise_n`` of a ``sampling.initial_noise`` .npz, else
``jax.random.normal(fold_in(key(seed), n), shape)``. Step noise a conditioning asks for
(:attr:`WindowStart.step_noise`) is drawn the same way, so a run replays a reference's every draw.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Hashable, Sequence

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
class WindowStart:
    """What a window starts from: its initial ``latents`` (in the DiT's layout), the ``sampler`` and its ``plan``,
    the :class:`vidax_core.model_api.Conditioning` (history or prefix, per-frame inputs; None for none), and
    ``step_noise(i)``: the array the conditioning reads as ``step_noise`` at step ``i`` (None: the core's seeded
    draw of ``Conditioning.step_noise_shape``); ``guide``: the window's guidance when it differs from the run's
    (same branches: a per-stage zero-init), None for the run's."""

    latents: np.ndarray
    sampler: Any
    plan: Any
    conditioning: Any = None
    step_noise: Callable[[int], np.ndarray] | None = None
    guide: Any = None


@dataclass(frozen=True)
class WindowDone:
    """What a finished window leaves: ``output``, the latents it adds to what ``output.save_latents`` writes
    (joined on the frame axis over the windows), and ``decode``, the latents whose frames it adds to the video; both
    None for a window whose latents only start the next one (a coarse stage of a coarse-to-fine chunk)."""

    output: np.ndarray | None
    decode: np.ndarray | None


class WindowedSampling:
    """A chunked run's plan and state (one object per call). A family subclasses it and fills:

    * ``windows``: every :class:`Window`, in order, known before anything loads;
    * ``decode``: :data:`CONTINUE` or :data:`SEPARATE` (how the reference decodes, see the module docstring);
    * ``num_frames``: the frames the video keeps (a reference that trims the joined frames), None for all;
    * ``output_axis``: the axis the windows' outputs are joined on (the frame axis of (B, C, F, H, W) by default;
      0 for windows that are spatial tiles of one video, each output a batch of tiles);
    * :meth:`start` and :meth:`finish`, called once per window in order.
    """

    windows: Sequence[Window] = ()
    decode: str = CONTINUE
    num_frames: int | None = None
    output_axis: int = 2

    def start(self, k: int, draw: Callable[[tuple[int, ...]], np.ndarray], sampler: Any) -> WindowStart:
        """Window ``k``'s start. ``draw(shape)`` gives the run's next noise draw; ``sampler`` is the run's sampler
        (``sampling.scheduler``, the family's ``scheduler`` hook or the checkpoint's scheduler config)."""
        raise NotImplementedError

    def finish(self, k: int, latents: np.ndarray) -> WindowDone:
        """Window ``k``'s final latents (host, after the conditioning's ``finalize``) -> what it leaves; keep
        whatever later windows condition on."""
        raise NotImplementedError

    @property
    def draws(self) -> list[tuple[int, ...]]:
        """Every draw of the run, in order (what a ``sampling.initial_noise`` .npz holds as noise_0, noise_1...)."""
        return [tuple(int(v) for v in d) for w in self.windows for d in w.draws]

    @property
    def total_steps(self) -> int:
        return int(sum(w.num_steps for w in self.windows))
