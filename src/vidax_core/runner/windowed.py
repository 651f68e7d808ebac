"""A chunked run (:mod:`vidax_core.windows`): a video made window by window by a loaded model.

:func:`plan` asks the family for its windows and checks them before any weight loads (the caller checks each
window's latent grid against the parallel rules; here: no step cache, a noise file holds every draw).
:func:`generate` then runs the windows in order, each through the ordinary denoising pass
(:func:`vidax_core.runner.sampling.sample_pass`: the loaded experts, offload, the compiled step of the window's
shape), hands its latents back to the family, decodes the window's new frames and appends them to the mp4 (one
stream: nothing is left under ``output.path`` unless the whole run completes) and to ``on_chunk(frames, k, n)``.

Device memory holds one window: the pass returns its latents to the host, the finished windows' latents and
frames stay there. The run's metrics add each window's times and ``device_peak_bytes``: the backend's peak
(``memory_stats``) where it keeps one, else the largest total of live device arrays seen after each step
(``device_peak_source`` says which); with live arrays also ``device_run_peak_bytes``, that peak above what was
live when the run started, the figure a test compares between a 4-window and an 8-window call of one pipe.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

import jax
import numpy as np

from vidax_core.errors import UserError
from vidax_core.io.draws import Draws, check_draws
from vidax_core.io.video import Mp4Stream
from vidax_core.model_api import Decoded, SamplingPass
from vidax_core.parallel import distributed
from vidax_core.runner import device_oom, memory, throughput
from vidax_core.runner.metrics import steady_step_s
from vidax_core.windows import CONTINUE, SEPARATE, WindowedSampling

OnChunk = Callable[[np.ndarray, int, int], None]


def plan(spec: Any, ckpt: Any, cfg: Any, plugins: Any) -> WindowedSampling | None:
    """The family's windows for ``cfg`` (None: an ordinary run), checked: the plan is usable, no step cache is
    asked for, and a ``sampling.initial_noise`` file holds every draw with its shape."""
    ws = plugins.call("sampling_windows", spec, ckpt=ckpt, run=cfg)
    if ws is None:
        return None
    if not ws.windows or ws.decode not in (CONTINUE, SEPARATE):
        raise UserError(f"the plugin of {spec.id} planned no usable windows (plugin bug: report it)")
    if getattr(cfg, "cache", None):
        raise UserError(f"cache: step caching does not apply to {spec.id}, which makes its video window by "
                        "window: remove the cache key")
    if cfg.sampling.initial_noise:
        check_draws(cfg.sampling.initial_noise, ws.draws)
    return ws


def grids(ws: WindowedSampling) -> list[tuple[int, int, int]]:
    """The distinct latent grids of the windows, largest first (each must meet the parallel rules)."""
    seen = dict.fromkeys(tuple(int(v) for v in w.grid) for w in ws.windows)
    return sorted(seen, key=lambda g: -int(np.prod(g)))


def describe(ws: WindowedSampling) -> str:
    """One line: the number of windows, their latent frames and steps."""
    n = len(ws.windows)
    frames = [int(w.grid[0]) for w in ws.windows]
    steps = sorted({int(w.num_steps) for w in ws.windows})
    grids = [tuple(int(v) for v in w.grid) for w in ws.windows]
    if len({g[1:] for g in grids}) > 1:  # coarse-to-fine windows: each latent grid and how many windows use it
        counts = {g: grids.count(g) for g in sorted(set(grids), key=lambda g: int(np.prod(g)))}
        what = "on latent grids " + ", ".join(f"{'x'.join(map(str, g))} ({c})" for g, c in counts.items())
    elif len(set(frames)) == 1 and n > 8:
        what = f"of {frames[0]} latent frames"
    else:
        what = f"of {', '.join(map(str, frames))} latent frames"
    return (f"{n} window{'s' if n > 1 else ''} {what}, {'/'.join(map(str, steps))} steps each, "
            f"{ws.total_steps} in all")


class DeviceMemory:
    """Peak device bytes over a run: the backend's own peak where it keeps one (TPU, GPU), else the largest sum of
    live device arrays seen at each :meth:`sample` (the CPU backend keeps no statistics); with live arrays also
    how far that peak rose above the bytes live when the run started (what the run itself held: a loaded pipe's
    weights and caches excluded)."""

    def __init__(self) -> None:
        self.source = "memory_stats" if memory.peak_device_mb() is not None else "live_arrays"
        self.start = self.peak = self._live() if self.source == "live_arrays" else 0

    @staticmethod
    def _live() -> int:
        return sum(int(a.nbytes) for a in jax.live_arrays())

    def sample(self) -> None:
        if self.source == "live_arrays":
            self.peak = max(self.peak, self._live())

    def result(self) -> int:
        if self.source == "memory_stats":  # the devices' own peak (vidax_core.runner.memory)
            return int(memory.peak_device_mb() * 2**20)
        return self.peak

    def held(self) -> int | None:
        """Peak minus the bytes live at the start (None with the backend's statistics, a process-wide peak)."""
        return self.peak - self.start if self.source == "live_arrays" else None


class _Sampled:
    """The call's step progress with a device-memory sample after every step."""

    def __init__(self, progress: Any, memory: DeviceMemory) -> None:
        self.progress, self.memory = progress, memory

    def check(self) -> None:
        self.progress.check()

    def step(self) -> None:
        self.memory.sample()
        self.progress.step()


def _frames(decoded: Any) -> np.ndarray:
    return decoded.frames if isinstance(decoded, Decoded) else np.asarray(decoded)


def generate(model: Any, cfg: Any, call: Any, vae: Any, contexts: list, timer: Any, progress: Any, *,
             on_chunk: OnChunk | None = None, write_outputs: bool = True, step_key: Any = None,
             sample_pass: Callable[..., Any]) -> Any:
    """Every window of ``call.windows`` in order (see the module docstring); returns the joined latents (what
    ``output.save_latents`` writes), the frames and the metrics (a :class:`vidax_core.runner.outputs.RunResult`).
    ``sample_pass``: :func:`vidax_core.runner.sampling.sample_pass`, handed in by the loaded model."""
    from vidax_core.runner.outputs import RunResult, write_call_outputs

    ws: WindowedSampling = call.windows
    spec, reporter, n = model.spec, model.reporter, len(ws.windows)
    out = cfg.output
    writer = distributed.is_writer() and write_outputs
    draws = Draws(cfg.sampling.seed, cfg.sampling.initial_noise or None)
    memory = DeviceMemory()
    sampled = _Sampled(progress, memory)
    stream = getattr(vae, "decode_stream", None) if ws.decode == CONTINUE else None
    decoder = stream(tiling=cfg.vae.tiling) if stream is not None else None
    video = Mp4Stream(out.path, out.fps) if out.path and writer else None
    results, kept, frames, rows, decode_s = [], [], [], [], 0.0
    budget = ws.num_frames

    def emit(new: np.ndarray, k: int) -> None:
        nonlocal budget
        if budget is not None:
            new, budget = new[:, :budget], budget - min(budget, new.shape[1])
        if not new.shape[1]:
            return
        frames.append(new)
        if video is not None:
            video.append(new[0])
        if on_chunk is not None:
            on_chunk(new, k, n)

    try:
        for k, w in enumerate(ws.windows):
            t0 = time.perf_counter()
            start = ws.start(k, draws, call.samplers[0])
            with device_oom.phase("sampling"):
                res = sample_pass(spec, model.ckpt, SamplingPass(cfg), model.plugins, reporter, timer, model.experts,
                                  model.tracker, vae, start.sampler, start.guide or call.guides[0], tuple(w.grid),
                                  contexts, start.latents, first=(k == 0), label=f"window {k + 1}/{n}",
                                  splan=start.plan, progress=sampled,
                                  step_key=(step_key, "window", tuple(w.grid), w.key), cond=start.conditioning,
                                  step_noise=start.step_noise)
            # an owned host copy: on the CPU backend the pass's result is a view of its device buffer
            final = np.array(res.final, np.float32, copy=True)
            results.append(dataclasses.replace(res, final=None))
            done = ws.finish(k, final)
            if done.output is not None:
                kept.append(np.asarray(done.output))
            t1 = time.perf_counter()
            with device_oom.phase("decode"):  # beside the resident denoiser
                if done.decode is None:
                    pass
                elif decoder is not None:
                    emit(decoder.push(done.decode), k)
                elif ws.decode == SEPARATE:
                    emit(_frames(vae.decode_video(done.decode, tiling=cfg.vae.tiling)), k)
            t2 = time.perf_counter()
            decode_s += t2 - t1
            rows.append({"window": k, "latent_frames": int(w.grid[0]), "steps": int(res.splan.num_steps),
                         "frames": int(sum(f.shape[1] for f in frames)), "sampling_s": float(sum(res.step_times)),
                         "decode_s": t2 - t1, "total_s": t2 - t0})
            reporter.log(f"window {k + 1}/{n}: {res.splan.num_steps} steps, {rows[-1]['total_s']:.1f}s")
        latents = np.concatenate(kept, axis=ws.output_axis) if len(kept) > 1 else kept[0]
        if ws.decode == CONTINUE and decoder is None:  # a VAE without a stream decoder: the joined latents once
            t1 = time.perf_counter()
            with device_oom.phase("decode"):
                emit(_frames(vae.decode_video(latents, tiling=cfg.vae.tiling)), n - 1)
            decode_s += time.perf_counter() - t1
        if video is not None:
            video.commit()
    except BaseException:
        if video is not None:
            video.abort()
        raise
    video_frames = np.concatenate(frames, axis=1)
    timer.add("decode_s", decode_s)
    metrics = _metrics(model, cfg, call, results, timer, rows, memory)
    if writer:  # the mp4 was streamed above, window by window
        write_call_outputs(cfg, latents, video_frames, Decoded(video_frames), metrics, reporter, mp4=False)
    return RunResult(latents, video_frames, metrics)


def _metrics(model: Any, cfg: Any, call: Any, results: list, timer: Any, rows: list, memory: DeviceMemory) -> dict:
    """The run's metrics record (:func:`vidax_core.runner.metrics.run_metrics`, the windows as its passes) and
    the windows' own figures; ``per_step_s`` and the throughput entries are a full window's."""
    n = len(results)
    grids = [tuple(w.grid) for w in call.windows.windows]
    as_passes = dataclasses.replace(call, passes=[SamplingPass(cfg, name=f"window {k + 1}") for k in range(n)],
                                    samplers=[call.samplers[0]] * n, grids=grids)
    metrics = model.metrics(cfg, as_passes, results, timer, Decoded(np.zeros((1, 0, 1, 1, 3))))
    # per step and MFU of a full window (the largest, its later instance): the last window may be a shorter one
    k = max(range(n), key=lambda j: (int(np.prod(grids[j])), j))
    full = results[k]
    metrics["per_step_s"] = steady_step_s(full.step_times)
    metrics.update(throughput.run_metrics(model.experts[full.schedule[-1]].build, full.batches, grids[k],
                                          full.contexts, metrics["per_step_s"], metrics["parallel"]["devices"]))
    totals = [r["total_s"] for r in rows]
    metrics.update(windows=rows, num_windows=n,
                   per_window_s=float(np.median(totals[1:])) if n > 1 else float(totals[0]),
                   device_peak_bytes=memory.result(), device_peak_source=memory.source,
                   device_run_peak_bytes=memory.held())
    return metrics
