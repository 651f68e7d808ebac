"""The quality cost of 8-bit weights (issue 26): float8_e4m3fn and int8 runs against the bf16 run.

1. The tiny demo (``configs/demo.yaml``, random-weight tiny Wan2.1, bf16 compute): the whole run three times
   (``model.weight_dtype`` null / float8_e4m3fn / int8) from the same seed; relative error of the final latents and
   PSNR of the decoded frames (in [0, 1]) against the bf16 run.
2. A Wan-width random DiT (Wan2.1-1.3B's width: 12 heads x 128, FFN 8960, text 4096; ``--blocks`` blocks, weights
   N(0, 0.02) as ``vidax bench --random-dit`` draws them, then the same weights quantized as a Wan run stores them:
   blocks and the embedder MLPs / time projection): one denoiser call on a
   480p-shaped latent slice; relative error and PSNR (peak = the bf16 output's range) of the prediction.

    python benchmarks/quant_quality.py [--blocks 2] [--frames 3]

Weight-only: both 8-bit runs dequantise into bf16 for every matmul (no fp8 matmul), so the error is the
weights' rounding alone.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = ("float8_e4m3fn", "int8")


def rel(a, b) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def psnr(a, b, peak: float) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(peak**2 / mse)


def demo(out: str) -> dict:
    res = {}
    for mode in ("null",) + MODES:
        lat, fr = os.path.join(out, f"{mode}_lat.npy"), os.path.join(out, f"{mode}_frames.npy")
        subprocess.run([sys.executable, "-m", "vidax_core.cli", "run", os.path.join(ROOT, "configs", "demo.yaml"),
                        "model.dtype=bfloat16", f"model.weight_dtype={mode}", f"output.save_latents={lat}",
                        f"output.save_frames={fr}", "output.path=null", "output.metrics=null", "--quiet"],
                       check=True)
        res[mode] = (np.load(lat), np.load(fr))
    base_l, base_f = res["null"]
    return {m: {"latents_rel": rel(res[m][0], base_l), "frames_psnr_db": psnr(res[m][1], base_f, 1.0)}
            for m in MODES}


def wan_width(blocks: int, frames: int) -> dict:
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from vidax_core.bench.random_dit import _random_state
    from vidax_core.quant.keep import DEFAULT_KEEP
    from vidax_core.quant.linear import quantize_model
    from vidax_wan.dit import WanDiT, WanDiTConfig
    from vidax_wan.plugin import QUANTIZED_OUTSIDE_BLOCKS

    cfg = WanDiTConfig(num_attention_heads=12, attention_head_dim=128, ffn_dim=8960, text_dim=4096, freq_dim=256,
                       num_layers=blocks, in_channels=16, out_channels=16, dtype=jnp.bfloat16)
    graphdef, abstract = nnx.split(nnx.eval_shape(lambda: WanDiT(cfg, rngs=nnx.Rngs(0))))
    state = _random_state(abstract, {"blocks": blocks}, None)
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((1, 16, frames, 30, 52)), jnp.float32)  # 480p latent rows 0..29
    t = jnp.asarray([500.0], jnp.float32)
    ctx = jnp.asarray(rng.standard_normal((1, 64, 4096)), jnp.bfloat16)
    fwd = jax.jit(lambda m, *a: m(*a))
    outs = {}
    for mode in ("bf16",) + MODES:
        model = nnx.merge(graphdef, state)
        if mode != "bf16":
            quantize_model(model, mode, DEFAULT_KEEP, QUANTIZED_OUTSIDE_BLOCKS)  # as a Wan run stores it
        outs[mode] = np.asarray(fwd(model, x, t, ctx), np.float32)
    base = outs["bf16"]
    peak = float(base.max() - base.min())
    return {m: {"prediction_rel": rel(outs[m], base), "prediction_psnr_db": psnr(outs[m], base, peak)} for m in MODES}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=2)
    ap.add_argument("--frames", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as out:
        d = demo(out)
    w = wan_width(args.blocks, args.frames)
    print("| model | weights | relative error vs bf16 | PSNR vs bf16 |")
    print("| --- | --- | --- | --- |")
    for m in MODES:
        print(f"| tiny demo (20 steps, latents / frames) | {m} | {d[m]['latents_rel']:.2e} | "
              f"{d[m]['frames_psnr_db']:.1f} dB |")
    for m in MODES:
        print(f"| Wan-width random DiT ({args.blocks} blocks, one call) | {m} | {w[m]['prediction_rel']:.2e} | "
              f"{w[m]['prediction_psnr_db']:.1f} dB |")
    print(json.dumps({"demo": d, "wan_width": w}))


if __name__ == "__main__":
    main()
