"""The pieces of a chunked run (:mod:`vidax_core.windows`) that the one call flow (:mod:`.loaded`) uses.

:func:`plan` asks the family for its windows and checks them before any weight loads (the planner checks each
window's latent grid against the parallel rules; here: no step cache, a noise file holds every draw); a plan keeps
only the :class:`vidax_core.windows.Window` tuple and a causal run's KV cache spec. :func:`for_call` gives a call its
own :class:`~vidax_core.windows.WindowedSampling` (it accumulates the history the windows condition on, so no two
calls share one). :class:`FrameStream` takes each window's new frames to the mp4 (a fragmented mp4 that plays while
it grows under a hidden name, renamed into place when the whole run completes, else deleted) and to
``on_chunk(frames, k, n)``;
:class:`DeviceMemory` and :func:`add_window_metrics` give the run's metrics their window figures.

Device memory holds one window: a pass returns its latents to the host, the finished windows' latents and frames
stay there. The metrics add each window's times and ``device_peak_bytes``: the backend's peak (``memory_stats``)
where it keeps one, else the largest total of live device arrays seen after each step (``device_peak_source``
says which); with live arrays also ``device_run_peak_bytes``, that peak above what was live when the run started,
the figure a test compares between a 4-window and an 8-window call of one pipe.
"""

from __future__ import annotations

import dataclasses
import gc
from typing import Any, Callable, Sequence

import jax
import numpy as np

from vidax_core.errors import PluginError, UserError
from vidax_core.io.draws import check_draws
from vidax_core.io.video import Mp4Stream
from vidax_core.model_api import Decoded, SamplingPass
from vidax_core.report import memory, throughput
from vidax_core.runner import finite
from vidax_core.report.metrics import steady_step_s
from vidax_core.windows import CONTINUE, SEPARATE, Window, WindowedSampling

OnChunk = Callable[[np.ndarray, int, int], None]


def plan(spec: Any, ckpt: Any, cfg: Any, plugins: Any) -> tuple[tuple[Window, ...] | None, int | None, Any]:
    """The family's windows for ``cfg`` (None: an ordinary run), the frames the video will have and a causal run's
    KV cache spec (None for none), checked: the plan is usable, no step cache is asked for, and a
    ``sampling.initial_noise`` file holds every draw with its shape."""
    ws = _ask(spec, ckpt, cfg, plugins)
    if ws is None:
        return None, None, None
    if getattr(cfg, "cache", None):
        raise UserError(f"cache: step caching does not apply to {spec.id}, which makes its video window by "
                        "window: remove the cache key")
    if cfg.sampling.initial_noise:
        check_draws(cfg.sampling.initial_noise, ws.draws)
    return tuple(ws.windows), ws.num_frames, ws.cache


def for_call(spec: Any, ckpt: Any, cfg: Any, plugins: Any, planned: Sequence[Window]) -> WindowedSampling:
    """A call's own windowed sampling (hook ``sampling_windows`` again: its state starts empty), which must plan
    the windows the call was planned with."""
    ws = _ask(spec, ckpt, cfg, plugins)
    if ws is None or tuple(ws.windows) != tuple(planned):
        raise PluginError(spec.plugin, "sampling_windows", ValueError(
            "it planned other windows for the same call when asked again (one WindowedSampling per call, "
            "made from the call's config alone)"))
    return ws


def _ask(spec: Any, ckpt: Any, cfg: Any, plugins: Any) -> WindowedSampling | None:
    ws = plugins.call("sampling_windows", spec, ckpt=ckpt, run=cfg)
    if ws is not None and (not ws.windows or ws.decode not in (CONTINUE, SEPARATE)):
        raise UserError(f"the plugin of {spec.id} planned no usable windows (plugin bug: report it)")
    return ws


def grids(windows: Sequence[Window]) -> list[tuple[int, int, int]]:
    """The distinct latent grids of the windows, largest first (each must meet the parallel rules)."""
    seen = dict.fromkeys(tuple(int(v) for v in w.grid) for w in windows)
    return sorted(seen, key=lambda g: -int(np.prod(g)))


def describe(windows: Sequence[Window]) -> str:
    """One line: the number of windows, their latent frames and steps."""
    n = len(windows)
    frames = [int(w.grid[0]) for w in windows]
    steps = sorted({int(w.num_steps) for w in windows})
    grids = [tuple(int(v) for v in w.grid) for w in windows]
    if len({g[1:] for g in grids}) > 1:  # coarse-to-fine windows: each latent grid and how many windows use it
        counts = {g: grids.count(g) for g in sorted(set(grids), key=lambda g: int(np.prod(g)))}
        what = "on latent grids " + ", ".join(f"{'x'.join(map(str, g))} ({c})" for g, c in counts.items())
    elif len(set(frames)) == 1 and n > 8:
        what = f"of {frames[0]} latent frames"
    else:
        what = f"of {', '.join(map(str, frames))} latent frames"
    total = int(sum(w.num_steps for w in windows))
    return f"{n} window{'s' if n > 1 else ''} {what}, {'/'.join(map(str, steps))} steps each, {total} in all"


