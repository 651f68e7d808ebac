"""Helios' chunked sampling (diffusers ``HeliosPipeline``, text-to-video) as a chunked run.

The video is made in ``ceil(num_frames / F)`` chunks of ``num_latent_frames_per_chunk`` latent frames (F =
``(n - 1) * 4 + 1`` video frames each). A history of ``sum(history_sizes)`` latent frames (zeros before the first
chunk) keeps the newest latents; each chunk is conditioned on it split into the long, mid and 1x scales, the short
scale led by the video's first latent frame (zeros for the first chunk, then the first chunk's first frame), at
the fixed frame indices of the pipeline's layout. Each chunk is one ordinary denoising loop over the
HeliosScheduler plan (flow sigmas ``linspace(0.999, 0, N + 1)[:-1]`` shifted by ``mu`` of the chunk's token count),
decoded on its own; the video keeps ``(frames - 1) // 4 * 4 + 1`` of the joined frames. One draw per chunk, its
noise (1, C, chunk frames, h, w).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from vidax_core.model_api import Conditioning
from vidax_core.windows import SEPARATE, Window, WindowDone, WindowedSampling, WindowStart

TEMPORAL = 4  # the Wan VAE's time compression
SCALE_NAMES = ("long", "mid", "short")


def chunk_count(run: Any) -> int:
    nlfc = int(dict(run.options or {}).get("num_latent_frames_per_chunk", 9))
    frames = (nlfc - 1) * TEMPORAL + 1
    return max(1, (int(run.sampling.num_frames) + frames - 1) // frames)


def shift_mu(tokens: int, scheduler: dict) -> float:
    """The pipeline's ``calculate_shift`` of a chunk's token count, with the scheduler config's bounds."""
    lo, hi = scheduler.get("base_image_seq_len", 256), scheduler.get("max_image_seq_len", 4096)
    b0, b1 = scheduler.get("base_shift", 0.5), scheduler.get("max_shift", 1.15)
    m = (b1 - b0) / (hi - lo)
    return tokens * m + (b0 - m * lo)


def layout(history_sizes: list[int], chunk: int) -> dict[str, np.ndarray]:
    """The fixed frame indices (1, n) of the pipeline's layout with ``keep_first_frame``:
    [first frame, long, mid, 1x, chunk] numbered from 0; the short scale is [first frame, 1x]."""
    long, mid, one = history_sizes
    idx = np.arange(1 + long + mid + one + chunk)
    cuts = np.cumsum([1, long, mid, one])
    prefix, lg, md, ox, hidden = np.split(idx, cuts)
    return {"indices_hidden_states": hidden[None], "indices_latents_history_short": np.concatenate([prefix, ox])[None],
            "indices_latents_history_mid": md[None], "indices_latents_history_long": lg[None]}


class HeliosChunks(WindowedSampling):
    """The chunks of one call (see the module docstring)."""

    decode = SEPARATE

    def __init__(self, run: Any, grid_hw: tuple[int, int], channels: int, patch: tuple[int, int, int],
                 scheduler: dict) -> None:
        opts = dict(run.options or {})
        self.sizes = [int(v) for v in opts.get("history_sizes", [16, 2, 1])]
        self.chunk = int(opts.get("num_latent_frames_per_chunk", 9))
        self.skip_first = bool(opts.get("is_skip_first_chunk", False))
        self.steps = int(run.sampling.num_steps)
        self.shape = (1, int(channels), self.chunk, *(int(v) for v in grid_hw))
        n = chunk_count(run)
        self.windows = tuple(Window(self.shape[2:], self.steps, (self.shape,), key="chunk") for _ in range(n))
        frames = n * ((self.chunk - 1) * TEMPORAL + 1)
        self.num_frames = (frames - 1) // TEMPORAL * TEMPORAL + 1
        tokens = self.chunk * grid_hw[0] * grid_hw[1] // math.prod(patch)
        self.mu = shift_mu(tokens, scheduler)
        self.sigmas = np.linspace(0.999, 0.0, self.steps + 1)[:-1]
        self.indices = {k: v.astype(np.int32) for k, v in layout(self.sizes, self.chunk).items()}
        self.history = np.zeros((1, channels, sum(self.sizes), *self.shape[3:]), np.float32)
        self.first: np.ndarray | None = None

    def start(self, k: int, draw: Callable, sampler: Any) -> WindowStart:
        long, mid, one = np.split(self.history, np.cumsum(self.sizes[:2]), axis=2)
        first = self.first if self.first is not None else np.zeros_like(one[:, :, :1])
        arrays = {"latents_history_short": np.concatenate([first, one], axis=2), "latents_history_mid": mid,
                  "latents_history_long": long, **self.indices}
        latents = np.asarray(draw(self.shape), np.float32)
        plan = sampler.plan(self.steps, sigmas=self.sigmas, mu=self.mu)
        return WindowStart(latents, sampler, plan, Conditioning(arrays=arrays, model_kwargs=tuple(arrays)))

    def finish(self, k: int, latents: np.ndarray) -> WindowDone:
        latents = np.asarray(latents, np.float32)
        if (k == 0 and self.first is None) or (self.skip_first and k == 1):
            self.first = latents[:, :, :1].copy()
        self.history = np.concatenate([self.history, latents], axis=2)[:, :, -sum(self.sizes):]
        return WindowDone(output=latents, decode=latents)


def example_inputs(cfg: Any, sizes: list[int], batch: int, grid: Any, text: int) -> tuple[None, Any, dict]:
    """``DitBuild.example_inputs``: the text context and a chunk's history at the three scales with the pipeline's
    frame indices (``vidax bench --random-dit`` times a call with its history tokens)."""
    f, h, w = grid
    long, mid, one = sizes
    hist = {"latents_history_short": ((batch, cfg.in_channels, 1 + one, h, w), "float32"),
            "latents_history_mid": ((batch, cfg.in_channels, mid, h, w), "float32"),
            "latents_history_long": ((batch, cfg.in_channels, long, h, w), "float32")}
    idx = {k: np.repeat(v.astype(np.int32), batch, axis=0) for k, v in layout(list(sizes), f).items()}
    return None, ((batch, text, cfg.text_dim), cfg.dtype), {**hist, **idx}
