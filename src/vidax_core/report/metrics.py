"""The metrics record of one generated video (``output.metrics``) and the one-line summary ``vidax run`` prints."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
import psutil

from vidax_core import precision
from vidax_core.config import RunConfig
from vidax_core.model_api import Decoded
from vidax_core.report import memory, throughput
from vidax_core.report.progress import Timer


def run_metrics(spec: Any, cfg: RunConfig, plan: Any, results: list, timer: Timer, decoded: Decoded, *,
                experts: list, tracker: Any, backend: str, memory_phases: dict, prompt_cache_hits: int,
                text_encoder_on: Any = None, attention_calls: dict | None = None) -> dict[str, Any]:
    """The metrics record of one generated video (``output.metrics``): ``plan`` the call's plan, ``results`` its
    passes' :class:`vidax_core.runner.sampling.PassResult`, ``experts`` and ``tracker`` the loaded denoisers and
    their resident bytes, ``memory_phases`` the anonymous memory per phase of this load and call."""
    passes, samplers = plan.passes, plan.samplers
    last = results[-1]
    step_times = [t for r in results for t in r.step_times]
    compile_s = sum(max(r.step_times[0] - steady_step_s(r.step_times), 0.0) for r in results)
    timer.add("compile_s", compile_s)
    timer.add("sampling_s", float(sum(step_times)))
    offloaded = [e for e in experts if e.placement.offload_groups]
    placement0 = experts[0].placement
    p0 = placement0.plan
    metrics = {
        "model": spec.id,
        "startup_s": timer.phases.get("startup_s", 0.0),
        "load_s": timer.phases.get("load_s", 0.0),
        "encode_s": timer.phases.get("encode_s", 0.0),
        "compile_s": timer.phases.get("compile_s", 0.0),
        "sampling_s": timer.phases.get("sampling_s", 0.0),
        "per_step_s": steady_step_s(last.step_times),
        "step_times_s": step_times,
        "num_steps": sum(r.splan.num_steps for r in results),
        "decode_s": timer.phases.get("decode_s", 0.0),
        "total_s": timer.total(),
        "peak_rss_mb": peak_rss_mb(),
        # of that resident peak, what the device runtime took when it started (a TPU v5e's ~14 GB) and the rest
        "runtime_host_mb": memory.runtime_mb(),
        "vidax_host_mb": round(peak_rss_mb() - (memory.runtime_mb() or 0.0), 1),
        # anonymous memory only (the mapped checkpoint's pages are the OS's to drop), and the devices' own peak
        "peak_anon_mb": memory.peak_anon_mb(),
        # per phase of this load and call: the anonymous MiB at its start and the most seen during it
        "anon_mb_phases": {k: {"start": round(w.base, 1), "peak": round(w.peak, 1)}
                           for k, w in memory_phases.items()},
        "peak_device_mb": memory.peak_device_mb(),
        "matmul_precision": precision.effective(cfg),
        "text_encoder_on": getattr(text_encoder_on, "where", text_encoder_on),
        # where the prompt encoders computed, their towers' weight dtypes, a streamed one's layers per chunk
        "text_encoders": text_encoder_on.describe() if hasattr(text_encoder_on, "describe") else None,
        "latent_shape": _shape_list(last.shapes),
        "sampler": getattr(samplers[-1], "name", type(samplers[-1]).__name__),
        "guidance": last.guide.describe(),
        "guidance_branches": [b.name for b in last.guide.branches],
        "model_calls_per_step": [list(b) for b in last.batches],
        "experts": [e.build.component for e in experts],
        "expert_per_step": [experts[k].build.component for r in results for k in r.schedule],
        "backend": jax.default_backend(),
        "attention_backend": backend,
        "parallel": {"dp": p0.dp, "tp": p0.tp, "sp": p0.sp, "devices": p0.size, "processes": jax.process_count()},
        "offload": {"enabled": bool(offloaded), "chunk_size": cfg.offload.chunk_size,
                    "storage": cfg.offload.storage if offloaded else None,
                    "host_bytes": sum(pl.host.host_bytes() for e in offloaded for pl in e.step.pools)
                    if offloaded else None,
                    "groups": list(placement0.offload_groups),
                    "non_block_weight_bytes": int(tracker.base) if offloaded else None,
                    "chunk_weight_bytes": {pl.name: int(pl.chunk_bytes) for pl in offloaded[0].step.pools}
                    if offloaded else None,
                    # where the streamed chunks live (pinned_host: DMA-able) and, per group from its later steps,
                    # one chunk's transfer and compute timed apart vs streamed together, and the share hidden
                    "host_memory": offloaded[0].step.pools[0].host.memory if offloaded else None,
                    "overlap": {pl.name: pl.overlap for pl in offloaded[0].step.pools} if offloaded else None},
        # Largest per-device bytes of DiT weights resident on devices at any time during sampling (non-block
        # params + the at most two streamed chunks with offload; all params without).
        "peak_resident_weight_bytes": int(tracker.peak),
        "weight_storage": [e.build.weight_storage for e in experts],  # 8-bit block weights per expert, or None
        "audio": decoded.audio is not None,
        "passes": [{"name": p.name, "height": p.run.sampling.height, "width": p.run.sampling.width,
                    "num_steps": r.splan.num_steps, "latent_shape": _shape_list(r.shapes),
                    "per_step_s": steady_step_s(r.step_times)} for p, r in zip(passes, results)],
        "compiled_step": any(r.compiled for r in results),
        "prompt_cache_hits": prompt_cache_hits,
    }
    metrics.update(time_accounts(metrics, timer, cfg))
    jax.effects_barrier()  # sparse attention's density measurements of the steps that ran have all arrived
    metrics.update(throughput.run_metrics(experts[last.schedule[-1]].build, last.batches, plan.grids[-1],
                                          last.contexts, metrics["per_step_s"], p0.size, attention_calls))
    metrics["attention_calls"] = {k: dict(v) for k, v in (attention_calls or {}).items()}
    if any(r.cache is not None for r in results):
        metrics["cache"] = results[-1].cache if len(results) == 1 else [r.cache for r in results]
    return metrics


def time_accounts(metrics: dict[str, Any], timer: Timer, cfg: RunConfig) -> dict[str, Any]:
    """Where the call's wall time went, in phases that add up to ``total_s`` (``phases_s``: start-up, load, encode,
    the sampling's setup (conditioning, start latents, inputs placed), the first step's compile, the steps, decode
    and the rest), what each phase spent compiling
    (``compile_by_phase``: XLA compiles, tracing, programs, persistent-cache hits and misses) and the compilation
    cache's part (``compilation_cache``)."""
    from vidax_core.report.compile_watch import FIELDS, add

    total = metrics["total_s"]
    phases = {"startup": metrics["startup_s"], "load": metrics["load_s"], "encode": metrics["encode_s"],
              "sampling_setup": timer.phases.get("sampling_setup_s", 0.0), "step_compile": metrics["compile_s"],
              "steps": max(metrics["sampling_s"] - metrics["compile_s"], 0.0), "decode": metrics["decode_s"]}
    phases["other"] = max(total - sum(phases.values()), 0.0)
    compiles = {k: {f: (round(v[f], 3) if isinstance(v.get(f), float) else v.get(f, 0)) for f in FIELDS}
                for k, v in timer.compiles.items()}
    every: dict[str, float] = {}
    for v in timer.compiles.values():
        every = add(every, v)
    cache = {"enabled": bool(cfg.runtime.compilation_cache),
             "dir": cfg.runtime.compilation_cache_dir if cfg.runtime.compilation_cache else None,
             "programs": int(every.get("programs", 0)), "hits": int(every.get("cache_hits", 0)),
             "misses": int(every.get("cache_misses", 0)), "compile_s": round(every.get("compile_s", 0.0), 3),
             "saved_s": round(every.get("saved_s", 0.0), 3)}
    return {"phases_s": {k: round(v, 3) for k, v in phases.items()}, "compile_by_phase": compiles,
            "compilation_cache": cache}


