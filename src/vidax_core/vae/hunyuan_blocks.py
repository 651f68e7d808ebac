"""The layers of the HunyuanVideo VAE (diffusers ``AutoencoderKLHunyuanVideo``), channel-last ``(B, T, H, W, C)``.

What sets this VAE apart: every causal conv pads by *replicating* edges (spatially on both sides, and in time
``kt - 1`` copies of the first frame in front), the mid blocks hold a single-head self-attention over all frames
with a causal *frame* mask (a token sees its own and earlier frames), and GroupNorm statistics span every frame
passed in. The network therefore runs on a whole (temporal) tile at once; there is no chunk-by-chunk streaming.
The module tree mirrors diffusers' names, so the key table (:mod:`vidax_core.vae.convert_hunyuan`) is mostly renames.
"""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.attention import attention
from vidax_core.nn.group_norm import GroupNorm
from vidax_core.nn.layers import Linear
from vidax_core.vae.causal_conv import CausalConv3d
from vidax_core.vae.tile_area import TileArea


class ReplicateCausalConv3d(CausalConv3d):
    """``HunyuanVideoCausalConv3d``: replicate-pad ``kt - 1`` first frames in front and ``k // 2`` pixels around,
    then a VALID conv with stride ``(stride_t, stride_hw, stride_hw)``. Parameters as the core
    :class:`~vidax_core.vae.causal_conv.CausalConv3d` (``kernel`` (kt, kh, kw, in, out), ``bias``). ``area``: ``x``
    is a padded tile; its padding first holds the real edge (:meth:`~vidax_core.vae.tile_area.TileArea.fill_edges`),
    so the real area comes out as the unpadded tile's."""

    def __init__(self, cin: int, cout: int, kernel: int = 3, *, stride: Sequence[int] = (1, 1, 1), dtype=jnp.float32):
        super().__init__(cin, cout, (kernel,) * 3, stride_t=int(stride[0]), dtype=dtype)
        self.stride_hw = (int(stride[1]), int(stride[2]))

    def __call__(self, x: jax.Array, area: TileArea | None = None) -> jax.Array:
        if area is not None and (self.pad_h or self.pad_w):
            x = area.fill_edges(x)
        x = jnp.pad(x, ((0, 0), (self.kt - 1, 0), (self.pad_h, self.pad_h), (self.pad_w, self.pad_w), (0, 0)),
                    mode="edge")
        y = jax.lax.conv_general_dilated(
            x,
            self.kernel[...].astype(x.dtype),
            window_strides=(self.stride_t, *self.stride_hw),
            padding="VALID",
            dimension_numbers=("NDHWC", "DHWIO", "NDHWC"),
        )
        return y + self.bias[...].astype(x.dtype)


class PointwiseConv3d(nnx.Module):
    """A plain 1x1x1 ``nn.Conv3d`` (``quant_conv`` / ``post_quant_conv``): ``kernel`` (1, 1, 1, in, out)."""

    def __init__(self, cin: int, cout: int, *, dtype=jnp.float32):
        self.kernel = nnx.Param(jnp.zeros((1, 1, 1, cin, cout), dtype))
        self.bias = nnx.Param(jnp.zeros((cout,), dtype))

    def __call__(self, x: jax.Array) -> jax.Array:
        k = self.kernel[...].astype(x.dtype)[0, 0, 0]
        return jnp.einsum("bthwc,cd->bthwd", x, k) + self.bias[...].astype(x.dtype)


class ResnetBlock(nnx.Module):
    """``HunyuanVideoResnetBlockCausal3D``: (GroupNorm, SiLU, causal conv) twice, plus a 1x1x1 causal shortcut
    when the width changes."""

    def __init__(self, cin: int, cout: int, groups: int, eps: float, *, dtype=jnp.float32):
        self.norm1 = GroupNorm(cin, groups, eps=eps)
        self.conv1 = ReplicateCausalConv3d(cin, cout, dtype=dtype)
        self.norm2 = GroupNorm(cout, groups, eps=eps)
        self.conv2 = ReplicateCausalConv3d(cout, cout, dtype=dtype)
        self.conv_shortcut = ReplicateCausalConv3d(cin, cout, 1, dtype=dtype) if cin != cout else None

    def __call__(self, x: jax.Array) -> jax.Array:
        h = self.conv1(jax.nn.silu(self.norm1(x)))
        h = self.conv2(jax.nn.silu(self.norm2(h)))
        return h + (self.conv_shortcut(x) if self.conv_shortcut is not None else x)


