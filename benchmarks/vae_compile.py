"""Where a first VAE decode spends its time: each compiled program's compile seconds, the first and second decode.

  python benchmarks/vae_compile.py OUT.json [--size 480x832x81] [--dtype float32] [--cache DIR] [--tiny]
      [--tiled] [--compile-only] [--repeat-warm N]
  python benchmarks/vae_compile.py --collect DIR OUT_PREFIX     (DIR's runs -> OUT_PREFIX.json and .md)

Builds the Wan2.1 VAE from its published config (parameters at their constructor values: compile time and memory
do not depend on them), decodes random latents of the size's latent grid twice, and records every XLA compilation
the first decode triggered (``jax_log_compiles``), with the decode's FLOPs (XLA's cost analysis of the chunk
program times the chunks) and its MFU against the device's peak. ``--cache DIR`` turns the persistent compilation
cache on, so a second process with the same DIR shows what a warm cache leaves. ``--tiled``: diffusers' default
tiles (256 px, stride 192; SkyReels-V2 540p decodes this way). ``--compile-only``: no decode, the chunk program
traced, lowered and compiled ahead of time from shapes (seconds of each, the process's CPU seconds, the HLO's
instruction and convolution counts, its temporaries' bytes): what a CPU host can measure of a TPU's compile.
``--repeat-warm N``: N further decodes, the median reported (the warm decode time).
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import statistics
import time

import jax
import numpy as np


class CompileLog(logging.Handler):
    """Collects '(program, seconds)' from JAX's compile log lines."""

    PATTERN = re.compile(r"Finished XLA compilation of (.+?) in ([0-9.e-]+) sec")

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.rows: list[tuple[str, float]] = []

    def emit(self, record: logging.LogRecord) -> None:
        m = self.PATTERN.search(record.getMessage())
        if m:
            self.rows.append((m.group(1), float(m.group(2))))


def unit_inputs(vae, lat: np.ndarray, tiled: bool):
    """Abstract inputs of the decode's one chunk program for these latents: (graphdef, state, z, caches, first,
    area), as :func:`vidax_core.vae.wan21.decode_pixels` calls it (its first tile when tiled)."""
    import jax.numpy as jnp
    from flax import nnx

    from vidax_core.vae import wan21

    graphdef, state = nnx.split(vae)
    z = np.moveaxis(lat, 1, -1)[:, :1]
    plan = wan21.decode_plan(vae.cfg, z.shape[2:4], tiled)
    th, tw = min(plan.tile[0], z.shape[2]), min(plan.tile[1], z.shape[3])
    zs = jax.ShapeDtypeStruct((z.shape[0], 1, th, tw, z.shape[4]), jnp.dtype(vae.cfg.dtype))
    area = jax.ShapeDtypeStruct((z.shape[0], 2), jnp.int32) if plan.num_tiles > 1 else None
    caches = jax.eval_shape(lambda s, x, a: wan21._decode_unit_impl(graphdef, s, x, None, np.bool_(True), a)[1],
                            state, zs, area)
    first = jax.ShapeDtypeStruct((), jnp.bool_)
    return graphdef, state, zs, caches, first, area, plan


def compile_only(vae, lat: np.ndarray, tiled: bool) -> dict:
    """Trace, lower and compile the decode's chunk program from shapes; no decode."""
    from vidax_core.vae import wan21

    graphdef, state, zs, caches, first, area, plan = unit_inputs(vae, lat, tiled)
    cpu0, t0 = time.process_time(), time.perf_counter()
    traced = wan21._decode_unit.trace(graphdef, state, zs, caches, first, area)
    t1 = time.perf_counter()
    lowered = traced.lower()
    t2 = time.perf_counter()
    compiled = lowered.compile()
    t3, cpu1 = time.perf_counter(), time.process_time()
    hlo = lowered.as_text()
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    mem = compiled.memory_analysis()
    return {"programs": 1, "temp_bytes": getattr(mem, "temp_size_in_bytes", None), "tiles": plan.num_tiles,
            "trace_s": t1 - t0, "lower_s": t2 - t1, "compile_s": t3 - t2,
            "total_s": t3 - t0, "process_cpu_s": cpu1 - cpu0,
            "hlo_lines": hlo.count("\n"), "hlo_convolutions": len(re.findall(r"stablehlo\.convolution", hlo)),
            "flops_per_chunk": float((cost or {}).get("flops", 0.0))}


def decode_flops(vae, lat: np.ndarray, tiled: bool) -> float | None:
    """The decode's FLOPs: XLA's count for one chunk program (lowered, not compiled again) times the chunks and
    tiles it runs."""
    from vidax_core.vae import wan21

    graphdef, state, zs, caches, first, area, plan = unit_inputs(vae, lat, tiled)
    cost = wan21._decode_unit.lower(graphdef, state, zs, caches, first, area).cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    flops = (cost or {}).get("flops")
    return None if flops is None else float(flops) * lat.shape[2] * plan.num_tiles


GOALS = {"cold compile s": 15.0, "warm decode s": 4.0, "tiled compile s": 30.0}  # issue 54, 480x832x81 on a v5e