class FrameStream:
    """Where a chunked run's frames go as its windows complete: kept (joined at the end), appended to the mp4
    (``path``, a fragmented mp4 that plays while it grows; None writes none) and handed to ``on_chunk(frames, k,
    n)``; cut to ``budget`` frames in all (a reference that trims the joined video), None for every frame.
    :meth:`commit` finishes the mp4, :meth:`abort` deletes it."""

    def __init__(self, path: str | None, fps: int, n: int, budget: int | None, on_chunk: OnChunk | None) -> None:
        self.video = Mp4Stream(path, fps, live=True) if path else None
        self.n, self.budget, self.on_chunk = n, budget, on_chunk
        self.frames: list[np.ndarray] = []

    def emit(self, decoded: Any, k: int) -> None:
        new = decoded.frames if isinstance(decoded, Decoded) else np.asarray(decoded)
        if self.budget is not None:
            new, self.budget = new[:, :self.budget], self.budget - min(self.budget, new.shape[1])
        if not new.shape[1]:
            return
        finite.check_output(new, label=f"window {k + 1}/{self.n}")  # before a frame of it is written
        self.frames.append(new)
        if self.video is not None:
            self.video.append(new[0])
        if self.on_chunk is not None:
            self.on_chunk(new, k, self.n)

    def count(self) -> int:
        return int(sum(f.shape[1] for f in self.frames))

    def joined(self) -> np.ndarray:
        return np.concatenate(self.frames, axis=1)

    def commit(self) -> None:
        if self.video is not None:
            self.video.commit()

    def abort(self) -> None:
        if self.video is not None:
            self.video.abort()


class DeviceMemory:
    """Peak device bytes over a run: the backend's own peak where it keeps one (TPU, GPU), else the largest sum of
    live device arrays seen at each :meth:`sample` (the CPU backend keeps no statistics); with live arrays also
    how far that peak rose above the bytes live when the run started (what the run itself held: a loaded pipe's
    weights and caches excluded)."""

    def __init__(self) -> None:
        self.source = "memory_stats" if memory.peak_device_mb() is not None else "live_arrays"
        if self.source == "live_arrays":
            gc.collect()  # arrays freed but not yet collected would count in the start, then leave it mid-run
        self.start = self.peak = self._live() if self.source == "live_arrays" else 0

    @staticmethod
    def _live() -> int:
        return sum(int(a.nbytes) for a in jax.live_arrays())

    def sample(self) -> None:
        if self.source == "live_arrays":
            self.peak = max(self.peak, self._live())

    def result(self) -> int:
        if self.source == "memory_stats":  # the devices' own peak (vidax_core.report.memory)
            return int(memory.peak_device_mb() * 2**20)
        return self.peak

    def held(self) -> int | None:
        """Peak minus the bytes live at the start (None with the backend's statistics, a process-wide peak)."""
        return self.peak - self.start if self.source == "live_arrays" else None


def as_passes(call: Any, results: Sequence[Any]) -> Any:
    """A chunked call's plan as the metrics record reads passes: one pass per sampled window (a given one, of no
    steps, has none), at the window's grid."""
    cfg, windows = call.cfg, call.windows
    sampled = [r.window for r in results]
    return dataclasses.replace(call, passes=[SamplingPass(cfg, name=f"window {k + 1}") for k in sampled],
                               samplers=[call.samplers[0]] * len(sampled),
                               grids=[tuple(windows[k].grid) for k in sampled])


def add_window_metrics(metrics: dict, call: Any, results: list, rows: list, device: DeviceMemory,
                       experts: list, kv_cache_bytes: int | None = None) -> dict:
    """The windows' own figures added to a chunked call's metrics record; ``per_step_s`` and the throughput
    entries become a full window's (the largest, its later instance: the last window may be a shorter one); a
    causal run adds its KV cache's bytes (the whole cache, every device's part)."""
    n = len(rows)
    grids = [tuple(call.windows[r.window].grid) for r in results]
    k = max(range(len(results)), key=lambda j: (int(np.prod(grids[j])), j))
    full = results[k]
    metrics["per_step_s"] = steady_step_s(full.step_times)
    metrics.update(throughput.run_metrics(experts[full.schedule[-1]].build, full.batches, grids[k],
                                          full.contexts, metrics["per_step_s"], metrics["parallel"]["devices"],
                                          metrics.get("attention_calls")))
    totals = [r["total_s"] for r in rows]
    metrics.update(windows=rows, num_windows=n,
                   per_window_s=float(np.median(totals[1:])) if n > 1 else float(totals[0]),
                   device_peak_bytes=device.result(), device_peak_source=device.source,
                   device_run_peak_bytes=device.held())
    if kv_cache_bytes is not None:  # a causal run: its cache and the time its writes took (in the phases' "other")
        metrics["kv_cache_bytes"] = int(kv_cache_bytes)
        metrics["cache_fill_s"] = float(sum(r.get("cache_fill_s", 0.0) for r in rows))
    return metrics
