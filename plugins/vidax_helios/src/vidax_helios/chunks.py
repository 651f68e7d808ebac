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

    def conditioning(self) -> Conditioning:
        """The next chunk's history at its three scales and the layout's frame indices."""
        long, mid, one = np.split(self.history, np.cumsum(self.sizes[:2]), axis=2)
        first = self.first if self.first is not None else np.zeros_like(one[:, :, :1])
        arrays = {"latents_history_short": np.concatenate([first, one], axis=2), "latents_history_mid": mid,
                  "latents_history_long": long, **self.indices}
        return Conditioning(arrays=arrays, model_kwargs=tuple(arrays))

    def start(self, k: int, draw: Callable, sampler: Any) -> WindowStart:
        latents = np.asarray(draw(self.shape), np.float32)
        plan = sampler.plan(self.steps, sigmas=self.sigmas, mu=self.mu)
        return WindowStart(latents, sampler, plan, self.conditioning())

    def finish(self, k: int, latents: np.ndarray) -> WindowDone:
        latents = np.asarray(latents, np.float32)
        if (k == 0 and self.first is None) or (self.skip_first and k == 1):
            self.first = latents[:, :, :1].copy()
        self.history = np.concatenate([self.history, latents], axis=2)[:, :, -sum(self.sizes):]
        return WindowDone(output=latents, decode=latents)


# ---- HeliosPyramidPipeline (Helios-Mid, Helios-Distilled) ----------------------------------------------------


def downsample(x: np.ndarray) -> np.ndarray:
    """(B, C, F, H, W) -> (B, C, F, H/2, W/2): the pipeline's ``F.interpolate(mode="bilinear") * 2`` per frame, which
    at exactly half size averages each 2x2 block (weights 1/2 in each direction, torch's operation order)."""
    a, b = x[..., 0::2, 0::2], x[..., 0::2, 1::2]
    c, d = x[..., 1::2, 0::2], x[..., 1::2, 1::2]
    h = np.float32(0.5)
    return ((h * (h * a + h * b) + h * (h * c + h * d)) * np.float32(2)).astype(np.float32)


def upsample(x: np.ndarray) -> np.ndarray:
    """(B, C, F, h, w) -> (B, C, F, 2h, 2w): ``F.interpolate(mode="nearest")`` at twice the size."""
    return np.repeat(np.repeat(x, 2, axis=3), 2, axis=4)


