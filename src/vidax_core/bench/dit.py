"""``vidax bench --dit-only``: the DiT-step and compile-time microbenchmarks, with random weights (no checkpoint).

The model comes from the plugin of ``model.id=...`` (default: the first registered model whose plugin answers
the ``bench_dit`` hook) at the architecture of ``model.checkpoint=...`` when given (a config-only folder is
enough: e.g. Wan2.1-14B's width), else the plugin's default shape; the core only times. Parts:

``step``      one guided denoising step (batch 2 = conditional + unconditional) of a ``--blocks``-block DiT at the
              plugin's latent and text shapes, fp32, in vidax (the pipeline's own jitted step: model, guidance,
              UniPC update) and in the plugin's reference engines (e.g. diffusers with the SAME weights), in the
              same process. Each round runs one step of every engine back to back (round 0 is the warm-up: the
              compiling call for vidax), then ``--repeats`` timed rounds; the median is reported.
``compile``   trace+lower and XLA compile time of that vidax step at each of ``--compile-blocks`` (AOT on abstract
              shapes, so a deep model needs no memory); the blocks are one ``lax.scan``, so the ratio should
              stay near 1.
``vae``       compile time of the plugin's VAE decode (zero weights, ``--vae-size`` pixels square) at each of
              ``--vae-frames``: the sum of JAX's trace, lower and backend-compile events during a cold decode.

Results: ``OUT/dit_step.json`` and ``OUT/dit_step.md`` (printed too).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import statistics
import sys
import time
from typing import Any

GUIDANCE = 5.0


def _say(args, msg: str) -> None:
    if not getattr(args, "quiet", False):
        print(msg, file=sys.stderr, flush=True)


def _inputs(parts, seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    latents = rng.standard_normal((1, *parts.latent_shape)).astype(np.float32)
    context = rng.standard_normal((2, *parts.context_shape)).astype(np.float32)  # [cond, uncond]
    return latents, context


class _VidaxStep:
    """The pipeline's own jitted step (both guidance branches in one batch-2 model call, classifier-free
    guidance, UniPC update) and its inputs: ``step(params, latents, state, i, *args)``."""

    def __init__(self, graphdef, steps: int, flow_shift: float) -> None:
        import numpy as np

        from vidax_core.guidance import ClassifierFree
        from vidax_core.runner.step import StepPlan, make_step
        from vidax_core.schedulers import base as sched_base

        self.sampler = sched_base.get_sampler("unipc", flow_shift=flow_shift)
        self.plan = self.sampler.plan(steps)
        guide = ClassifierFree(scale=GUIDANCE)
        step_plan = StepPlan(self.sampler, guide, None, (("cond", "uncond"),), {"cond": 0, "uncond": 1})
        self.step = make_step(graphdef, step_plan)
        self.scales = guide.scales(np.asarray(self.plan.timesteps))

    def init_state(self, latents):
        from vidax_core.runner.step import init_state

        return init_state(self.sampler, self.plan, latents)

    def args(self, contexts, plan_arrays=None, scales=None) -> tuple:
        """(contexts, plan arrays, scales, noise, cond arrays); ``contexts``: [cond, uncond]."""
        return (list(contexts), self.plan.arrays() if plan_arrays is None else plan_arrays,
                self.scales if scales is None else scales, None, {})


def dit_parts(overrides, need_reference: bool):
    """(model spec, the plugin's ``bench_dit`` parts) for ``model.id=...`` in ``overrides`` or the first model
    whose plugin answers; a one-line :class:`UserError` when none does."""
    from vidax_core.config import parse_overrides
    from vidax_core.errors import UserError
    from vidax_core.plugins import get_plugins

    plugins = get_plugins()
    model = parse_overrides(list(overrides or [])).get("model") or {}
    wanted = model.get("id")
    config = None
    if model.get("checkpoint"):  # time the architecture of this checkpoint (its JSON files only)
        from vidax_core.io.checkpoint import resolve_checkpoint

        config = resolve_checkpoint(str(model["checkpoint"]), configs_only=True).config("transformer")
    specs = [plugins.registry.get(str(wanted))] if wanted else list(plugins.registry)
    for spec in specs:
        parts = plugins.call("bench_dit", spec, need_reference=need_reference, config=config)
        if parts is not None:
            return spec, parts
    which = f"the plugin of {wanted} provides no" if wanted else "no installed plugin provides"
    raise UserError(f"--dit-only: {which} DiT microbenchmark parts (hook bench_dit); "
                    "pick another model.id=... (see `vidax list-models`)")


# --------------------------------------------------------------------------------------------------------------
# step: vidax vs the reference engines, same weights, same process


def bench_step(args, parts) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    blocks, repeats = args.blocks or 2, max(args.repeats, 1)
    _say(args, f"step: building a {blocks}-block {parts.label} DiT and its reference (random weights) ...")
    t0 = time.perf_counter()
    model, ref, n_params = parts.paired_dits(blocks, 0)
    convert_s = time.perf_counter() - t0
    latents, context = _inputs(parts)

    # -- vidax: the pipeline's jitted step ------------------------------------------------------------------------
    graphdef, params = nnx.split(model)
    del model
    vs = _VidaxStep(graphdef, 50, parts.flow_shift)
    args = vs.args([jnp.asarray(context[:1]), jnp.asarray(context[1:])], jax.device_put(vs.plan.arrays()),
                   jax.device_put(vs.scales))
    vx = {"x": jnp.asarray(latents), "i": 0}
    vx["state"] = vs.init_state(vx["x"])

    def vidax_step() -> None:
        vx["x"], vx["state"] = vs.step(params, vx["x"], vx["state"], jnp.int32(vx["i"]), *args)
        vx["x"].block_until_ready()
        vx["i"] += 1

    ref_engines, ref_latents, facts = parts.reference_steps(ref, latents, context, GUIDANCE, 50)
    engines = {"vidax": vidax_step, **ref_engines}
    times: dict[str, list[float]] = {k: [] for k in engines}
    # Round r runs one step of every engine back to back, so a load swing on a shared machine hits all of them;
    # round 0 is the warm-up (vidax: the compiling call).
    for r in range(repeats + 1):
        for name, fn in engines.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
        _say(args, f"    round {r}{' (warm-up)' if r == 0 else ''}: "
             + ", ".join(f"{k} {v[-1]:.3f} s" for k, v in times.items()))
    med = {k: statistics.median(v[1:]) for k, v in times.items()}
    vidax_first, vidax_step_s = times["vidax"][0], med["vidax"]
    names = list(ref_engines)
    pipe_step, b2_step = med[names[0]], med[names[-1]]
    vidax_out, ref_out = np.asarray(vx["x"]), ref_latents()
    from vidax_core.bench.report import device_memory as _device_memory

    vidax_peak = _device_memory()["device_peak_bytes"]
    _say(args, "    median s/step: " + ", ".join(f"{k} {v:.3f}" for k, v in med.items()))

    rel = float(np.linalg.norm(vidax_out - ref_out) / max(np.linalg.norm(ref_out), 1e-30))
    c, f, h, w = parts.latent_shape
    out = {
        "model": parts.label, "blocks": blocks, "params": n_params, "latent_shape": [1, c, f, h, w],
        "video_tokens": parts.video_tokens, "text_tokens": parts.context_shape[0],
        "batch": 2, "dtype": "float32", "repeats": repeats, "convert_s": convert_s,
        "vidax_first_step_s": vidax_first, "vidax_step_s": vidax_step_s, "vidax_times_s": times["vidax"],
        "diffusers_pipeline_step_s": pipe_step, "diffusers_pipeline_times_s": times[names[0]],
        "diffusers_batch2_step_s": b2_step, "diffusers_batch2_times_s": times[names[-1]],
        "ratio_vs_pipeline_step": vidax_step_s / pipe_step, "ratio_vs_batch2_step": vidax_step_s / b2_step,
        "min_ratio_vs_pipeline_step": min(times["vidax"][1:]) / min(times[names[0]][1:]),
        "latents_rel_diff_after_steps": rel, "vidax_device_peak_bytes": vidax_peak,
        "jax_backend": jax.default_backend(), "jax_default_matmul_precision": jax.config.jax_default_matmul_precision,
    }
    for k, v in facts.items():
        out["diffusers_" + k if k == "device_peak_bytes" else k] = v() if callable(v) else v
    return out


def _fmt(ts) -> str:
    return "[" + ", ".join(f"{t:.3f}" for t in ts) + "]"


# --------------------------------------------------------------------------------------------------------------
# compile time vs depth (AOT on abstract shapes)


def bench_compile(args, parts) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    from flax import nnx

    counts = [int(c) for c in str(args.compile_blocks).split(",") if c.strip()]
    rows = []
    for n in counts:
        model = nnx.eval_shape(parts.abstract_dit(n))
        graphdef, params = nnx.split(model)
        vs = _VidaxStep(graphdef, 50, parts.flow_shift)
        sds = jax.ShapeDtypeStruct
        x = sds((1, *parts.latent_shape), jnp.float32)
        state = jax.eval_shape(vs.init_state, x)
        ctx = [sds((1, *parts.context_shape), jnp.float32)] * 2
        jax.clear_caches()
        t0 = time.perf_counter()
        lowered = vs.step.lower(params, x, state, sds((), jnp.int32), *vs.args(ctx))
        t1 = time.perf_counter()
        lowered.compile()
        t2 = time.perf_counter()
        rows.append({"blocks": n, "lower_s": t1 - t0, "compile_s": t2 - t1, "total_s": t2 - t0})
        _say(args, f"compile: {n} blocks: trace+lower {t1 - t0:.2f} s, XLA compile {t2 - t1:.2f} s")
    out: dict[str, Any] = {"rows": rows}
    if len(rows) >= 2:
        out["ratio_max_vs_min_blocks"] = rows[-1]["total_s"] / rows[0]["total_s"]
        out["ratio_desc"] = f"{rows[-1]['blocks']} blocks / {rows[0]['blocks']} blocks, trace+lower+compile"
    return out


# --------------------------------------------------------------------------------------------------------------
# VAE decode compile time vs frame count


class _CompileClock:
    EVENTS = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration",
              "/jax/core/compile/backend_compile_duration")

    def __init__(self) -> None:
        self.on = False
        self.reset()

    def __call__(self, event: str, duration: float, **_kw) -> None:
        if self.on and event in self.total:
            self.total[event] += duration
            self.count[event] += 1

    def reset(self) -> None:
        self.total = {e: 0.0 for e in self.EVENTS}
        self.count = {e: 0 for e in self.EVENTS}


def bench_vae(args, parts) -> dict[str, Any] | None:
    import jax
    import numpy as np

    decoder = parts.vae_decoder()
    if decoder is None:
        return None
    decode, latent_shape, trace_counts = decoder
    clock = _CompileClock()
    jax.monitoring.register_event_duration_secs_listener(clock)
    frames = [int(f) for f in str(args.vae_frames).split(",") if f.strip()]
    size = args.vae_size
    rows = []
    for f in frames:
        shape = latent_shape(f, size)
        z = np.zeros(shape, np.float32)
        jax.clear_caches()
        before = trace_counts()
        clock.reset()
        clock.on = True
        t0 = time.perf_counter()
        out = decode(z)
        wall = time.perf_counter() - t0
        clock.on = False
        traces = {k: v - before.get(k, 0) for k, v in trace_counts().items() if v - before.get(k, 0)}
        comp = sum(clock.total.values())
        rows.append({"frames": f, "latent_frames": shape[2], "out_shape": list(np.shape(out)), "compile_s": comp,
                     "backend_compile_s": clock.total[_CompileClock.EVENTS[2]], "wall_s": wall,
                     "xla_compiles": clock.count[_CompileClock.EVENTS[2]],
                     "chunk_traces": traces})
        _say(args, f"vae: {f} frames ({shape[2]} latent): compile {comp:.2f} s in {rows[-1]['xla_compiles']} XLA "
                   f"compiles (wall {wall:.2f} s), chunk programs traced {traces}")
    out: dict[str, Any] = {"size": size, "rows": rows}
    if len(rows) >= 2:
        out["ratio_max_vs_min_frames"] = rows[-1]["compile_s"] / rows[0]["compile_s"]
    return out


# --------------------------------------------------------------------------------------------------------------


def markdown(rep: dict[str, Any]) -> str:
    m = rep["machine"]
    lines = [f"<!-- {rep['command']} -->",
             f"vidax bench --dit-only, {rep['created']}; {m.get('cpu_count')} CPUs, backend {m.get('jax_backend')}, "
             f"load average at start {m.get('load_avg_1m', '?')}", ""]
    s = rep.get("step")
    if s:
        lines += [
            f"**DiT step** ({s['blocks']} blocks at {s.get('model', 'Wan2.1-1.3B width')}, "
            f"{s['video_tokens']} video tokens + "
            f"{s['text_tokens']} text tokens, batch 2 (CFG), fp32; median of {s['repeats']} "
            "interleaved rounds after one warm-up round)",
            "",
            "| engine | s/step | vidax / this |",
            "|---|---|---|",
            f"| vidax (jitted step: DiT batch 2 + guidance + UniPC) | {s['vidax_step_s']:.3f} | 1.00× |",
            f"| diffusers, pipeline step (2 × batch 1) | {s['diffusers_pipeline_step_s']:.3f} | "
            f"{s['ratio_vs_pipeline_step']:.2f}× (fastest steps: {s['min_ratio_vs_pipeline_step']:.2f}×) |",
            f"| diffusers, one batch-2 call | {s['diffusers_batch2_step_s']:.3f} | {s['ratio_vs_batch2_step']:.2f}× |",
            "",
            f"vidax first (compiling) step {s['vidax_first_step_s']:.2f} s; latents after {s['repeats'] + 1} steps "
            f"differ from diffusers' by {s['latents_rel_diff_after_steps']:.1e} (relative L2).",
            "",
        ]
    c = rep.get("compile")
    if c:
        lines += ["**DiT step compile time vs depth** (AOT, abstract weights)", "",
                  "| blocks | trace+lower s | XLA compile s | total s |", "|---|---|---|---|"]
        lines += [f"| {r['blocks']} | {r['lower_s']:.2f} | {r['compile_s']:.2f} | {r['total_s']:.2f} |"
                  for r in c["rows"]]
        if "ratio_max_vs_min_blocks" in c:
            lines += ["", f"ratio {c['ratio_desc']}: **{c['ratio_max_vs_min_blocks']:.2f}×** (target ≤ 1.3×)"]
        lines.append("")
    v = rep.get("vae")
    if v:
        lines += [f"**VAE decode compile time vs frames** ({v.get('model', 'Wan2.1 VAE')}, "
                  f"{v['size']}×{v['size']}, zero weights)", "",
                  "| frames | latent frames | compile s (trace+lower+XLA) | XLA compiles | "
                  "chunk programs | decode wall s |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {r['frames']} | {r['latent_frames']} | {r['compile_s']:.2f} | {r['xla_compiles']} | "
                  f"{sum(r['chunk_traces'].values())} | {r['wall_s']:.2f} |" for r in v["rows"]]
        if "ratio_max_vs_min_frames" in v:
            lines += ["", f"ratio {v['rows'][-1]['frames']} frames / {v['rows'][0]['frames']} frames: "
                          f"**{v['ratio_max_vs_min_frames']:.2f}×**"]
        lines.append("")
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    from vidax_core.bench.report import machine_info, write_report

    skip = {s.strip() for s in (args.skip or "").split(",") if s.strip()}
    unknown = skip - {"step", "compile", "vae", "reference"}
    if unknown:
        from vidax_core.errors import UserError

        raise UserError(f"--skip: unknown part(s) {', '.join(sorted(unknown))}; parts are step, compile, vae")
    run_step = "step" not in skip and "reference" not in skip
    # one-line error before any work when no plugin provides the parts or the reference's packages are missing
    spec, parts = dit_parts(getattr(args, "overrides", None), need_reference=run_step)
    rep: dict[str, Any] = {
        "command": "vidax bench --dit-only " + " ".join(
            f"--{k.replace('_', '-')} {getattr(args, k)}" for k in ("blocks", "compile_blocks", "vae_frames",
                                                                      "vae_size", "repeats", "skip")
            if getattr(args, k)),
        "created": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": machine_info(),
        "model_id": spec.id,
    }
    if run_step:
        rep["step"] = bench_step(args, parts)
    if "compile" not in skip:
        rep["compile"] = bench_compile(args, parts)
    if "vae" not in skip:
        vae = bench_vae(args, parts)
        if vae is not None:
            rep["vae"] = vae
    rep["markdown"] = markdown(rep)
    name = args.name or "dit_step"
    jpath, mpath = write_report(rep, args.out, name)
    print(rep["markdown"], end="")
    _say(args, f"wrote {jpath} and {mpath}")
    return 0
