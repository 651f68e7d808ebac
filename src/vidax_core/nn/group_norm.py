"""GroupNorm on channel-last arrays (torch ``nn.GroupNorm``): channels split into groups, each normalised over its
channels and the non-channel axes, then a per-channel gain and bias.

``GroupNorm(dim, groups, eps=...)`` on (B, ..., C) normalises each batch entry over every axis between batch and
channels (a 3-D VAE: all frames, rows and columns of the chunk it is given). ``axes`` narrows that, e.g.
``axes=(2, 3)`` on (B, T, H, W, C) for a per-frame 2-D net. Statistics in float32 (biased variance, as torch);
result in the input dtype unless ``out_dtype``. Parameters ``scale`` (torch ``weight``) and ``bias``.
"""

from __future__ import annotations

from typing import Any, Sequence

import jax
import jax.numpy as jnp
from flax import nnx

from vidax_core.nn.layers import Axes, param


def group_norm(
    x: jax.Array,
    groups: int,
    *,
    eps: float,
    scale: jax.Array | None = None,
    bias: jax.Array | None = None,
    axes: Sequence[int] | None = None,
    out_dtype: Any = None,
) -> jax.Array:
    """Normalise ``x`` (B, ..., C) per group of ``C // groups`` channels over ``axes`` (default: all but batch and
    channels) and the group's channels."""
    c = x.shape[-1]
    if c % groups:
        raise ValueError(f"GroupNorm: {c} channels do not split into {groups} groups")
    xf = x.astype(jnp.float32).reshape(*x.shape[:-1], groups, c // groups)
    axes = tuple(range(1, x.ndim - 1)) if axes is None else tuple(a % (x.ndim - 1) for a in axes)
    red = axes + (xf.ndim - 1,)
    mean = jnp.mean(xf, axis=red, keepdims=True)
    xc = xf - mean
    var = jnp.mean(xc * xc, axis=red, keepdims=True)
    y = (xc * jax.lax.rsqrt(var + eps)).reshape(x.shape)
    if scale is not None:
        y = y * scale.astype(jnp.float32)
    if bias is not None:
        y = y + bias.astype(jnp.float32)
    return y.astype(out_dtype or x.dtype)


class GroupNorm(nnx.Module):
    """torch ``nn.GroupNorm(groups, dim, eps, affine)`` on channel-last input (note: ``dim`` first here)."""

    def __init__(self, dim: int, groups: int, *, eps: float = 1e-5, affine: bool = True,
                 axes: Sequence[int] | None = None, names: Axes = (None,), out_dtype: Any = None):
        self.groups, self.eps = groups, eps
        self.axes = None if axes is None else tuple(axes)
        self.out_dtype = out_dtype
        self.scale = param(jnp.ones((dim,), jnp.float32), names) if affine else None
        self.bias = param(jnp.zeros((dim,), jnp.float32), names) if affine else None

    def __call__(self, x: jax.Array) -> jax.Array:
        return group_norm(x, self.groups, eps=self.eps, axes=self.axes, out_dtype=self.out_dtype,
                          scale=None if self.scale is None else self.scale[...],
                          bias=None if self.bias is None else self.bias[...])
