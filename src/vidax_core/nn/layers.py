"""Building blocks shared by every model: parameters with logical axis names, linear layers, stacked blocks.

Parameters carry logical axis names (``out_sharding`` metadata, never applied eagerly) that a family's
``shard_rules`` map onto mesh axes. Identical blocks live in ONE parameter tree stacked on a leading ``layers``
axis and run with ``lax.scan``, so compile time does not grow with depth and an offload executor can run any
slice of the stack.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
from flax import nnx

Axes = tuple[str | None, ...]
LAYERS = "layers"


def param(value: jax.Array, names: Axes) -> nnx.Param:
    """A parameter annotated with logical axis names (one per dimension, None for unsharded)."""
    return nnx.Param(value, out_sharding=names, eager_sharding=False)


class Linear(nnx.Module):
    """y = x @ kernel (+ bias); kernel stored (in, out). The matmul runs in the kernel's dtype with fp32
    accumulation; the result is in the kernel's dtype, or fp32 when ``fp32_out``.

    An 8-bit layer (:mod:`vidax_core.quant.linear`) holds an int8 / float8_e4m3fn kernel, its fp32
    ``kernel_scale`` (one per output channel, shape (1, out)) and the ``compute_dtype`` it replaced: the 8-bit values
    (exact in bf16 / fp32) enter the matmul converted inside its fusion and the per-output-channel scale multiplies
    the fp32 product, so no dequantised copy of the kernel is kept and no rounding is added to the weights. On the
    CPU backend a float8 kernel arrives as its uint8 bits (:mod:`vidax_core.quant.cpu_bits`).

    Unfused LoRA (:mod:`vidax_core.lora.unfused`): ``lora_down`` (in, R), ``lora_up`` (R, out) and ``lora_scale``
    (R,) add ``((x @ lora_down) * lora_scale) @ lora_up``, and ``lora_bias`` (out,) a bias delta; they are ordinary
    parameters of the step, so new values of the same shapes reuse its compiled program."""

    def __init__(self, d_in: int, d_out: int, names: Axes, *, dtype: Any, rngs: nnx.Rngs, bias: bool = True,
                 fp32_out: bool = False):
        self.kernel = param(nnx.initializers.lecun_normal()(rngs.params(), (d_in, d_out), dtype), names)
        self.bias = param(jnp.zeros((d_out,), dtype), (names[1],)) if bias else None
        self.fp32_out = fp32_out
        self.kernel_scale: nnx.Param | None = nnx.data(None)
        self.compute_dtype: Any = None
        self.lora_down: nnx.Param | None = nnx.data(None)
        self.lora_up: nnx.Param | None = nnx.data(None)
        self.lora_scale: nnx.Param | None = nnx.data(None)
        self.lora_bias: nnx.Param | None = nnx.data(None)

    def __call__(self, x: jax.Array) -> jax.Array:
        k = self.kernel[...]
        scale = None
        if self.kernel_scale is not None:  # 8-bit values are exact in the compute dtype; the scale follows the matmul
            if k.dtype == jnp.uint8:  # float8_e4m3fn bits, as the CPU backend holds them (vidax_core.quant.cpu_bits)
                k = jax.lax.bitcast_convert_type(k, jnp.float8_e4m3fn)
            k, scale = k.astype(self.compute_dtype), self.kernel_scale[...].astype(jnp.float32)
        y = jnp.matmul(x.astype(k.dtype), k, preferred_element_type=jnp.float32)
        if scale is not None:
            y = y * scale
        if self.bias is not None:
            y = y + self.bias[...].astype(jnp.float32)
        if self.lora_down is not None:
            h = jnp.matmul(x.astype(k.dtype), self.lora_down[...].astype(k.dtype), preferred_element_type=jnp.float32)
            h = h * self.lora_scale[...].astype(jnp.float32)
            y = y + jnp.matmul(h.astype(k.dtype), self.lora_up[...].astype(k.dtype), preferred_element_type=jnp.float32)
        if self.lora_bias is not None:
            y = y + self.lora_bias[...].astype(jnp.float32)
        return y if self.fp32_out else y.astype(k.dtype)


def stacked(make_block: Callable[[nnx.Rngs], nnx.Module], num_layers: int, rngs: nnx.Rngs) -> nnx.Module:
    """``num_layers`` blocks from ``make_block(rngs)`` as one module whose parameters have a leading layer axis."""

    @nnx.split_rngs(splits=num_layers)
    @nnx.vmap(in_axes=(0,), out_axes=0, transform_metadata={nnx.PARTITION_NAME: LAYERS})
    def make(r: nnx.Rngs) -> nnx.Module:
        return make_block(r)

    return make(rngs)


def scan_blocks(block_graphdef: nnx.GraphDef, stacked_state: nnx.State, x: jax.Array, *args: Any) -> jax.Array:
    """Run blocks stacked on the leading axis of ``stacked_state`` (any slice of it): ``x = block(x, *args)``."""

    def body(h, layer_state):
        return nnx.merge(block_graphdef, layer_state)(h, *args), None

    x, _ = jax.lax.scan(body, x, stacked_state)
    return x