def collect(folder: str, prefix: str) -> None:
    """The runs of benchmarks/accelerator.sh's vae_decode case (cold.json, cached.json, tiled_compile.json,
    scan_compile.json in ``folder``) as one report beside the goals."""
    import glob
    import os

    runs = {os.path.basename(f)[:-5]: json.load(open(f)) for f in sorted(glob.glob(os.path.join(folder, "*.json")))}
    cold, cached = runs.get("cold", {}), runs.get("cached", {})
    tiled, scan = runs.get("tiled_compile", {}), runs.get("scan_compile", {})
    seen = {"cold compile s": cold.get("compile_s"), "warm decode s": cold.get("second_decode_s"),
            "tiled compile s": tiled.get("total_s")}
    rep = {"runs": runs, "goals": GOALS, "measured": seen,
           "met": {k: (v is not None and v <= GOALS[k]) for k, v in seen.items()}}
    f = lambda v: "" if v is None else f"{v:.2f}"  # noqa: E731
    lines = ["| Wan VAE decode | s | goal s |", "|---|---|---|"]
    lines += [f"| {k} | {f(v)} | {GOALS[k]} |" for k, v in seen.items()]
    lines += [f"| first decode (cold, compile included) | {f(cold.get('first_decode_s'))} | |",
              f"| first decode, second process on the cache | {f(cached.get('first_decode_s'))} | |",
              f"| of which compiling (cache reads), second process | {f(cached.get('compile_s'))} | |",
              f"| untiled program compile, ResBlocks scanned (VIDAX_VAE_SCAN_BLOCKS=1) | {f(scan.get('total_s'))} | |",
              f"| decode TFLOP / TFLOP/s / MFU (warm) | {f((cold.get('decode_flops') or 0) / 1e12)} / "
              f"{f(cold.get('decode_tflops_per_s'))} / {f(cold.get('decode_mfu'))} | |"]
    rep["markdown"] = "\n".join(lines) + "\n"
    json.dump(rep, open(prefix + ".json", "w"), indent=1)
    open(prefix + ".md", "w").write(rep["markdown"])
    print(rep["markdown"])


def main() -> None:
    import sys

    if len(sys.argv) == 4 and sys.argv[1] == "--collect":
        return collect(sys.argv[2], sys.argv[3])
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--size", default="480x832x81", help="HEIGHTxWIDTHxFRAMES of the video")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--cache", default=None)
    p.add_argument("--tiny", action="store_true", help="a narrow VAE (base 8) for a CPU check")
    p.add_argument("--tiled", action="store_true", help="diffusers' default tiles (256 px, stride 192)")
    p.add_argument("--compile-only", action="store_true", help="trace, lower and compile from shapes; no decode")
    p.add_argument("--repeat-warm", type=int, default=1, help="decodes after the first (median reported)")
    a = p.parse_args()
    if a.cache:
        jax.config.update("jax_compilation_cache_dir", a.cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    log = CompileLog()
    logging.getLogger("jax").addHandler(log)  # the compile lines propagate up to it
    jax.config.update("jax_log_compiles", True)

    from vidax_core.report.throughput import local_peak, peak_flops
    from vidax_core.vae.wan21 import WanVAE, WanVAEConfig, decode_video

    cfg = WanVAEConfig.from_config({"base_dim": 8} if a.tiny else {}, dtype=a.dtype)
    vae = WanVAE(cfg, with_encoder=False)
    h, w, f = map(int, a.size.split("x"))
    lat = np.random.default_rng(0).standard_normal((1, cfg.z_dim, (f - 1) // 4 + 1, h // 8, w // 8), np.float32)
    row = {"backend": jax.default_backend(), "device": str(jax.devices()[0].device_kind), "size": a.size,
           "dtype": a.dtype, "tiled": a.tiled, "cache": a.cache}
    if a.compile_only:
        row.update(compile_only(vae, lat, a.tiled))
    else:
        n_before = len(log.rows)
        tiling = True if a.tiled else None
        t0 = time.perf_counter()
        out = decode_video(vae, lat, devices=jax.local_devices()[:1], tiling=tiling)
        first = time.perf_counter() - t0
        compiled = log.rows[n_before:]
        warm = []
        for _ in range(max(a.repeat_warm, 1)):
            t0 = time.perf_counter()
            decode_video(vae, lat, devices=jax.local_devices()[:1], tiling=tiling)
            warm.append(time.perf_counter() - t0)
        flops = decode_flops(vae, lat, a.tiled)
        peak, _ = peak_flops(local_peak(), a.dtype)
        second = statistics.median(warm)
        row.update({"frames_out": int(out.shape[1]), "first_decode_s": first, "second_decode_s": second,
                    "warm_decodes_s": warm, "compile_s": sum(s for _, s in compiled),
                    "programs": [{"name": n, "compile_s": s} for n, s in compiled],
                    "chunk_programs": sum(1 for n, _ in compiled if "decode_unit" in n),
                    "decode_flops": flops, "decode_tflops_per_s": flops / second / 1e12 if flops else None,
                    "decode_mfu": flops / second / peak if flops and peak else None})
    print(json.dumps(row, indent=1))
    with open(a.out, "w") as fh:
        json.dump(row, fh, indent=1)


if __name__ == "__main__":
    main()
