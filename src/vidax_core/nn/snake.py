"""Snake / SnakeBeta activations (BigVGAN): ``x + sin(alpha x)^2 / (beta + eps)``, per channel, on channel-last
input. They learn a periodic bias, which is why neural vocoders use them in place of a leaky ReLU.

Parameters are stored on a log scale when ``logscale`` (diffusers' ``SnakeBeta`` default: ``exp`` is applied at use);
without ``use_beta`` the amplitude is ``alpha`` itself (plain Snake).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx


class SnakeBeta(nnx.Module):
    """diffusers ``SnakeBeta(channels, logscale, use_beta, eps=1e-9)``; parameters ``alpha`` (and ``beta``) (C,)."""

    def __init__(self, channels: int, *, logscale: bool = True, use_beta: bool = True, eps: float = 1e-9):
        self.logscale, self.eps = logscale, eps
        init = jnp.zeros if logscale else jnp.ones
        self.alpha = nnx.Param(init((channels,), jnp.float32))
        self.beta = nnx.Param(init((channels,), jnp.float32)) if use_beta else None

    def __call__(self, x: jax.Array) -> jax.Array:
        xf = x.astype(jnp.float32)
        alpha = self.alpha[...].astype(jnp.float32)
        amp = alpha if self.beta is None else self.beta[...].astype(jnp.float32)
        if self.logscale:
            alpha, amp = jnp.exp(alpha), jnp.exp(amp)
        return (xf + (1.0 / (amp + self.eps)) * jnp.square(jnp.sin(xf * alpha))).astype(x.dtype)
