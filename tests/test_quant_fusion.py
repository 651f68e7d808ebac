"""The CPU-checkable part of "the dequantisation must not make a full-precision copy": XLA's compiled
memory analysis of one forward of a Wan DiT with int8 block kernels. Inside the scan over the blocks at most one
block's kernels may exist dequantised; a dequantisation hoisted out of the scan (the whole stacked kernel converted
before the loop) would put every block's full-precision kernels in the temp buffers.

XLA:CPU runs its dots as library calls on materialised operands, so one block's dequantised kernels are live on CPU
(bf16 operands are upcast for the whole stack ahead of the scan, and float8 ones were until the CPU backend held
them as their uint8 bits: docs/quantization.md, vidax_core.quant.cpu_bits); whether the
GPU/TPU matmul fuses the dequantisation into its operand read (no copy even of one block) is measured by
``benchmarks/quant_memory_analysis.py`` in ``benchmarks/accelerator.sh`` (case ``quant_fusion``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from vidax_core.quant.cpu_bits import held_shapes
from vidax_core.quant.keep import DEFAULT_KEEP
from vidax_core.quant.linear import quantize_model

BLOCKS = 8
CPU = jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0])  # float8 kernels held as the CPU backend holds them


@pytest.mark.parametrize("mode", ["int8", "float8_e4m3fn"])
def test_dequantisation_stays_inside_the_scan(mode):
    """One block's kernels dequantised at a time for both 8-bit modes; float8 held as float8 (not as the CPU backend
    holds it) is upcast for the whole stack ahead of the scan, the failure this guards against."""
    from vidax_wan.dit import WanDiT, WanDiTConfig
    from vidax_wan.plugin import QUANTIZED_OUTSIDE_BLOCKS

    # kernels large against the activations (16 video tokens, 8 text tokens), so the temp buffers show them
    cfg = WanDiTConfig(num_attention_heads=2, attention_head_dim=128, ffn_dim=2048, text_dim=32, freq_dim=256,
                       num_layers=BLOCKS, in_channels=4, out_channels=4, dtype=jnp.bfloat16)

    def ctor():
        model = WanDiT(cfg, rngs=nnx.Rngs(0))
        quantize_model(model, mode, DEFAULT_KEEP, QUANTIZED_OUTSIDE_BLOCKS)
        return model

    graphdef, state = nnx.split(nnx.eval_shape(ctor))  # shapes only: no weight is allocated
    args = (jax.ShapeDtypeStruct((1, 4, 1, 8, 8), jnp.float32), jax.ShapeDtypeStruct((1,), jnp.float32),
            jax.ShapeDtypeStruct((1, 8, 32), jnp.bfloat16))
    fwd = jax.jit(lambda s, *a: nnx.merge(graphdef, s)(*a))
    temp = fwd.lower(held_shapes(state, CPU), *args).compile().memory_analysis().temp_size_in_bytes
    kernels = [leaf for path, leaf in nnx.to_flat_state(state) if path[0] == "blocks" and path[-1] == "kernel"]
    assert kernels and all(np.dtype(k.dtype).itemsize == 1 for k in kernels)
    per_block_fp32 = sum(int(np.prod(k.shape[1:])) for k in kernels) * 4  # one block's kernels dequantised, fp32
    print(f"{mode}, {BLOCKS} blocks: temp {temp} B; one block's kernels in fp32 {per_block_fp32} B, "
          f"the stack's {BLOCKS * per_block_fp32} B")
    assert temp < 2 * per_block_fp32  # about one block at a time, not the stack (8 blocks)
    if mode == "float8_e4m3fn":  # held as float8, XLA:CPU upcasts the whole stack: the test can fail
        stacked = fwd.lower(state, *args).compile().memory_analysis().temp_size_in_bytes
        assert stacked > BLOCKS / 2 * per_block_fp32 / 2, stacked  # at least the stack's bf16 copy
