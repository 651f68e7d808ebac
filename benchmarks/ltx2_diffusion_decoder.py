"""Compile and decode time of the LTX-2.5 diffusion video decoder (vidax_ltx.ltx2_diffusion_decode) on random weights.

    python benchmarks/ltx2_diffusion_decoder.py [--size 512x768x121] [--config published|tiny] [--dtype bfloat16]
        [--attention auto|blockwise|splash|pallas_tpu] [--tile T,H,W] [--repeats N] [--out FILE.json]

Builds the published decoder configuration (diffusers' ``LTX2VideoDiffusionDecoderModel`` defaults: 5 stages,
widths 2048 -> 256, 11^3 neighborhoods in stage 5) with random weights made on the device (no checkpoint, no host
copy), takes random latents for a ``HEIGHTxWIDTHxFRAMES`` video and measures, per compiled unit (the four
deterministic stages and the stage-5 step): ``compile_s`` (lowering + XLA compile, ahead of time), ``run_s`` (the
compiled call, median of ``--repeats``) and XLA's ``temp_bytes``; ``decode_s`` is a whole decode as a run makes it
(the published decoder takes one x0 step: the units' calls in a chain); ``flops`` per unit and in all the work
computed (the windowed attention at its kernel's density; ``dense_equivalent_flops`` beside it) and MFU against the
device's peak. Prints one JSON object (also written to ``--out``); progress lines go to stderr. On CPU, ``--config tiny
--size 64x96x9`` runs it in seconds (tests/test_attention_neighborhood.py does).

The numbers to read: ``compile_s`` (the seed paper reports 478 s for this decoder's compile on a TPU v4-8; the goal
is under a minute) and ``decode_s``. ``peak_bytes`` is the device's peak memory where the platform reports it.
Run from a checkout: its ``src/`` and ``plugins/vidax_ltx/src`` go first on the path (an installed vidax-core
older than the checkout is not used); JAX, Flax and the other dependencies come from the environment.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for sub in (os.path.join("plugins", "vidax_ltx", "src"), "src"):  # this checkout's code first
    path = os.path.join(ROOT, sub)
    if os.path.isdir(path) and path not in sys.path:
        sys.path.insert(0, path)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from flax import nnx  # noqa: E402

from vidax_core import attention  # noqa: E402
from vidax_core.nn.state import abstract_model  # noqa: E402
from vidax_core.testing.tiny.ltx2 import DIFFUSION_DECODER  # noqa: E402
from vidax_ltx import ltx2_diffusion_decode as dd  # noqa: E402
from vidax_ltx.ltx2_diffusion_decoder import (LTX2DiffusionDecoder, LTX2DiffusionDecoderConfig,  # noqa: E402
                                              pixel_shape, unit_parts)

TINY = DIFFUSION_DECODER  # the tests' tiny decoder (vidax_core.testing.tiny.ltx2)


def log(msg: str) -> None:
    print(f"[ltx2_diffusion_decoder] {msg}", file=sys.stderr, flush=True)


def random_decoder(cfg: LTX2DiffusionDecoderConfig, seed: int = 0, abstract_only: bool = False):
    """(graphdef, state): every parameter drawn on the device in one program (norm gains ~1, the rest
    ~N(0, 0.02)); with ``abstract_only`` the shapes alone."""
    graphdef, abstract, _ = abstract_model(lambda: LTX2DiffusionDecoder(cfg))
    flat = [(tuple(path), var) for path, var in nnx.to_flat_state(abstract)]
    if abstract_only:
        return graphdef, abstract

    sizes = [int(np.prod(var.get_value().shape)) for _, var in flat]
    offsets = np.cumsum([0, *sizes])

    @jax.jit
    def draw(key):  # one normal draw for every parameter (a draw per leaf compiles a program per leaf's RNG)
        noise = jax.random.normal(key, (int(offsets[-1]),), jnp.float32)
        out = []
        for (path, var), lo, n in zip(flat, offsets, sizes):
            v = var.get_value()
            x = jax.lax.dynamic_slice(noise, (int(lo),), (n,)).reshape(v.shape)
            out.append((1.0 + 0.02 * x if str(path[-1]) == "scale" else 0.02 * x).astype(v.dtype))
        return out

    values = draw(jax.random.key(seed))
    return graphdef, nnx.from_flat_state([(p, var.replace(v)) for (p, var), v in zip(flat, values)])


def _time(fn, repeats: int) -> float:
    times = []
    for _ in range(max(repeats, 1)):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def peak_bytes() -> int | None:
    try:
        stats = jax.devices()[0].memory_stats() or {}
    except Exception:  # not every platform reports memory
        return None
    return stats.get("peak_bytes_in_use")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="512x768x121", help="HEIGHTxWIDTHxFRAMES of the video (frames 8k+1)")
    ap.add_argument("--config", choices=("published", "tiny"), default="published")
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    ap.add_argument("--attention", default="auto", help="process attention backend (auto picks splash on TPU)")
    ap.add_argument("--tile", default=None, help="the blockwise kernel's query tile T,H,W")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--compile-only", action="store_true", help="compile from shapes alone (no weights, no run): "
                    "compile time and XLA's memory analysis of each unit, on any machine")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    height, width, frames = (int(v) for v in a.size.lower().split("x"))
    cfg = LTX2DiffusionDecoderConfig.from_config(TINY if a.config == "tiny" else {}, dtype=jnp.dtype(a.dtype))
    latent = ((frames - 1) // cfg.temporal_compression_ratio + 1, height // cfg.spatial_compression_ratio,
              width // cfg.spatial_compression_ratio)
    problems = cfg.grid_problems(*latent)
    if problems or (frames - 1) % cfg.temporal_compression_ratio or height % 32 or width % 32:
        print(f"error: {a.size} does not suit the decoder: {problems or 'frames 8k+1, sides multiples of 32'}",
              file=sys.stderr)
        return 2
    jax.clear_caches()  # every unit is traced and compiled here, not taken from this process's earlier work
    backend = attention.set_backend(a.attention)
    if a.tile:
        from vidax_core.attention.kernels import neighborhood

        neighborhood.DEFAULT_TILE = tuple(int(v) for v in a.tile.split(","))
    t0 = time.perf_counter()
    graphdef, state = random_decoder(cfg, abstract_only=a.compile_only)
    jax.block_until_ready(state)
    params = sum(int(np.prod(v.shape)) for v in jax.tree.leaves(state))
    log(f"{params / 1e6:.1f}M parameters ({a.dtype}) on {jax.devices()[0].device_kind} in "
        f"{time.perf_counter() - t0:.1f}s; latents {latent}; attention backend {backend}")
    z = jax.ShapeDtypeStruct((1, cfg.latent_channels, *latent), jnp.float32)
    if not a.compile_only:
        z = jax.random.normal(jax.random.key(1), z.shape, jnp.float32)

    def measure(name, grid, index, jitted, *args):
        t0 = time.perf_counter()
        compiled = jitted.lower(*args).compile()
        row = {"unit": name, "grid": list(grid), "channels": cfg.decoder_stage_channels[index],
               "blocks": cfg.decoder_stage_depths[index], "compile_s": round(time.perf_counter() - t0, 3)}
        cost = compiled.cost_analysis()
        cost = cost[0] if isinstance(cost, (list, tuple)) else cost
        if cost and cost.get("flops"):  # XLA's own count (a Pallas kernel's matmuls are not in it)
            row["xla_flops"] = float(cost["flops"])
        mem = compiled.memory_analysis()
        if mem is not None:
            row["temp_bytes"] = int(mem.temp_size_in_bytes)
            row["argument_bytes"] = int(mem.argument_size_in_bytes)
        runtime = [x for x in args[2:] if not isinstance(x, int)]  # the static config, graphdef, stage index go
        if not a.compile_only:
            row["run_s"] = round(_time(lambda: compiled(*runtime), a.repeats), 4)
        log(json.dumps(row))
        units.append(row)
        return compiled, runtime

    units, x = [], z
    grids = cfg.grids(*latent)
    parts = None
    if a.compile_only:  # the units' abstract parameters, split out of the abstract model
        abstract = nnx.merge(graphdef, state)
        parts = [nnx.split(unit_parts(abstract, u)) for u in range(len(cfg.decoder_upsample_strides) + 1)]
    for i in range(len(cfg.decoder_upsample_strides)):
        g, st = nnx.split(unit_parts(nnx.merge(graphdef, state), i)) if not a.compile_only else parts[i]
        compiled, runtime = measure(f"stage {i + 1}", grids[i], i, dd._stage, cfg, g, i, st, x)
        x = compiled.out_info if a.compile_only else compiled(*runtime)
    shape = pixel_shape(cfg, 1, x.shape[1:4])
    noise = jax.ShapeDtypeStruct(shape, cfg.dtype)
    if not a.compile_only:
        noise = jax.random.normal(jax.random.key(2), shape, jnp.float32).astype(cfg.dtype)
    t = jax.ShapeDtypeStruct((1,), jnp.float32) if a.compile_only else jnp.ones((1,), jnp.float32)
    n = len(cfg.decoder_upsample_strides)
    g, st = nnx.split(unit_parts(nnx.merge(graphdef, state), n)) if not a.compile_only else parts[n]
    compiled, runtime = measure("stage 5 (diffusion step)", grids[-1], -1, dd._step, cfg, g, st, x, noise, t)
    last = None if a.compile_only else compiled(*runtime)
    result = {"device": jax.devices()[0].device_kind, "platform": jax.default_backend(), "config": a.config,
              "dtype": a.dtype, "size": [height, width, frames], "latents": list(latent), "parameters": params,
              "attention": backend, "attention_calls": attention.calls(), "units": units,
              "compile_s": round(sum(u["compile_s"] for u in units), 3)}
    # FLOPs per unit: the work computed (the windowed attention at the kernel's density, attention.neighborhood)
    # and the dense equivalent (every (query, key) pair), and MFU of the computed work against the device's peak
    from vidax_core.attention.neighborhood import computed_density
    from vidax_core.report.throughput import local_peak, peak_flops
    from vidax_ltx.ltx2_flops import diffusion_decoder_flops

    computed = diffusion_decoder_flops(cfg, 1, *latent, density=lambda g, k: computed_density(
        g, k, head_dim=cfg.decoder_head_dim, dtype=jnp.dtype(a.dtype))).parts
    dense = diffusion_decoder_flops(cfg, 1, *latent).parts
    peak = peak_flops(local_peak(), a.dtype)[0]
    for u in units:
        key = u["unit"].split(" (")[0]
        u["flops"], u["dense_equivalent_flops"] = computed.get(key), dense.get(key)
        if peak and u.get("run_s"):
            u["mfu"] = round(u["flops"] / u["run_s"] / peak, 4)
    result["flops"] = sum(computed.values())
    result["dense_equivalent_flops"] = sum(dense.values())
    if not a.compile_only:  # the decode a run makes (stages 1-4, one x0 step) is the chain of the units above
        result.update(run_s=round(sum(u["run_s"] for u in units), 4), decode_s=round(sum(u["run_s"] for u in units), 4),
                      output_shape=list(last.shape), finite=bool(np.isfinite(np.asarray(last, np.float32)).all()),
                      peak_bytes=peak_bytes())
        if peak:
            result["mfu"] = round(result["flops"] / result["decode_s"] / peak, 4)
    text = json.dumps(result)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
