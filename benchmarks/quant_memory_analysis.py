"""Does the 8-bit kernels' dequantisation stay inside the matmul's fusion? XLA's compiled memory analysis of one
jitted forward of a Wan-width DiT (Wan2.1-1.3B width, 2 blocks, 64 video tokens), bf16 vs int8 vs float8_e4m3fn
weights, built shape-only (no weight is allocated). Run it on the device in question (CPU here, GPU/TPU when one is
at hand): ``temp`` well above one block's dequantised kernels (88.5 MiB in bf16) would mean a full-precision copy of
more than the running block.

    python benchmarks/quant_memory_analysis.py
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from vidax_core.quant.keep import DEFAULT_KEEP
from vidax_core.quant.linear import quantize_model
from vidax_wan.dit import WanDiT, WanDiTConfig


def main() -> None:
    cfg = WanDiTConfig(num_attention_heads=12, attention_head_dim=128, ffn_dim=8960, text_dim=4096, freq_dim=256,
                       num_layers=2, in_channels=16, out_channels=16, dtype=jnp.bfloat16)
    x = jax.ShapeDtypeStruct((1, 16, 1, 16, 16), jnp.float32)
    t = jax.ShapeDtypeStruct((1,), jnp.float32)
    c = jax.ShapeDtypeStruct((1, 8, 4096), jnp.bfloat16)
    print(f"backend {jax.default_backend()}")
    print("| weights | arguments (MiB) | temp (MiB) |")
    print("| --- | --- | --- |")
    for mode in (None, "int8", "float8_e4m3fn"):
        def ctor(mode=mode):
            m = WanDiT(cfg, rngs=nnx.Rngs(0))
            if mode:
                quantize_model(m, mode, DEFAULT_KEEP)
            return m

        graphdef, state = nnx.split(nnx.eval_shape(ctor))
        ma = jax.jit(lambda s, *a: nnx.merge(graphdef, s)(*a)).lower(state, x, t, c).compile().memory_analysis()
        print(f"| {mode or 'bfloat16'} | {ma.argument_size_in_bytes / 2**20:.1f} | {ma.temp_size_in_bytes / 2**20:.1f} |")


if __name__ == "__main__":
    main()
