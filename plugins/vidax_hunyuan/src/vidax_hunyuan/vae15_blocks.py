"""The layers of the HunyuanVideo-1.5 VAE (diffusers ``AutoencoderKLHunyuanVideo15``), channel-last
``(B, T, H, W, C)``.

What it shares with the 1.0 VAE (:mod:`vidax_core.vae.hunyuan_blocks`, reused here): replicate-padded causal 3x3x3
convs, 1x1x1 convs, the single-head mid-block attention with a causal *frame* mask, "resnets then one resampler"
blocks. What is its own: every norm is the channel RMS norm ``x / ||x||_2 * sqrt(C) * gamma`` (the same layer as
Wan's VAE, :class:`vidax_core.vae.wan21.RMSNorm`) instead of GroupNorm, so no statistic spans frames or pixels,
and resampling is a conv plus a pixel (un)shuffle (:mod:`vidax_core.vae.pixel_shuffle`) with a parameter-free
shortcut (channel-group means down, channel repeats up). The first frame is resampled in space only, so ``1 + 4k``
frames map to ``1 + k`` latent frames. The encoder and decoder also end / start in parameter-free channel
shortcuts (a group mean into the moments, a repeat out of the latents).

A padded spatial tile (``area``, a :class:`~vidax_core.vae.tile_area.TileArea`; None: the input is the whole tile)
runs as the unpadded tile would: every 3x3 conv first repeats the real edge into the padding, the attention sees
real keys only, and the rest is per pixel (the RMS norms, 1x1 convs, channel shortcuts) or moves whole 2x2 blocks
(the pixel shuffles, whose real area stays whole at every level).
"""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.vae.hunyuan_blocks import Block, PointwiseConv3d, ReplicateCausalConv3d, frame_causal_attention
from vidax_core.vae.pixel_shuffle import depth_to_space, space_to_depth
from vidax_core.vae.tile_area import TileArea
from vidax_core.vae.wan21 import RMSNorm


_SPACE = (1, 2, 2)
_SPACE_TIME = (2, 2, 2)


