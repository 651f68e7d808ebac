"""The layers of the CogVideoX VAE (diffusers ``AutoencoderKLCogVideoX``) in Flax NNX, channel-last ``(B, T, H, W, C)``.

What sets this VAE apart from Wan's: GroupNorm (its statistics span every frame of the chunk being run, so the
reference's frame batches are part of the result), causal convs whose missing past on the first chunk is copies of
the first frame, a decoder whose norms are spatially conditioned on the latents (``SpatialNorm3D``: the chunk's
latents resized by nearest neighbour to the activation, then ``norm(f) * conv_y(zq) + conv_b(zq)``), and time
compression by averaging frame pairs (encoder) / repeating frames (decoder), the first frame of an odd-length
chunk passing on its own.

Every kernel-3 causal conv streams through :class:`vidax_core.vae.causal_conv.FeatureCache` (last 2 input frames);
the order of calls is the cache layout, identical for every chunk.
"""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.nn.group_norm import GroupNorm
from vidax_core.vae.causal_conv import CausalConv3d, FeatureCache
from vidax_core.vae.wan21 import Conv2d


def nearest_index(n_in: int, n_out: int) -> np.ndarray:
    """Source indices of torch's ``F.interpolate(mode="nearest")`` from ``n_in`` to ``n_out`` positions.

    torch takes ``floor(i * s)`` with the float32 scale ``s = n_in / n_out`` (exact shortcuts for equal and double
    sizes), clamped to the last index.
    """
    if n_out == n_in:
        return np.arange(n_out)
    if n_out == 2 * n_in:
        return np.arange(n_out) >> 1
    scale = np.float32(n_in) / np.float32(n_out)
    idx = np.floor(np.arange(n_out, dtype=np.float32) * scale).astype(np.int64)
    return np.minimum(idx, n_in - 1)