def frame_causal_attention(q: jax.Array, k: jax.Array, v: jax.Array, frames: int,
                           kv_mask: jax.Array | None = None) -> jax.Array:
    """(B, T*HW, H, D) self-attention where a token of frame ``f`` sees the tokens of frames ``0..f``.

    Run as one exact attention call per query frame over the keys of frames up to it: the same result as the
    reference's dense additive ``-inf`` mask, without a (T*HW)^2 mask and through any attention backend.
    ``kv_mask`` (B, T*HW) bool: only these keys are seen (a padded tile's real area,
    :meth:`~vidax_core.vae.tile_area.TileArea.key_mask`); None: every key of those frames.
    """
    n = q.shape[1] // frames
    outs = [attention(q[:, f * n:(f + 1) * n], k[:, :(f + 1) * n], v[:, :(f + 1) * n],
                      kv_mask=None if kv_mask is None else kv_mask[:, :(f + 1) * n]) for f in range(frames)]
    return jnp.concatenate(outs, axis=1)


class MidAttention(nnx.Module):
    """The mid block's ``Attention`` (one head of width C, GroupNorm in front, residual), frame-causal."""

    def __init__(self, dim: int, groups: int, eps: float, *, dtype=jnp.float32):
        rngs = nnx.Rngs(0)
        self.group_norm = GroupNorm(dim, groups, eps=eps)
        self.to_q = Linear(dim, dim, (None, None), dtype=dtype, rngs=rngs)
        self.to_k = Linear(dim, dim, (None, None), dtype=dtype, rngs=rngs)
        self.to_v = Linear(dim, dim, (None, None), dtype=dtype, rngs=rngs)
        self.to_out = Linear(dim, dim, (None, None), dtype=dtype, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        b, t, h, w, c = x.shape
        y = self.group_norm(x).reshape(b, t * h * w, 1, c)
        o = frame_causal_attention(self.to_q(y), self.to_k(y), self.to_v(y), t)
        return x + self.to_out(o.reshape(b, t, h, w, c)).astype(x.dtype)


class MidBlock(nnx.Module):
    """``HunyuanVideoMidBlock3D`` (one layer): resnet, [attention], resnet."""

    def __init__(self, dim: int, groups: int, eps: float, add_attention: bool, *, dtype=jnp.float32):
        self.resnets = nnx.List([ResnetBlock(dim, dim, groups, eps, dtype=dtype) for _ in range(2)])
        self.attentions = nnx.List([MidAttention(dim, groups, eps, dtype=dtype)]) if add_attention else None

    def __call__(self, x: jax.Array) -> jax.Array:
        x = self.resnets[0](x)
        if self.attentions is not None:
            x = self.attentions[0](x)
        return self.resnets[1](x)


class Downsample(nnx.Module):
    """``HunyuanVideoDownsampleCausal3D``: one replicate-padded causal conv with stride (st, sh, sw)."""

    def __init__(self, dim: int, stride: Sequence[int], *, dtype=jnp.float32):
        self.conv = ReplicateCausalConv3d(dim, dim, stride=stride, dtype=dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.conv(x)


class Upsample(nnx.Module):
    """``HunyuanVideoUpsampleCausal3D``: nearest upsampling (the first frame only in space, the others by
    ``factor`` (ft, fh, fw)), then a causal conv."""

    def __init__(self, dim: int, factor: Sequence[int], *, dtype=jnp.float32):
        self.factor = tuple(int(f) for f in factor)
        self.conv = ReplicateCausalConv3d(dim, dim, dtype=dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        ft, fh, fw = self.factor
        if x.shape[1] > 1:
            x = jnp.concatenate([x[:, :1], jnp.repeat(x[:, 1:], ft, axis=1)], axis=1)
        x = jnp.repeat(jnp.repeat(x, fh, axis=2), fw, axis=3)
        return self.conv(x)


class Block(nnx.Module):
    """A down or up block: resnets, then an optional resampler (``downsamplers.0`` / ``upsamplers.0``). ``area``
    (a padded tile's, for layers that take one) is handed to each."""

    def __init__(self, resnets: list[ResnetBlock], resampler: nnx.Module | None):
        self.resnets = nnx.List(resnets)
        self.resampler = resampler

    def __call__(self, x: jax.Array, area: TileArea | None = None) -> jax.Array:
        kw = {} if area is None else {"area": area}
        for r in self.resnets:
            x = r(x, **kw)
        return self.resampler(x, **kw) if self.resampler is not None else x


def level_factors(n: int, spatial_ratio: int, temporal_ratio: int) -> list[tuple[int, int, int]]:
    """Per block ``i`` of ``n``, the (time, h, w) down/up factor: space for the first ``log2(spatial)`` blocks,
    time for the ``log2(temporal)`` blocks before the last (diffusers' rule for temporal ratio 4)."""
    ns, nt = int(np.log2(spatial_ratio)), int(np.log2(temporal_ratio))
    out = []
    for i in range(n):
        s = 2 if i < ns else 1
        t = 2 if (i >= n - 1 - nt and i != n - 1) else 1
        out.append((t, s, s))
    return out


class Encoder(nnx.Module):
    """``HunyuanVideoEncoder3D``: video (B, T, H, W, 3) -> moments (B, t, h, w, 2 * latent), before ``quant_conv``."""

    def __init__(self, *, in_channels: int, latent_channels: int, block_out_channels: Sequence[int],
                 layers_per_block: int, groups: int, spatial_ratio: int, temporal_ratio: int, add_attention: bool,
                 dtype=jnp.float32):
        chans = list(block_out_channels)
        eps = 1e-6
        self.conv_in = ReplicateCausalConv3d(in_channels, chans[0], dtype=dtype)
        blocks, cin = [], chans[0]
        for (ft, fs, _), cout in zip(level_factors(len(chans), spatial_ratio, temporal_ratio), chans):
            resnets = [ResnetBlock(cin if j == 0 else cout, cout, groups, eps, dtype=dtype)
                       for j in range(layers_per_block)]
            down = Downsample(cout, (ft, fs, fs), dtype=dtype) if (ft, fs) != (1, 1) else None
            blocks.append(Block(resnets, down))
            cin = cout
        self.down_blocks = nnx.List(blocks)
        self.mid_block = MidBlock(chans[-1], groups, eps, add_attention, dtype=dtype)
        self.conv_norm_out = GroupNorm(chans[-1], groups, eps=eps)
        self.conv_out = ReplicateCausalConv3d(chans[-1], 2 * latent_channels, dtype=dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = self.conv_in(x)
        for blk in self.down_blocks:
            x = blk(x)
        x = self.mid_block(x)
        return self.conv_out(jax.nn.silu(self.conv_norm_out(x)))


class Decoder(nnx.Module):
    """``HunyuanVideoDecoder3D``: latents (B, t, h, w, latent), after ``post_quant_conv`` -> pixels (B, T, H, W, 3)."""

    def __init__(self, *, out_channels: int, latent_channels: int, block_out_channels: Sequence[int],
                 layers_per_block: int, groups: int, spatial_ratio: int, temporal_ratio: int, add_attention: bool,
                 dtype=jnp.float32):
        chans = list(reversed(block_out_channels))
        eps = 1e-6
        self.conv_in = ReplicateCausalConv3d(latent_channels, chans[0], dtype=dtype)
        self.mid_block = MidBlock(chans[0], groups, eps, add_attention, dtype=dtype)
        blocks, cin = [], chans[0]
        for (ft, fs, _), cout in zip(level_factors(len(chans), spatial_ratio, temporal_ratio), chans):
            resnets = [ResnetBlock(cin if j == 0 else cout, cout, groups, eps, dtype=dtype)
                       for j in range(layers_per_block + 1)]
            up = Upsample(cout, (ft, fs, fs), dtype=dtype) if (ft, fs) != (1, 1) else None
            blocks.append(Block(resnets, up))
            cin = cout
        self.up_blocks = nnx.List(blocks)
        self.conv_norm_out = GroupNorm(chans[-1], groups, eps=eps)
        self.conv_out = ReplicateCausalConv3d(chans[-1], out_channels, dtype=dtype)

    def __call__(self, z: jax.Array) -> jax.Array:
        x = self.mid_block(self.conv_in(z))
        for blk in self.up_blocks:
            x = blk(x)
        return self.conv_out(jax.nn.silu(self.conv_norm_out(x)))
