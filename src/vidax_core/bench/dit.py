"""``vidax bench --dit-only``: the DiT-step and compile-time microbenchmarks of issue 7 (items 3 and 4).

All three parts run at Wan2.1-1.3B block width (dim 1536 = 12 heads x 128, FFN 8960, text 512 x 4096) with random
weights, so no checkpoint is needed:

``step``      one guided denoising step (batch 2 = conditional + unconditional) of a ``--blocks``-block DiT at 17
              frames x 256 x 256 (latent 5 x 32 x 32 -> 1280 video tokens), fp32, in vidax (the pipeline's own
              jitted step: model, guidance, UniPC update) and in diffusers (``WanTransformer3DModel`` with the SAME
              weights, converted by the checkpoint conversion), in the same process. diffusers is timed two ways:
              as ``WanPipeline`` runs a step (two batch-1 transformer calls, guidance, ``scheduler.step``) and as one
              batch-2 call. Each side: one warm-up step (vidax: the compiling call), then ``--repeats`` timed
              steps; the median is reported.
``compile``   trace+lower and XLA compile time of that vidax step at each of ``--compile-blocks`` (AOT on abstract
              shapes, so the 30-block model needs no memory); the blocks are one ``lax.scan``, so the ratio should
              stay near 1.
``vae``       compile time of the Wan2.1 VAE decode (real architecture, zero weights, ``--vae-size`` pixels square)
              at each of ``--vae-frames``: the sum of JAX's trace, lower and backend-compile events during a cold
              ``decode_video`` (decode runs one program for the first latent frame and one for every later one).

Results: ``OUT/dit_step.json`` and ``OUT/dit_step.md`` (printed too).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import statistics
import sys
import time
from typing import Any

WAN13B = dict(
    patch_size=(1, 2, 2), num_attention_heads=12, attention_head_dim=128, in_channels=16, out_channels=16,
    text_dim=4096, freq_dim=256, ffn_dim=8960, num_layers=30, cross_attn_norm=True,
    qk_norm="rms_norm_across_heads", eps=1e-6, rope_max_seq_len=1024,
)
LATENT = (16, 5, 32, 32)  # 17 frames at 256 x 256
TEXT_LEN = 512
GUIDANCE = 5.0


def _say(args, msg: str) -> None:
    if not getattr(args, "quiet", False):
        print(msg, file=sys.stderr, flush=True)


def _inputs(seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    latents = rng.standard_normal((1, *LATENT)).astype(np.float32)
    context = rng.standard_normal((2, TEXT_LEN, WAN13B["text_dim"])).astype(np.float32)  # [cond, uncond]
    return latents, context


def _vidax_step(graphdef, steps: int):
    from vidax_core.runner.pipeline import make_step
    from vidax_core.schedulers import base as sched_base

    sampler = sched_base.get_sampler("unipc", flow_shift=3.0)
    plan = sampler.plan(steps)
    return make_step(graphdef, sampler, True), sampler, plan


# --------------------------------------------------------------------------------------------------------------
# step: vidax vs diffusers, same weights, same process


def bench_step(args) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    from vidax_core.bench.reference import _imports
    from vidax_wan.convert_dit import load_dit
    from vidax_wan.dit import WanDiTConfig

    torch, _ = _imports()
    from diffusers import UniPCMultistepScheduler, WanTransformer3DModel

    blocks, repeats = args.blocks, max(args.repeats, 1)
    torch.manual_seed(0)
    _say(args, f"step: building a {blocks}-block Wan2.1-1.3B-width DiT in diffusers (random weights) ...")
    ref = WanTransformer3DModel(**{**WAN13B, "num_layers": blocks}).eval().float()
    tensors = {k: v.detach().numpy() for k, v in ref.state_dict().items()}
    cfg = WanDiTConfig.from_config({**WAN13B, "num_layers": blocks})
    t0 = time.perf_counter()
    model = load_dit(cfg, tensors)
    convert_s = time.perf_counter() - t0
    n_params = int(sum(v.size for v in tensors.values()))
    latents, context = _inputs()

    # -- vidax: the pipeline's jitted step ------------------------------------------------------------------------
    graphdef, params = nnx.split(model)
    del model
    step, sampler, plan = _vidax_step(graphdef, 50)
    plan_arrays = jax.device_put(plan.arrays())
    ctx, g = jnp.asarray(context), jnp.float32(GUIDANCE)
    vx = {"x": jnp.asarray(latents), "i": 0}
    vx["state"] = sampler.init_state(plan, vx["x"])

    def vidax_step() -> None:
        vx["x"], vx["state"] = step(params, vx["x"], vx["state"], jnp.int32(vx["i"]), ctx, plan_arrays, g, None)
        vx["x"].block_until_ready()
        vx["i"] += 1

    # -- diffusers: the same weights, on CUDA when there is one ---------------------------------------------------
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    ref.to(dev)

    def sync():
        if dev == "cuda":
            torch.cuda.synchronize()

    def make_ref(batch2: bool):
        """WanPipeline's step (two batch-1 calls, guidance, scheduler.step), or one batch-2 call instead."""
        sched = UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True,
                                        num_train_timesteps=1000, flow_shift=3.0)
        sched.set_timesteps(50, device=dev)
        c = torch.from_numpy(context.copy()).to(dev)
        st = {"x": torch.from_numpy(latents.copy()).to(dev), "i": 0}

        @torch.no_grad()
        def run() -> None:
            xt, t = st["x"], sched.timesteps[st["i"]]
            if batch2:
                out = ref(hidden_states=torch.cat([xt, xt]), timestep=t.expand(2), encoder_hidden_states=c,
                          return_dict=False)[0]
                cond, unc = out[:1], out[1:]
            else:
                cond = ref(hidden_states=xt, timestep=t.expand(1), encoder_hidden_states=c[:1], return_dict=False)[0]
                unc = ref(hidden_states=xt, timestep=t.expand(1), encoder_hidden_states=c[1:], return_dict=False)[0]
            st["x"] = sched.step(unc + GUIDANCE * (cond - unc), t, xt, return_dict=False)[0]
            sync()
            st["i"] += 1

        return run, st

    ref_pipe, pipe_state = make_ref(batch2=False)
    ref_b2, _ = make_ref(batch2=True)
    engines = {"vidax": vidax_step, "diffusers_pipeline": ref_pipe, "diffusers_batch2": ref_b2}
    times: dict[str, list[float]] = {k: [] for k in engines}
    # Round r runs one step of every engine back to back, so a load swing on a shared machine hits all of them;
    # round 0 is the warm-up (vidax: the compiling call).
    for r in range(repeats + 1):
        for name, fn in engines.items():
            sync()
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
        _say(args, f"    round {r}{' (warm-up)' if r == 0 else ''}: " + ", ".join(f"{k} {v[-1]:.3f} s" for k, v in times.items()))
    med = {k: statistics.median(v[1:]) for k, v in times.items()}
    vidax_first, vidax_step_s = times["vidax"][0], med["vidax"]
    pipe_step, b2_step = med["diffusers_pipeline"], med["diffusers_batch2"]
    vidax_out, ref_out = np.asarray(vx["x"]), pipe_state["x"].float().cpu().numpy()
    from vidax_core.bench.report import device_memory as _device_memory

    vidax_peak = _device_memory()["device_peak_bytes"]
    device_peak = int(torch.cuda.max_memory_allocated()) if dev == "cuda" else None
    _say(args, f"    median s/step: vidax {vidax_step_s:.3f}, diffusers pipeline step {pipe_step:.3f}, "
               f"diffusers batch 2 {b2_step:.3f}")

    rel = float(np.linalg.norm(vidax_out - ref_out) / max(np.linalg.norm(ref_out), 1e-30))
    return {
        "blocks": blocks, "params": n_params, "latent_shape": [1, *LATENT],
        "video_tokens": LATENT[1] * (LATENT[2] // 2) * (LATENT[3] // 2), "text_tokens": TEXT_LEN,
        "batch": 2, "dtype": "float32", "repeats": repeats, "convert_s": convert_s,
        "vidax_first_step_s": vidax_first, "vidax_step_s": vidax_step_s, "vidax_times_s": times["vidax"],
        "diffusers_pipeline_step_s": pipe_step, "diffusers_pipeline_times_s": times["diffusers_pipeline"],
        "diffusers_batch2_step_s": b2_step, "diffusers_batch2_times_s": times["diffusers_batch2"],
        "ratio_vs_pipeline_step": vidax_step_s / pipe_step, "ratio_vs_batch2_step": vidax_step_s / b2_step,
        "min_ratio_vs_pipeline_step": min(times["vidax"][1:]) / min(times["diffusers_pipeline"][1:]),
        "latents_rel_diff_after_steps": rel,
        "torch_threads": torch.get_num_threads(), "torch": torch.__version__, "torch_device": dev,
        "torch_cuda_matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32) if dev == "cuda" else None,
        "diffusers_device_peak_bytes": device_peak, "vidax_device_peak_bytes": vidax_peak,
        "jax_backend": jax.default_backend(), "jax_default_matmul_precision": jax.config.jax_default_matmul_precision,
    }


def _fmt(ts) -> str:
    return "[" + ", ".join(f"{t:.3f}" for t in ts) + "]"


# --------------------------------------------------------------------------------------------------------------
# compile time vs depth (AOT on abstract shapes)


def bench_compile(args) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from vidax_wan.dit import WanDiT, WanDiTConfig

    counts = [int(c) for c in str(args.compile_blocks).split(",") if c.strip()]
    rows = []
    for n in counts:
        cfg = WanDiTConfig.from_config({**WAN13B, "num_layers": n})
        model = nnx.eval_shape(lambda: WanDiT(cfg, rngs=nnx.Rngs(0)))
        graphdef, params = nnx.split(model)
        step, sampler, plan = _vidax_step(graphdef, 50)
        sds = jax.ShapeDtypeStruct
        x = sds((1, *LATENT), jnp.float32)
        state = jax.eval_shape(lambda z: sampler.init_state(plan, z), x)
        ctx = sds((2, TEXT_LEN, WAN13B["text_dim"]), jnp.float32)
        jax.clear_caches()
        t0 = time.perf_counter()
        lowered = step.lower(params, x, state, sds((), jnp.int32), ctx, plan.arrays(), sds((), jnp.float32), None)
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


def bench_vae(args) -> dict[str, Any]:
    import jax
    import numpy as np

    from vidax_wan import vae as vae_mod

    clock = _CompileClock()
    jax.monitoring.register_event_duration_secs_listener(clock)
    cfg = vae_mod.WanVAEConfig()
    vae = vae_mod.WanVAE(cfg, with_encoder=False)  # zero weights: same programs, same compile work
    frames = [int(f) for f in str(args.vae_frames).split(",") if f.strip()]
    size = args.vae_size
    rows = []
    for f in frames:
        t_lat = (f - 1) // 4 + 1
        z = np.zeros((1, cfg.z_dim, t_lat, size // 8, size // 8), np.float32)
        jax.clear_caches()
        before = dict(vae_mod.TRACE_COUNTS)
        clock.reset()
        clock.on = True
        t0 = time.perf_counter()
        out = vae_mod.decode_video(vae, z)
        wall = time.perf_counter() - t0
        clock.on = False
        traces = {k: v - before.get(k, 0) for k, v in vae_mod.TRACE_COUNTS.items() if v - before.get(k, 0)}
        comp = sum(clock.total.values())
        rows.append({"frames": f, "latent_frames": t_lat, "out_shape": list(out.shape), "compile_s": comp,
                     "backend_compile_s": clock.total[_CompileClock.EVENTS[2]], "wall_s": wall,
                     "xla_compiles": clock.count[_CompileClock.EVENTS[2]],
                     "chunk_traces": traces})
        _say(args, f"vae: {f} frames ({t_lat} latent): compile {comp:.2f} s in {rows[-1]['xla_compiles']} XLA "
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
            f"**DiT step** ({s['blocks']} blocks at Wan2.1-1.3B width, {s['video_tokens']} video tokens + "
            f"{s['text_tokens']} text tokens, batch 2 (CFG), fp32; median of {s['repeats']} interleaved rounds after one warm-up round)",
            "",
            "| engine | s/step | vidax / this |",
            "|---|---|---|",
            f"| vidax (jitted step: DiT batch 2 + guidance + UniPC) | {s['vidax_step_s']:.3f} | 1.00× |",
            f"| diffusers, WanPipeline step (2 × batch 1) | {s['diffusers_pipeline_step_s']:.3f} | "
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
        lines += [f"| {r['blocks']} | {r['lower_s']:.2f} | {r['compile_s']:.2f} | {r['total_s']:.2f} |" for r in c["rows"]]
        if "ratio_max_vs_min_blocks" in c:
            lines += ["", f"ratio {c['ratio_desc']}: **{c['ratio_max_vs_min_blocks']:.2f}×** (target ≤ 1.3×)"]
        lines.append("")
    v = rep.get("vae")
    if v:
        lines += [f"**VAE decode compile time vs frames** (Wan2.1 VAE, {v['size']}×{v['size']}, zero weights)", "",
                  "| frames | latent frames | compile s (trace+lower+XLA) | XLA compiles | chunk programs | decode wall s |",
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
    if "step" not in skip and "reference" not in skip:
        from vidax_core.bench.reference import _imports

        _imports()  # one-line error before any work when torch/diffusers are missing
    rep: dict[str, Any] = {
        "command": "vidax bench --dit-only " + " ".join(
            f"--{k.replace('_', '-')} {getattr(args, k)}" for k in ("blocks", "compile_blocks", "vae_frames",
                                                                      "vae_size", "repeats", "skip") if getattr(args, k)),
        "created": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": machine_info(),
    }
    if "step" not in skip and "reference" not in skip:
        rep["step"] = bench_step(args)
    if "compile" not in skip:
        rep["compile"] = bench_compile(args)
    if "vae" not in skip:
        rep["vae"] = bench_vae(args)
    rep["markdown"] = markdown(rep)
    name = args.name or "dit_step"
    jpath, mpath = write_report(rep, args.out, name)
    print(rep["markdown"], end="")
    _say(args, f"wrote {jpath} and {mpath}")
    return 0