def resize_nearest(x: jax.Array, size: Sequence[int]) -> jax.Array:
    """(B, T, H, W, C) -> (B, *size, C) by torch's nearest rule; integer upscales become repeats."""
    for axis, n_out in zip((1, 2, 3), size):
        n_in = x.shape[axis]
        idx = nearest_index(n_in, n_out)
        if n_out % n_in == 0 and np.array_equal(idx, np.arange(n_out) // (n_out // n_in)):
            x = jnp.repeat(x, n_out // n_in, axis=axis)
        else:
            x = jnp.take(x, jnp.asarray(idx), axis=axis)
    return x


def _pad_first(cache: FeatureCache, conv: CausalConv3d, x: jax.Array) -> jax.Array:
    return cache.conv(conv, x, first_pad="first")


class SpatialNorm3D(nnx.Module):
    """``CogVideoXSpatialNorm3D``: GroupNorm (eps 1e-6) of ``f``, modulated by 1x1x1 convs of the resized latents."""

    def __init__(self, f_channels: int, zq_channels: int, groups: int, *, dtype=jnp.float32):
        self.norm_layer = GroupNorm(f_channels, groups, eps=1e-6)
        self.conv_y = CausalConv3d(zq_channels, f_channels, (1, 1, 1), dtype=dtype)
        self.conv_b = CausalConv3d(zq_channels, f_channels, (1, 1, 1), dtype=dtype)

    def __call__(self, f: jax.Array, zq: jax.Array) -> jax.Array:
        t, h, w = f.shape[1:4]
        if t > 1 and t % 2 == 1:  # the first frame is resized on its own, as the decoder treats it
            zq = jnp.concatenate([resize_nearest(zq[:, :1], (1, h, w)), resize_nearest(zq[:, 1:], (t - 1, h, w))],
                                 axis=1)
        else:
            zq = resize_nearest(zq, (t, h, w))
        zq = zq.astype(f.dtype)
        return self.norm_layer(f) * self.conv_y(zq) + self.conv_b(zq)


class ResnetBlock(nnx.Module):
    """``CogVideoXResnetBlock3D`` without time embedding: norm, SiLU, causal conv, twice, plus a (1x1x1) shortcut.

    ``zq_channels`` set: both norms are :class:`SpatialNorm3D` (decoder); otherwise GroupNorm with ``eps``.
    """

    def __init__(self, cin: int, cout: int, groups: int, eps: float, zq_channels: int | None = None, *,
                 dtype=jnp.float32):
        if zq_channels is None:
            self.norm1 = GroupNorm(cin, groups, eps=eps)
            self.norm2 = GroupNorm(cout, groups, eps=eps)
        else:
            self.norm1 = SpatialNorm3D(cin, zq_channels, groups, dtype=dtype)
            self.norm2 = SpatialNorm3D(cout, zq_channels, groups, dtype=dtype)
        self.spatial = zq_channels is not None
        self.conv1 = CausalConv3d(cin, cout, dtype=dtype)
        self.conv2 = CausalConv3d(cout, cout, dtype=dtype)
        self.conv_shortcut = CausalConv3d(cin, cout, (1, 1, 1), dtype=dtype) if cin != cout else None

    def _norm(self, norm, x: jax.Array, zq: jax.Array | None) -> jax.Array:
        return norm(x, zq) if self.spatial else norm(x)

    def __call__(self, x: jax.Array, cache: FeatureCache, zq: jax.Array | None = None) -> jax.Array:
        h = _pad_first(cache, self.conv1, jax.nn.silu(self._norm(self.norm1, x, zq)))
        h = _pad_first(cache, self.conv2, jax.nn.silu(self._norm(self.norm2, h, zq)))  # dropout: inference no-op
        return h + (self.conv_shortcut(x) if self.conv_shortcut is not None else x)


def _pair_mean(x: jax.Array) -> jax.Array:
    """``avg_pool1d(kernel 2, stride 2)`` over time (a trailing odd frame is dropped)."""
    n = x.shape[1] // 2 * 2
    return (x[:, 0:n:2] + x[:, 1:n:2]) / 2


class Downsample(nnx.Module):
    """``CogVideoXDownsample3D``: [average frame pairs, an odd chunk's first frame kept], pad right/bottom, 3x3/2."""

    def __init__(self, dim: int, compress_time: bool, *, dtype=jnp.float32):
        self.compress_time = compress_time
        self.conv = Conv2d(dim, dim, 3, stride=2, padding=((0, 1), (0, 1)), dtype=dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        if self.compress_time:
            if x.shape[1] % 2 == 1:
                x = jnp.concatenate([x[:, :1], _pair_mean(x[:, 1:])], axis=1)
            else:
                x = _pair_mean(x)
        return self.conv(x)


class Upsample(nnx.Module):
    """``CogVideoXUpsample3D``: nearest 2x in space [and time, an odd chunk's first frame not doubled], 3x3 conv."""

    def __init__(self, dim: int, compress_time: bool, *, dtype=jnp.float32):
        self.compress_time = compress_time
        self.conv = Conv2d(dim, dim, 3, dtype=dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        t = x.shape[1]
        if self.compress_time and t > 1:
            if t % 2 == 1:
                x = jnp.concatenate([x[:, :1], jnp.repeat(x[:, 1:], 2, axis=1)], axis=1)
            else:
                x = jnp.repeat(x, 2, axis=1)
        x = jnp.repeat(jnp.repeat(x, 2, axis=2), 2, axis=3)
        return self.conv(x)


class Block(nnx.Module):
    """Resnets then an optional ``resampler``: a down block (GroupNorm resnets, :class:`Downsample`), an up block
    (spatial-norm resnets, :class:`Upsample`) or a mid block (two resnets, no resampler)."""

    def __init__(self, resnets: list[ResnetBlock], resampler: nnx.Module | None):
        self.resnets = nnx.List(resnets)
        self.resampler = resampler

    def __call__(self, x: jax.Array, cache: FeatureCache, zq: jax.Array | None = None) -> jax.Array:
        for r in self.resnets:
            x = r(x, cache, zq)
        return self.resampler(x) if self.resampler is not None else x


def _mid_block(dim: int, groups: int, eps: float, zq_channels: int | None, dtype) -> Block:
    return Block([ResnetBlock(dim, dim, groups, eps, zq_channels, dtype=dtype) for _ in range(2)], None)


class Encoder(nnx.Module):
    """``CogVideoXEncoder3D``: video (B, T, H, W, 3) -> moments (B, t, h, w, 2 * latent) for one chunk."""

    def __init__(self, *, in_channels: int, latent_channels: int, block_out_channels: Sequence[int],
                 layers_per_block: int, groups: int, eps: float, time_levels: int, dtype=jnp.float32):
        chans = list(block_out_channels)
        self.conv_in = CausalConv3d(in_channels, chans[0], dtype=dtype)
        blocks, cin = [], chans[0]
        for i, cout in enumerate(chans):
            resnets = [ResnetBlock(cin if j == 0 else cout, cout, groups, eps, dtype=dtype)
                       for j in range(layers_per_block)]
            down = Downsample(cout, i < time_levels, dtype=dtype) if i < len(chans) - 1 else None
            blocks.append(Block(resnets, down))
            cin = cout
        self.down_blocks = nnx.List(blocks)
        self.mid_block = _mid_block(chans[-1], groups, eps, None, dtype)
        self.norm_out = GroupNorm(chans[-1], groups, eps=1e-6)
        self.conv_out = CausalConv3d(chans[-1], 2 * latent_channels, dtype=dtype)

    def __call__(self, x: jax.Array, cache: FeatureCache) -> jax.Array:
        x = _pad_first(cache, self.conv_in, x)
        for blk in self.down_blocks:
            x = blk(x, cache)
        x = self.mid_block(x, cache)
        return _pad_first(cache, self.conv_out, jax.nn.silu(self.norm_out(x)))


class Decoder(nnx.Module):
    """``CogVideoXDecoder3D``: latents (B, t, h, w, latent) -> pixels (B, T, H, W, 3) for one chunk; every norm is
    conditioned on this chunk's latents."""

    def __init__(self, *, out_channels: int, latent_channels: int, block_out_channels: Sequence[int],
                 layers_per_block: int, groups: int, eps: float, time_levels: int, dtype=jnp.float32):
        chans = list(reversed(block_out_channels))
        zc = latent_channels
        self.conv_in = CausalConv3d(latent_channels, chans[0], dtype=dtype)
        self.mid_block = _mid_block(chans[0], groups, eps, zc, dtype)
        blocks, cin = [], chans[0]
        for i, cout in enumerate(chans):
            resnets = [ResnetBlock(cin if j == 0 else cout, cout, groups, eps, zc, dtype=dtype)
                       for j in range(layers_per_block + 1)]
            up = Upsample(cout, i < time_levels, dtype=dtype) if i < len(chans) - 1 else None
            blocks.append(Block(resnets, up))
            cin = cout
        self.up_blocks = nnx.List(blocks)
        self.norm_out = SpatialNorm3D(chans[-1], zc, groups, dtype=dtype)
        self.conv_out = CausalConv3d(chans[-1], out_channels, dtype=dtype)

    def __call__(self, z: jax.Array, cache: FeatureCache) -> jax.Array:
        x = _pad_first(cache, self.conv_in, z)
        x = self.mid_block(x, cache, z)
        for blk in self.up_blocks:
            x = blk(x, cache, z)
        return _pad_first(cache, self.conv_out, jax.nn.silu(self.norm_out(x, z)))