def summary(metrics: dict[str, Any], wall_s: float | None = None) -> str:
    """The closing lines of a run: where the wall time went, phase by phase (the phases add up to the total;
    ``wall_s``, the whole command's seconds, adds the outputs' writing and the exit), how much of it was compiling,
    and what the compilation cache did or will do."""
    ph = metrics.get("phases_s") or {}
    comp = metrics.get("compile_by_phase") or {}

    def compiling(phase: str) -> str:
        c = comp.get(phase, {})
        sec, hits = c.get("compile_s", 0.0), c.get("cache_hits", 0)
        if sec < 0.05 and not hits:
            return ""
        got = f"{hits} from the cache" if hits else ""
        return f" (compiling {sec:.1f}s{', ' + got if got else ''})"

    parts = []
    if ph.get("startup"):
        parts.append(f"start-up {ph['startup']:.1f}s")
    parts.append(f"load {metrics['load_s']:.1f}s{compiling('load')}")
    parts.append(f"encode {metrics['encode_s']:.1f}s{compiling('encode')}")
    steps = metrics.get("num_steps") or 0
    setup = ph.get("sampling_setup", 0.0)
    parts.append(f"sampling {metrics['sampling_s'] + setup:.1f}s ("
                 + (f"setup {setup:.1f}s, " if setup >= 0.05 else "")
                 + f"first step's compile {metrics['compile_s']:.1f}s, then {metrics['per_step_s']:.3f} s/step x "
                 f"{steps}{compiling('sampling')[1:-1] and '; ' + compiling('sampling')[2:-1]})")
    parts.append(f"decode {metrics['decode_s']:.1f}s{compiling('decode') or compiling('windows')}")
    total = metrics["total_s"]
    if ph.get("other", 0.0) >= 0.05:
        parts.append(f"other {ph['other']:.1f}s")
    if wall_s is not None and wall_s - total >= 0.05:
        parts.append(f"writing and exit {wall_s - total:.1f}s")
        total = wall_s
    lines = [f"done in {total:.1f}s: " + ", ".join(parts) + f"; peak RSS {metrics['peak_rss_mb']:.0f} MB"]
    cache = metrics.get("compilation_cache") or {}
    if cache.get("programs"):
        secs = cache.get("compile_s", 0.0)
        if cache.get("hits"):
            saved = cache.get("saved_s", 0.0)
            lines.append(f"compiled programs: {cache['hits']} of {cache['programs']} loaded from the compilation cache "
                         f"({cache['dir']})" + (f", about {saved:.0f}s of compiling saved" if saved >= 1.0 else ""))
        if not cache.get("enabled"):
            lines.append(f"{cache['programs']} programs compiled ({secs:.1f}s); the compilation cache is off "
                         "(runtime.compilation_cache=false): the next run compiles them again")
        elif cache.get("misses") and secs >= 1.0:
            lines.append(f"{cache['misses']} programs compiled and kept in the compilation cache ({cache['dir']}): "
                         f"the next run of this model at this size skips most of the {secs:.0f}s of compiling")
    return "\n".join(lines)


def peak_rss_mb() -> float:
    try:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    except Exception:  # pragma: no cover - non-POSIX
        return psutil.Process().memory_info().rss / 2**20


def steady_step_s(times: list[float]) -> float:
    """Per-step seconds without the first step's compile: the median of the later steps."""
    return float(np.median(times[1:])) if len(times) > 1 else times[0]


def _shape_list(shapes: Any) -> Any:
    return jax.tree.map(list, shapes, is_leaf=lambda v: isinstance(v, tuple))
