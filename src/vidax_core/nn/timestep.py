"""Diffusion timestep embeddings: the sinusoidal projection and the MLP that follows it.

:func:`timestep_embedding` is diffusers' ``get_timestep_embedding`` (same options, same float32 operation order),
for any timestep shape: (B,), per token (B, S), per frame (B, F)... :class:`TimestepEmbedding` is the
``linear_1 -> act -> linear_2`` MLP (diffusers ``TimestepEmbedding``), kept in float32 by default since diffusers
keeps its time embedders in float32.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.nn.layers import Axes, Linear

ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "silu": jax.nn.silu,
    "swish": jax.nn.silu,
    "gelu": lambda x: jax.nn.gelu(x, approximate=False),
    "gelu_tanh": lambda x: jax.nn.gelu(x, approximate=True),
    "mish": lambda x: x * jnp.tanh(jax.nn.softplus(x)),
}


def timestep_embedding(
    t: jax.Array,
    dim: int,
    *,
    flip_sin_to_cos: bool = False,
    downscale_freq_shift: float = 1.0,
    scale: float = 1.0,
    max_period: float = 10000.0,
) -> jax.Array:
    """Sinusoidal embedding ``[sin(t * f), cos(t * f)]`` with ``f_i = exp(-log(max_period) * i / (half - shift))``.

    ``flip_sin_to_cos`` puts cos first (Wan, PixArt, LTX, Cosmos use ``True, 0``); ``scale`` multiplies the
    angles; an odd ``dim`` is zero-padded at the end. Defaults are diffusers'. Returns float32
    ``t.shape + (dim,)``."""
    half = dim // 2
    exponent = np.float32(-math.log(max_period)) * jnp.arange(half, dtype=jnp.float32)
    exponent = exponent / np.float32(half - downscale_freq_shift)
    args = t.astype(jnp.float32)[..., None] * jnp.exp(exponent)
    if scale != 1:
        args = np.float32(scale) * args
    sin, cos = jnp.sin(args), jnp.cos(args)
    emb = jnp.concatenate([cos, sin] if flip_sin_to_cos else [sin, cos], axis=-1)
    if dim % 2:
        emb = jnp.pad(emb, [(0, 0)] * (emb.ndim - 1) + [(0, 1)])
    return emb


class TimestepEmbedding(nnx.Module):
    """``linear_2(act(linear_1(x)))`` (diffusers ``TimestepEmbedding``); ``out_dim`` defaults to ``dim``.

    Parameters and matmuls in ``dtype`` (float32 by default); the result is float32."""

    def __init__(
        self,
        in_dim: int,
        dim: int,
        *,
        out_dim: int | None = None,
        act: str = "silu",
        bias: bool = True,
        dtype: Any = jnp.float32,
        names: tuple[Axes, Axes] = ((None, "embed"), (None, "embed")),
        rngs: nnx.Rngs,
    ):
        self.act = act
        self.linear_1 = Linear(in_dim, dim, names[0], dtype=dtype, rngs=rngs, bias=bias, fp32_out=True)
        self.linear_2 = Linear(dim, out_dim or dim, names[1], dtype=dtype, rngs=rngs, bias=bias, fp32_out=True)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.linear_2(ACTIVATIONS[self.act](self.linear_1(x)))