def group_mean(x: jax.Array, cout: int) -> jax.Array:
    """The mean over each group of ``g`` consecutive channels: (..., cout * g) -> (..., cout)."""
    return x.reshape(*x.shape[:-1], cout, x.shape[-1] // cout).mean(axis=-1)


class ResnetBlock(nnx.Module):
    """``HunyuanVideo15ResnetBlock``: (RMS norm, SiLU, causal conv) twice, plus a plain 1x1x1 conv shortcut when the
    width changes."""

    def __init__(self, cin: int, cout: int, *, dtype=jnp.float32):
        self.norm1 = RMSNorm(cin, dtype=dtype)
        self.conv1 = ReplicateCausalConv3d(cin, cout, dtype=dtype)
        self.norm2 = RMSNorm(cout, dtype=dtype)
        self.conv2 = ReplicateCausalConv3d(cout, cout, dtype=dtype)
        self.conv_shortcut = PointwiseConv3d(cin, cout, dtype=dtype) if cin != cout else None

    def __call__(self, x: jax.Array, area: TileArea | None = None) -> jax.Array:
        h = self.conv1(jax.nn.silu(self.norm1(x)), area)
        h = self.conv2(jax.nn.silu(self.norm2(h)), area)
        return h + (self.conv_shortcut(x) if self.conv_shortcut is not None else x)


class AttnBlock(nnx.Module):
    """``HunyuanVideo15AttnBlock``: RMS norm, 1x1x1 q/k/v convs, one head of width C over every token with the causal
    frame mask, 1x1x1 ``proj_out``, residual."""

    def __init__(self, dim: int, *, dtype=jnp.float32):
        self.norm = RMSNorm(dim, dtype=dtype)
        self.to_q = PointwiseConv3d(dim, dim, dtype=dtype)
        self.to_k = PointwiseConv3d(dim, dim, dtype=dtype)
        self.to_v = PointwiseConv3d(dim, dim, dtype=dtype)
        self.proj_out = PointwiseConv3d(dim, dim, dtype=dtype)

    def __call__(self, x: jax.Array, area: TileArea | None = None) -> jax.Array:
        b, t, h, w, c = x.shape
        y = self.norm(x)
        q, k, v = (p(y).reshape(b, t * h * w, 1, c) for p in (self.to_q, self.to_k, self.to_v))
        keys = None if area is None else area.key_mask(x)
        o = frame_causal_attention(q, k, v, t, keys).astype(x.dtype)
        return x + self.proj_out(o.reshape(b, t, h, w, c))


class MidBlock(nnx.Module):
    """``HunyuanVideo15MidBlock`` (one layer, attention on): resnet, attention, resnet."""

    def __init__(self, dim: int, *, dtype=jnp.float32):
        self.resnets = nnx.List([ResnetBlock(dim, dim, dtype=dtype) for _ in range(2)])
        self.attentions = nnx.List([AttnBlock(dim, dtype=dtype)])

    def __call__(self, x: jax.Array, area: TileArea | None = None) -> jax.Array:
        return self.resnets[1](self.attentions[0](self.resnets[0](x, area), area), area)


class Downsample(nnx.Module):
    """``HunyuanVideo15Downsample``: a causal conv to ``cout / f`` channels, then space-to-depth by ``f`` = (2, 2, 2)
    (the first frame (1, 2, 2), its channels doubled) or (1, 2, 2); plus the space-to-depth input averaged over
    groups of ``f * cin / cout`` channels (half as many for the first frame)."""

    def __init__(self, cin: int, cout: int, temporal: bool, *, dtype=jnp.float32):
        self.temporal = temporal
        self.cout = cout
        factor = 8 if temporal else 4
        self.conv = ReplicateCausalConv3d(cin, cout // factor, dtype=dtype)

    def __call__(self, x: jax.Array, area: TileArea | None = None) -> jax.Array:
        h = self.conv(x, area)
        if not self.temporal:
            return space_to_depth(h, _SPACE) + group_mean(space_to_depth(x, _SPACE), self.cout)
        first = space_to_depth(h[:, :1], _SPACE)
        h = jnp.concatenate([jnp.concatenate([first, first], axis=-1), space_to_depth(h[:, 1:], _SPACE_TIME)], axis=1)
        short = jnp.concatenate([group_mean(space_to_depth(x[:, :1], _SPACE), self.cout),
                                 group_mean(space_to_depth(x[:, 1:], _SPACE_TIME), self.cout)], axis=1)
        return h + short


class Upsample(nnx.Module):
    """``HunyuanVideo15Upsample``: a causal conv to ``cout * f`` channels, then depth-to-space by ``f`` = (2, 2, 2)
    (the first frame (1, 2, 2), keeping the first half of its channels) or (1, 2, 2); plus the input with each
    channel repeated ``f * cout / cin`` times (half as many for the first frame), depth-to-space too. With temporal
    upsampling the reference shuffles the shortcut before repeating it, without it after; both orders are kept."""

    def __init__(self, cin: int, cout: int, temporal: bool, *, dtype=jnp.float32):
        self.temporal = temporal
        self.cout = cout
        factor = 8 if temporal else 4
        self.repeats = factor * cout // cin
        self.conv = ReplicateCausalConv3d(cin, cout * factor, dtype=dtype)

    def __call__(self, x: jax.Array, area: TileArea | None = None) -> jax.Array:
        h = self.conv(x, area)
        if not self.temporal:
            return depth_to_space(h, _SPACE) + depth_to_space(jnp.repeat(x, self.repeats, axis=-1), _SPACE)
        h = jnp.concatenate([depth_to_space(h[:, :1], _SPACE)[..., : self.cout],
                             depth_to_space(h[:, 1:], _SPACE_TIME)], axis=1)
        short = jnp.concatenate([jnp.repeat(depth_to_space(x[:, :1], _SPACE), self.repeats // 2, axis=-1),
                                 jnp.repeat(depth_to_space(x[:, 1:], _SPACE_TIME), self.repeats, axis=-1)], axis=1)
        return h + short


def down_levels(n: int, spatial_ratio: int, temporal_ratio: int) -> list[tuple[bool, bool]]:
    """Encoder block ``i`` of ``n``: (downsamples, also in time). Space for the first ``log2(spatial)`` blocks, time
    for the last ``log2(temporal)`` of those (diffusers' ``i >= log2(spatial / temporal)``)."""
    ns, nst = int(np.log2(spatial_ratio)), int(np.log2(spatial_ratio // temporal_ratio))
    return [(i < ns, nst <= i < ns) for i in range(n)]


def up_levels(n: int, spatial_ratio: int, temporal_ratio: int) -> list[tuple[bool, bool]]:
    """Decoder block ``i`` of ``n``: (upsamples, also in time): for the first ``log2(spatial)`` blocks (or
    ``log2(temporal)`` when more), in time for the first ``log2(temporal)``; an upsampler always doubles H and W."""
    ns, nt = int(np.log2(spatial_ratio)), int(np.log2(temporal_ratio))
    return [(i < ns or i < nt, i < nt) for i in range(n)]


class Encoder(nnx.Module):
    """``HunyuanVideo15Encoder3D``: video (B, T, H, W, 3) -> moments (B, t, h, w, 2 * latent) (no ``quant_conv``);
    ``area``: the real area of a padded tile, its rows and columns multiples of the spatial ratio."""

    def __init__(self, *, in_channels: int, latent_channels: int, block_out_channels: Sequence[int],
                 layers_per_block: int, spatial_ratio: int, temporal_ratio: int, match_channel: bool,
                 dtype=jnp.float32):
        chans = list(block_out_channels)
        self.moments = 2 * latent_channels
        self.conv_in = ReplicateCausalConv3d(in_channels, chans[0], dtype=dtype)
        blocks, cin = [], chans[0]
        for i, (down, temporal) in enumerate(down_levels(len(chans), spatial_ratio, temporal_ratio)):
            cout = chans[i]
            resnets = [ResnetBlock(cin if j == 0 else cout, cout, dtype=dtype) for j in range(layers_per_block)]
            cin = (chans[i + 1] if match_channel else cout) if down else cout
            blocks.append(Block(resnets, Downsample(cout, cin, temporal, dtype=dtype) if down else None))
        self.down_blocks = nnx.List(blocks)
        self.mid_block = MidBlock(chans[-1], dtype=dtype)
        self.norm_out = RMSNorm(chans[-1], dtype=dtype)
        self.conv_out = ReplicateCausalConv3d(chans[-1], self.moments, dtype=dtype)

    def __call__(self, x: jax.Array, area: TileArea | None = None) -> jax.Array:
        x = self.conv_in(x, area)
        for blk in self.down_blocks:
            x = blk(x, area)
        x = self.mid_block(x, area)
        return self.conv_out(jax.nn.silu(self.norm_out(x)), area) + group_mean(x, self.moments)


class Decoder(nnx.Module):
    """``HunyuanVideo15Decoder3D``: latents (B, t, h, w, latent) -> pixels (B, T, H, W, 3); ``area``: the real area
    of a padded tile."""

    def __init__(self, *, out_channels: int, latent_channels: int, block_out_channels: Sequence[int],
                 layers_per_block: int, spatial_ratio: int, temporal_ratio: int, match_channel: bool,
                 dtype=jnp.float32):
        chans = list(reversed(block_out_channels))
        self.repeat = chans[0] // latent_channels
        self.conv_in = ReplicateCausalConv3d(latent_channels, chans[0], dtype=dtype)
        self.mid_block = MidBlock(chans[0], dtype=dtype)
        blocks, cin = [], chans[0]
        for i, (up, temporal) in enumerate(up_levels(len(chans), spatial_ratio, temporal_ratio)):
            cout = chans[i]
            resnets = [ResnetBlock(cin if j == 0 else cout, cout, dtype=dtype) for j in range(layers_per_block + 1)]
            cin = (chans[i + 1] if match_channel else cout) if up else cout
            blocks.append(Block(resnets, Upsample(cout, cin, temporal, dtype=dtype) if up else None))
        self.up_blocks = nnx.List(blocks)
        self.norm_out = RMSNorm(chans[-1], dtype=dtype)
        self.conv_out = ReplicateCausalConv3d(chans[-1], out_channels, dtype=dtype)

    def __call__(self, z: jax.Array, area: TileArea | None = None) -> jax.Array:
        x = self.conv_in(z, area) + jnp.repeat(z, self.repeat, axis=-1)
        x = self.mid_block(x, area)
        for blk in self.up_blocks:
            x = blk(x, area)
        return self.conv_out(jax.nn.silu(self.norm_out(x)), area)