def block_noise(z: np.ndarray, gamma: float, shape: tuple[int, ...]) -> np.ndarray:
    """The pipeline's ``sample_block_noise``: standard normal draws ``z`` (n, 4), one row per 2x2 block of
    ``shape`` (B, C, F, H, W), correlated within the block (covariance ``(1 + gamma) I - gamma + 1e-8 I``) and laid
    out over the blocks. The Cholesky factor is taken in float64, then used in float32: at the default gamma 1/3
    the covariance is singular but for the 1e-8 (eigenvalue ``1 - 3 gamma``), which a float32 factorisation (torch
    on the CPU) refuses; the factor's last entry is then 1e-4."""
    cov = np.eye(4) * (1 + gamma) - np.ones((4, 4)) * gamma + np.eye(4) * 1e-8
    noise = np.asarray(z, np.float32) @ np.linalg.cholesky(cov).astype(np.float32).T
    b, c, f, hh, ww = shape
    noise = noise.reshape(b, c, f, hh // 2, ww // 2, 2, 2).transpose(0, 1, 2, 3, 5, 4, 6)
    return noise.reshape(shape).astype(np.float32)


def pyramid_guidance(run: Any, zero_star: bool, stage: int):
    """The guidance of a pyramid stage: CFG-Zero* when the checkpoint asks for it (``is_cfg_zero_star``) and the
    scale is above 1, its zero-init on the first ``zero_steps + 1`` steps of the first stage only
    (``use_zero_init``); None for the core's default (classifier-free, or one pass at scale 1)."""
    from vidax_core.guidance import CFGZeroStar

    g = float(run.sampling.guidance_scale)
    if not zero_star or g <= 1.0:
        return None
    o = dict(run.options or {})
    zero = int(o.get("zero_steps", 1)) if stage == 0 and o.get("use_zero_init", True) else -1
    return CFGZeroStar(scale=g, zero_steps=zero)


class HeliosPyramidChunks(HeliosChunks):
    """HeliosPyramidPipeline's chunks: the chunk layout and history of :class:`HeliosChunks`, each chunk denoised
    coarse to fine in ``len(pyramid_num_inference_steps_list)`` stages, one window each. The first stage starts
    from the chunk's noise (drawn at full size) halved in size per further stage; each later stage from the
    previous one's result doubled in size (nearest) and re-noised, ``alpha x + beta block_noise``, with one draw
    (n, 4) of block noise at the stage's size. Stage ``s`` runs on latents ``2^(S-1-s)`` times smaller, with the
    shift ``mu`` of the previous stage's token count (the pipeline computes it before doubling the latents; the
    first stage its own) and the pyramid scheduler's stage plan (DMD: twice the steps in the first
    chunk with ``is_amplify_first_chunk``); only the last stage's latents join the history and the video."""

    def __init__(self, run: Any, grid_hw: tuple[int, int], channels: int, patch: tuple[int, int, int],
                 scheduler: dict, zero_star: bool) -> None:
        super().__init__(run, grid_hw, channels, patch, scheduler)
        opts = dict(run.options or {})
        self.stage_steps = [int(v) for v in opts.get("pyramid_num_inference_steps_list", [10, 10, 10])]
        self.amplify = bool(opts.get("is_amplify_first_chunk", False))
        self.dmd = scheduler.get("_class_name") == "HeliosDMDScheduler"
        self.gamma = float(scheduler.get("gamma", 1 / 3))
        self.run, self.zero_star, self.scheduler = run, zero_star, scheduler
        stages = len(self.stage_steps)
        n = len(self.windows)
        windows, self.mus, self.stage_shapes = [], [], []
        for s in range(stages):
            m = 2 ** (stages - 1 - s)
            shape = (1, int(channels), self.chunk, grid_hw[0] // m, grid_hw[1] // m)
            self.stage_shapes.append(shape)
            # the pipeline computes a stage's shift before it doubles the latents: from the previous stage's size
            prev = self.stage_shapes[max(s - 1, 0)]
            self.mus.append(shift_mu(self.chunk * prev[3] * prev[4] // math.prod(patch), scheduler))
        for k in range(n):
            for s, steps in enumerate(self.stage_steps):
                shape = self.stage_shapes[s]
                draw = self.shape if s == 0 else (math.prod(shape) // 4, 4)
                steps = steps * 2 if self.dmd and self.amplify and k == 0 else steps
                windows.append(Window(shape[2:], steps, (draw,), key=("chunk", s)))
        self.windows = tuple(windows)
        self.stages = stages
        self.prev: np.ndarray | None = None

    def start(self, k: int, draw: Callable, sampler: Any) -> WindowStart:
        chunk, s = divmod(k, self.stages)
        if s == 0:
            self.cond = self.conditioning()
            latents = np.asarray(draw(self.shape), np.float32)
            for _ in range(self.stages - 1):
                latents = downsample(latents)
        else:
            shape = self.stage_shapes[s]
            alpha, beta = sampler.renoise(s)
            noise = block_noise(np.asarray(draw((math.prod(shape) // 4, 4))), self.gamma, shape)
            latents = (np.float32(alpha) * upsample(self.prev) + np.float32(beta) * noise).astype(np.float32)
        plan = sampler.stage_plan(s, self.stage_steps[s], self.mus[s], amplify=self.amplify and chunk == 0)
        return WindowStart(latents, sampler.stage_sampler(), plan, self.cond,
                           guide=pyramid_guidance(self.run, self.zero_star, s))

    def finish(self, k: int, latents: np.ndarray) -> WindowDone:
        chunk, s = divmod(k, self.stages)
        if s < self.stages - 1:
            self.prev = np.asarray(latents, np.float32)
            return WindowDone(output=None, decode=None)
        self.prev = None
        return super().finish(chunk, latents)


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
