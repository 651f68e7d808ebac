"""Does the 8-bit kernels' dequantisation stay inside the matmul's fusion? XLA's compiled memory analysis of one
jitted forward of a Wan DiT slice, bf16 vs int8 vs float8_e4m3fn weights (block Linear kernels and Wan's embedder
MLPs / time projection 8-bit, as a run stores them), built shape-only; with ``--time``, the forward's call time on
random weights too. One line per weight mode goes to stderr as it is measured (what a timed-out run got to).

The figure to read is ``excess``: (temp bytes of the 8-bit program - temp bytes of the bf16 program) / one block's
kernels in bf16 (``temp (blocks)``: the temp bytes in the same unit).
About 0: the dequantisation is fused into the matmul's operand read (no copy); about
1: one block's kernels are materialised dequantised at a time (a copy per block, inside the scan); about the block
count: the whole stack is dequantised ahead of the scan (no memory saved during the step).

    python benchmarks/quant_memory_analysis.py [--width 1.3b|14b|tiny] [--blocks N] [--frames F --height H
        --width-px W] [--time] [--out DIR --name NAME]

On CPU (``--width 1.3b``, 2 blocks, 64 tokens) it printed the table of docs/quantization.md; on a GPU/TPU,
benchmarks/accelerator.sh runs it as case ``quant_fusion`` (Wan2.1-14B width, 2 blocks, one 480p frame).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.quant.cpu_bits import held_shapes
from vidax_core.quant.keep import DEFAULT_KEEP
from vidax_core.quant.linear import quantize_model
from vidax_wan.dit import WanDiT, WanDiTConfig
from vidax_wan.plugin import QUANTIZED_OUTSIDE_BLOCKS

WIDTHS = {  # (heads, ffn_dim); head dim 128
    "tiny": (2, 2048),
    "1.3b": (12, 8960),
    "14b": (40, 13824),
}
MODES = (None, "int8", "float8_e4m3fn")


def _cfg(width: str, blocks: int) -> WanDiTConfig:
    heads, ffn = WIDTHS[width]
    return WanDiTConfig(num_attention_heads=heads, attention_head_dim=128, ffn_dim=ffn, text_dim=4096, freq_dim=256,
                        num_layers=blocks, in_channels=16, out_channels=16, dtype=jnp.bfloat16)


def _ctor(cfg: WanDiTConfig, mode: str | None):
    def ctor():
        model = WanDiT(cfg, rngs=nnx.Rngs(0))
        if mode:
            quantize_model(model, mode, DEFAULT_KEEP, QUANTIZED_OUTSIDE_BLOCKS)
        return model

    return ctor


def measure(cfg: WanDiTConfig, latent: tuple[int, int, int], do_time: bool) -> list[dict]:
    x = jax.ShapeDtypeStruct((1, 16, *latent), jnp.float32)
    t = jax.ShapeDtypeStruct((1,), jnp.float32)
    c = jax.ShapeDtypeStruct((1, 8, 4096), jnp.bfloat16)
    rows = []
    for mode in MODES:
        graphdef, state = nnx.split(nnx.eval_shape(_ctor(cfg, mode)))
        state = held_shapes(state)  # as placed
        fwd = jax.jit(lambda s, *a: nnx.merge(graphdef, s)(*a))
        t0 = time.perf_counter()
        compiled = fwd.lower(state, x, t, c).compile()
        ma = compiled.memory_analysis()
        kernels = [leaf for path, leaf in nnx.to_flat_state(state) if path[0] == "blocks" and path[-1] == "kernel"]
        row = {"weights": mode or "bfloat16", "argument_bytes": int(ma.argument_size_in_bytes),
               "temp_bytes": int(ma.temp_size_in_bytes), "compile_s": round(time.perf_counter() - t0, 2),
               "block_kernel_bytes_bf16": sum(int(np.prod(k.shape[1:])) for k in kernels) * 2}
        if do_time:
            real = nnx.split(jax.jit(_ctor(cfg, mode))())[1]
            real = jax.tree.map(lambda a, sd: a if a.dtype == sd.dtype else jax.lax.bitcast_convert_type(a, sd.dtype),
                                real, state)
            args = [jax.random.normal(jax.random.key(1), x.shape, x.dtype), jnp.full(t.shape, 500.0, t.dtype),
                    jax.random.normal(jax.random.key(2), c.shape, c.dtype)]
            jax.block_until_ready(compiled(real, *args))
            calls = []
            for _ in range(3):
                t1 = time.perf_counter()
                jax.block_until_ready(compiled(real, *args))
                calls.append(time.perf_counter() - t1)
            row["call_s"] = round(statistics.median(calls), 5)
            del real
        rows.append(row)
        print(f"{row['weights']}: {row}", file=sys.stderr, flush=True)  # partial results if a later mode stalls
    base = rows[0]["temp_bytes"]
    for row in rows:
        row["temp_blocks"] = round(row["temp_bytes"] / row["block_kernel_bytes_bf16"], 3)
        row["excess_blocks"] = round((row["temp_bytes"] - base) / row["block_kernel_bytes_bf16"], 3)
    return rows


def markdown(rows: list[dict]) -> str:
    timed = "call_s" in rows[0]
    head = ("| weights | arguments (MiB) | temp (MiB) | temp (blocks) | excess (blocks) |"
            + (" call (ms) |" if timed else ""))
    lines = [head, "|" + " --- |" * (6 if timed else 5)]
    for r in rows:
        lines.append(f"| {r['weights']} | {r['argument_bytes'] / 2**20:.1f} | {r['temp_bytes'] / 2**20:.1f} | "
                     f"{r['temp_blocks']:.2f} | {r['excess_blocks']:.2f} |"
                     + (f" {r['call_s'] * 1e3:.2f} |" if timed else ""))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--width", choices=sorted(WIDTHS), default="1.3b")
    ap.add_argument("--blocks", type=int, default=2)
    ap.add_argument("--frames", type=int, default=1, help="latent frames")
    ap.add_argument("--height", type=int, default=16, help="latent height")
    ap.add_argument("--width-px", type=int, default=16, help="latent width")
    ap.add_argument("--time", action="store_true", help="also time the forward on random weights")
    ap.add_argument("--out", default=None)
    ap.add_argument("--name", default="quant_fusion")
    a = ap.parse_args()
    cfg = _cfg(a.width, a.blocks)
    rows = measure(cfg, (a.frames, a.height, a.width_px), a.time)
    table = markdown(rows)
    print(f"backend {jax.default_backend()}, Wan {a.width} width, {a.blocks} blocks, latent "
          f"{a.frames}x{a.height}x{a.width_px}; one block's kernels in bf16: "
          f"{rows[0]['block_kernel_bytes_bf16'] / 2**20:.1f} MiB")
    print(table)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        result = {"backend": jax.default_backend(), "width": a.width, "blocks": a.blocks,
                  "latent": [a.frames, a.height, a.width_px], "rows": rows}
        json.dump(result, open(os.path.join(a.out, a.name + ".json"), "w"), indent=1)
        open(os.path.join(a.out, a.name + ".md"), "w").write(table + "\n")


if __name__ == "__main__":
    main()
