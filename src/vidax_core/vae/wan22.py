"""Wan 2.2 video VAE (diffusers ``AutoencoderKLWan`` with ``is_residual=True``, ``patch_size=2``, z_dim 48).

It is the Wan 2.1 VAE (:mod:`vidax_core.vae.wan21`) with three changes,
and reuses every other piece of it (causal convs,
residual/attention/mid blocks, resamplers, the per-conv cache and the one-jit-per-chunk decode/encode programs):

* **patchify**: pixels are space-to-depth'd by ``patch_size`` before the encoder and back after the decoder, so the
  conv stacks see ``3 p^2`` = 12 channels. Channel order is the reference's ``c * p^2 + pw * p + ph`` (the width
  offset before the height offset).
* **residual down blocks** (encoder): ``resnets -> [downsampler] + AvgDown3D(x)``: a parameter-free shortcut that
  space/time-to-depth's the block input by the block's down factors and averages channel groups down to
  ``out_dim``. Its time factor 2 pads ``(2 - t % 2) % 2`` zero frames in front of each chunk (the 1-frame first
  chunk), exactly like the reference, so it needs no cache.
* **residual up blocks** (decoder): ``resnets -> [upsampler to out_dim] + DupUp3D(x)``: repeat channels, then
  depth-to-space/time; on the first chunk the ``factor_t - 1`` leading frames are dropped (the reference's
  ``first_chunk``). The up blocks' input width is not halved as in Wan 2.1, and ``decoder_base_dim`` may differ from
  ``base_dim``.

Everything is channel-last inside; public ``decode``/``encode`` (inherited) take and return channel-first
``(B, C, T, H, W)``: decode maps latents (B, 48, T, h, w) to (B, 3, 1 + 4 (T - 1), 16 h, 16 w).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from .causal_conv import CausalConv3d, FeatureCache
from .wan21 import (
    Decoder,
    Downsample,
    MidBlock,
    ResBlock,
    RMSNorm,
    Upsample,
    WanVAE,
    WanVAEConfig,
    _silu,
    run_resnets,
)


def check_config(cfg: WanVAEConfig) -> None:
    if not cfg.is_residual or not cfg.patch_size:
        raise ValueError("WanVAE22 needs is_residual=True and a patch_size (the Wan 2.2 VAE); use WanVAE for Wan 2.1")
    if cfg.attn_scales:
        raise NotImplementedError("encoder attention (attn_scales) is not supported (Wan 2.2 uses none)")
    if len(cfg.latents_mean) != cfg.z_dim or len(cfg.latents_std) != cfg.z_dim:
        raise ValueError(f"latents_mean/latents_std need z_dim={cfg.z_dim} entries (the Wan 2.2 config lists 48)")
    if cfg.in_channels != 3 * cfg.patch_size**2 or cfg.out_channels != cfg.in_channels:
        raise ValueError(f"in/out_channels must be 3 * patch_size^2 = {3 * cfg.patch_size**2}")


# --------------------------------------------------------------------------------------------------------------
# parameter-free reshapes (channel-last (B, T, H, W, C))


def patchify(x: jax.Array, p: int) -> jax.Array:
    """(B, T, H, W, C) -> (B, T, H/p, W/p, C p^2), channel ``c * p^2 + pw * p + ph`` (diffusers ``patchify``).

    Plain reshape/transpose methods, so it runs on numpy (host) and jax arrays alike.
    """
    b, t, h, w, c = x.shape
    x = x.reshape(b, t, h // p, p, w // p, p, c)  # (b, t, h', ph, w', pw, c)
    return x.transpose((0, 1, 2, 4, 6, 5, 3)).reshape(b, t, h // p, w // p, c * p * p)


def unpatchify(x: jax.Array, p: int) -> jax.Array:
    """Inverse of :func:`patchify`."""
    b, t, h, w, cp = x.shape
    x = x.reshape(b, t, h, w, cp // (p * p), p, p)  # (b, t, h, w, c, pw, ph)
    return x.transpose((0, 1, 2, 6, 3, 5, 4)).reshape(b, t, h * p, w * p, cp // (p * p))


def avg_down(x: jax.Array, cout: int, ft: int, fs: int) -> jax.Array:
    """diffusers ``AvgDown3D``: front-pad time to a multiple of ``ft``, fold (ft, fs, fs) into channels, group-mean."""
    pad_t = (ft - x.shape[1] % ft) % ft
    x = jnp.pad(x, ((0, 0), (pad_t, 0), (0, 0), (0, 0), (0, 0)))
    b, t, h, w, c = x.shape
    x = x.reshape(b, t // ft, ft, h // fs, fs, w // fs, fs, c)
    x = jnp.transpose(x, (0, 1, 3, 5, 7, 2, 4, 6)).reshape(b, t // ft, h // fs, w // fs, cout, -1)
    return jnp.mean(x, axis=-1)


def dup_up(x: jax.Array, cout: int, ft: int, fs: int, first: Any) -> jax.Array:
    """diffusers ``DupUp3D``: repeat-interleave channels, unfold them into (ft, fs, fs); first chunk drops ft-1.

    A traced ``first`` (one program for every chunk) keeps the shape: the first chunk's frames move to the front
    and its last ft-1 frames are repeats (the extra frames :class:`FeatureCache` describes)."""
    b, t, h, w, c = x.shape
    x = jnp.repeat(x, cout * ft * fs * fs // c, axis=-1).reshape(b, t, h, w, cout, ft, fs, fs)
    x = jnp.transpose(x, (0, 1, 5, 2, 6, 3, 7, 4)).reshape(b, t * ft, h * fs, w * fs, cout)
    if isinstance(first, bool):
        return x[:, ft - 1 :] if first else x
    if ft == 1:
        return x
    shifted = jnp.concatenate([x[:, ft - 1 :], jnp.repeat(x[:, -1:], ft - 1, axis=1)], axis=1)
    return jnp.where(first, shifted, x)


# --------------------------------------------------------------------------------------------------------------
# residual blocks


class ResidualDownBlock(nnx.Module):
    """``WanResidualDownBlock``: ``num_res_blocks`` ResBlocks, optional downsampler, plus the AvgDown3D shortcut."""

    def __init__(self, cin: int, cout: int, num_res_blocks: int, temporal: bool, down: bool, *, dtype=jnp.float32):
        self.cout = cout
        self.ft, self.fs = (2 if temporal else 1), (2 if down else 1)
        blocks = []
        for _ in range(num_res_blocks):
            blocks.append(ResBlock(cin, cout, dtype=dtype))
            cin = cout
        self.resnets = nnx.List(blocks)
        self.downsampler = Downsample(cout, temporal, dtype=dtype) if down else None

    def __call__(self, x: jax.Array, cache: FeatureCache, first: bool) -> jax.Array:
        shortcut = avg_down(x, self.cout, self.ft, self.fs)
        x = run_resnets(self.resnets, x, cache)
        if self.downsampler is not None:
            x = self.downsampler(x, cache, first)
        return x + shortcut


class ResidualUpBlock(nnx.Module):
    """``WanResidualUpBlock``: ``num_res_blocks + 1`` ResBlocks, optional upsampler (to ``cout``) + DupUp3D shortcut."""

    def __init__(self, cin: int, cout: int, num_res_blocks: int, temporal: bool, up: bool, *, dtype=jnp.float32):
        self.cout, self.up = cout, up
        self.ft = 2 if temporal else 1
        blocks = []
        for _ in range(num_res_blocks + 1):
            blocks.append(ResBlock(cin, cout, dtype=dtype))
            cin = cout
        self.resnets = nnx.List(blocks)
        self.upsampler = Upsample(cout, cout, temporal, dtype=dtype) if up else None

    def __call__(self, x: jax.Array, cache: FeatureCache, first: Any) -> jax.Array:
        shortcut = dup_up(x, self.cout, self.ft, 2, first) if self.up else None
        x = run_resnets(self.resnets, x, cache)
        if self.upsampler is not None:
            x = self.upsampler(x, cache, first)
        return x if shortcut is None else x + shortcut


# --------------------------------------------------------------------------------------------------------------
# encoder / decoder / model


class Encoder22(nnx.Module):
    def __init__(self, cfg: WanVAEConfig, *, dtype=jnp.float32):
        dims = [cfg.base_dim * u for u in [1, *cfg.dim_mult]]
        last = len(cfg.dim_mult) - 1
        self.conv_in = CausalConv3d(cfg.in_channels, dims[0], dtype=dtype)
        self.down_blocks = nnx.List([
            ResidualDownBlock(cin, cout, cfg.num_res_blocks, i != last and bool(cfg.temperal_downsample[i]),
                              i != last, dtype=dtype)
            for i, (cin, cout) in enumerate(zip(dims[:-1], dims[1:]))
        ])
        self.mid_block = MidBlock(dims[-1], dtype=dtype)
        self.norm_out = RMSNorm(dims[-1], dtype=dtype)
        self.conv_out = CausalConv3d(dims[-1], 2 * cfg.z_dim, dtype=dtype)

    def __call__(self, x: jax.Array, cache: FeatureCache, first: bool) -> jax.Array:
        x = cache.conv(self.conv_in, x)
        for blk in self.down_blocks:
            x = blk(x, cache, first)
        x = self.mid_block(x, cache)
        return cache.conv(self.conv_out, _silu(self.norm_out(x)))


class Decoder22(Decoder):
    """The Wan2.2 decoder: residual up blocks with duplicate-upsampling shortcuts; forward as :class:`Decoder`."""

    def __init__(self, cfg: WanVAEConfig, *, dtype=jnp.float32):
        mult = list(cfg.dim_mult)
        dims = [(cfg.decoder_base_dim or cfg.base_dim) * u for u in [mult[-1]] + mult[::-1]]
        last = len(mult) - 1
        self.conv_in = CausalConv3d(cfg.z_dim, dims[0], dtype=dtype)
        self.mid_block = MidBlock(dims[0], dtype=dtype)
        self.up_blocks = nnx.List([
            ResidualUpBlock(cin, cout, cfg.num_res_blocks, i != last and bool(cfg.temperal_upsample[i]),
                            i != last, dtype=dtype)
            for i, (cin, cout) in enumerate(zip(dims[:-1], dims[1:]))
        ])
        self.norm_out = RMSNorm(dims[-1], dtype=dtype)
        self.conv_out = CausalConv3d(dims[-1], cfg.out_channels, dtype=dtype)


class WanVAE22(WanVAE):
    """Wan 2.2 ``AutoencoderKLWan``; same API as :class:`vidax_core.vae.wan21.WanVAE` (decode/encode, tiling,
    ``wan21.decode_video`` / ``encode_video``), loaded with ``convert_wan22.load_vae22``. The chunk programs work in
    patch space; pixels are (un)patchified on the host around them, after tiles are blended, as in the reference."""

    def __init__(self, cfg: WanVAEConfig, *, with_encoder: bool = True):  # builds its own blocks, no super()
        check_config(cfg)
        dtype = jnp.dtype(cfg.dtype)
        self.cfg = cfg
        self.post_quant_conv = CausalConv3d(cfg.z_dim, cfg.z_dim, (1, 1, 1), dtype=dtype)
        self.decoder = Decoder22(cfg, dtype=dtype)
        self.quant_conv = CausalConv3d(2 * cfg.z_dim, 2 * cfg.z_dim, (1, 1, 1), dtype=dtype) if with_encoder else None
        self.encoder = Encoder22(cfg, dtype=dtype) if with_encoder else None

    def decoder_to_pixels(self, x):
        return unpatchify(x, self.cfg.patch_size)

    def pixels_to_encoder(self, x):
        return patchify(x, self.cfg.patch_size)
