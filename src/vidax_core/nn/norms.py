"""Normalisation layers every DiT and encoder uses: RMSNorm (plain or Gemma's ``1 + w``), LayerNorm (with or without
affine), per-head q/k norms.

Statistics are always computed in float32 whatever the input dtype. The output dtype is explicit (``out_dtype``):
RMSNorm returns the input dtype by default (diffusers / torch ``RMSNorm``), LayerNorm returns float32 by default so
that the AdaLN modulation that usually follows also runs in float32 (diffusers ``FP32LayerNorm`` then modulate).
Parameters are named ``scale`` (and ``bias``) and carry logical axis names for sharding.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from vidax_core.nn.layers import Axes, param


def rms_norm(
    x: jax.Array,
    scale: jax.Array | None = None,
    *,
    eps: float,
    offset: float = 0.0,
    scale_in_input_dtype: bool = False,
    out_dtype: Any = None,
) -> jax.Array:
    """``x / sqrt(mean(x^2) + eps) * (offset + scale)`` over the last axis.

    ``offset=1`` is Gemma's ``(1 + w)`` gain. ``scale_in_input_dtype`` rounds the normalised value to the input
    dtype before the gain (Llama / T5 in transformers); otherwise the gain is applied in float32 (torch RMSNorm,
    Gemma). Result in ``out_dtype`` (default: the input dtype)."""
    xf = x.astype(jnp.float32)
    y = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + eps)
    if scale is not None:
        if scale_in_input_dtype:
            y = y.astype(x.dtype).astype(jnp.float32)
        y = y * (offset + scale.astype(jnp.float32))
    return y.astype(out_dtype or x.dtype)


def layer_norm(
    x: jax.Array,
    eps: float,
    scale: jax.Array | None = None,
    bias: jax.Array | None = None,
    *,
    out_dtype: Any = jnp.float32,
) -> jax.Array:
    """LayerNorm over the last axis with float32 statistics; optional gain and bias; float32 result by default."""
    xf = x.astype(jnp.float32)
    mean = jnp.mean(xf, axis=-1, keepdims=True)
    xc = xf - mean
    var = jnp.mean(xc * xc, axis=-1, keepdims=True)
    y = xc * jax.lax.rsqrt(var + eps)
    if scale is not None:
        y = y * scale.astype(jnp.float32)
    if bias is not None:
        y = y + bias.astype(jnp.float32)
    return y.astype(out_dtype or x.dtype)


class RMSNorm(nnx.Module):
    """RMSNorm with a learned gain ``scale`` (float32 parameter).

    ``heads``: normalise each head's slice of the last axis separately (per-head q/k norm on a ``(..., H * hd)``
    projection, ``dim = hd``); leave None to normalise over the whole last axis (Wan's q/k norm "across heads",
    ``dim = H * hd``). ``gemma=True`` stores ``w`` and applies ``1 + w``. ``affine=False`` has no parameter."""

    def __init__(
        self,
        dim: int,
        names: Axes = (None,),
        *,
        eps: float,
        gemma: bool = False,
        affine: bool = True,
        heads: int | None = None,
        scale_in_input_dtype: bool = False,
        out_dtype: Any = None,
    ):
        self.eps = eps
        self.offset = 1.0 if gemma else 0.0
        self.heads = heads
        self.scale_in_input_dtype = scale_in_input_dtype
        self.out_dtype = out_dtype
        init = jnp.zeros if gemma else jnp.ones
        self.scale = param(init((dim,), jnp.float32), names) if affine else None

    def __call__(self, x: jax.Array) -> jax.Array:
        shape = x.shape
        if self.heads is not None:
            x = x.reshape(*shape[:-1], self.heads, shape[-1] // self.heads)
        y = rms_norm(x, None if self.scale is None else self.scale[...], eps=self.eps, offset=self.offset,
                     scale_in_input_dtype=self.scale_in_input_dtype, out_dtype=self.out_dtype)
        return y.reshape(shape)


class LayerNorm(nnx.Module):
    """LayerNorm with optional ``scale`` / ``bias`` (float32 parameters); float32 output unless ``out_dtype``."""

    def __init__(
        self,
        dim: int,
        names: Axes = (None,),
        *,
        eps: float,
        affine: bool = True,
        bias: bool = True,
        out_dtype: Any = jnp.float32,
    ):
        self.eps = eps
        self.out_dtype = out_dtype
        self.scale = param(jnp.ones((dim,), jnp.float32), names) if affine else None
        self.bias = param(jnp.zeros((dim,), jnp.float32), names) if affine and bias else None

    def __call__(self, x: jax.Array) -> jax.Array:
        return layer_norm(
            x,
            self.eps,
            None if self.scale is None else self.scale[...],
            None if self.bias is None else self.bias[...],
            out_dtype=self.out_dtype,
        )
