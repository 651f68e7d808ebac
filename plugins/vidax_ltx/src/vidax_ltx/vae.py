"""LTX-Video VAE (diffusers ``AutoencoderKLLTXVideo``, the 0.9.5+ layout) in Flax NNX, with tiled decode/encode.

Public interface (the pipeline's wrapper :mod:`vidax_ltx.autoencoder` calls these):

* :meth:`LTXVAEConfig.from_config` (a ``vae/config.json`` dict), :func:`load_vae` (diffusers state dict; also fills
  ``cfg.latents_mean`` / ``cfg.latents_std`` from the checkpoint's buffers, which diffusers keeps as weights);
* :func:`decode` ``(vae, z, *, timestep, tiling, on_chunk, devices)``: raw latents (B, C, F, h, w), exactly what
  ``vae.decode(z, temb)`` takes, -> its ``.sample`` (B, 3, 1 + 8 (F - 1), 32 h, 32 w), float32 numpy (unclamped,
  as the reference returns it);
* :func:`encode` ``(vae, x)``: video (B, 3, T, H, W) in [-1, 1] -> the posterior's ``(mean, logvar)``, logvar
  clamped to [-30, 20] as ``DiagonalGaussianDistribution`` does.

The LTX-2.x video VAE (``AutoencoderKLLTX2Video``) is this net read with another config
(:mod:`vidax_ltx.ltx2_vae`): see :meth:`LTXVAEConfig.encoder_widths`, the ``*_spatial_padding_mode`` fields and
``upsample_type``.

Architecture notes (facts of the reference): activations are channel-last (B, T, H, W, C) inside; every conv is a
3-D conv whose time padding repeats the edge frames (the first frame ``kt - 1`` times for the causal encoder, the
first and last frame ``(kt - 1) // 2`` times each for the non-causal decoder) and whose spatial padding is zeros
(0.9.x) or the config's mode (LTX-2: reflect in the decoder);
resnets use gain-free RMSNorm (eps 1e-8) and, with timestep conditioning, a per-block PixArt timestep MLP plus a
``scale_shift_table``; the 0.9.5 down blocks downsample by space-to-depth plus a group-mean residual; the up blocks
depth-to-space (optionally with a channel-repeated residual); the pixel (un)patchify orders channels as
(c, t, w, h) — note w before h. The encoder emits one log-variance channel that the reference broadcasts.

Execution: the decoder is non-causal, so a tile runs over all frames at once (no temporal tiling); spatial tiling
follows diffusers' ``enable_tiling`` (tile 512 px, stride 448 px by default) through
:func:`vidax_core.vae.tiling.run_tiled`, which also spreads tiles / batch entries over several devices. The smaller
edge tiles are padded to the tile shape and told their real area (:class:`vidax_core.vae.tile_area.TileArea`): before
each 3x3 conv the padding holds what the unpadded tile's conv padding shows (zeros, or the real edge mirrored for a
reflect-padded conv), and every other layer is per pixel, so all tiles run one compiled program and their real areas
come out as the unpadded tiles'. Encode tiles are padded when their real sides are multiples of the spatial
compression (whole at every downsampling level; LTX's frames and default strides are multiples of 32).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.io.arch import from_config_dict
from vidax_core.errors import UserError
from vidax_core.nn.norms import LayerNorm, rms_norm
from vidax_core.nn.timestep import TimestepEmbedding, timestep_embedding
from vidax_core.vae.causal_conv import SPATIAL_PADDING, CausalConv3d
from vidax_core.vae.chunks import chunk_runner, gaussian_posterior
from vidax_core.vae.loader import vae_loader
from vidax_core.vae.tile_area import TileArea, tile_area
from vidax_core.vae.tiling import TilePlan, TilingOptions, run_tiled, stride_decode_plan, stride_encode_plan

from .vae_convert import DECODER_IGNORE, STATS_KEYS, original_vae_tensors, vae_rules

#: diffusers ``AutoencoderKLLTXVideo`` tile defaults (sample pixels), used when tiling is switched on.
LTX_TILING = TilingOptions(enabled=True, tile_sample_min_height=512, tile_sample_min_width=512,
                           tile_sample_stride_height=448, tile_sample_stride_width=448)

#: The published LTX-Video 0.9.5 / 0.9.7 / 0.9.8 VAE ``config.json`` (diffusers' conversion script, 0.9.7 entry):
#: what an original single file's VAE is, and what the full-size layout test builds.
PUBLISHED_VAE_CONFIG: dict[str, Any] = dict(
    in_channels=3, out_channels=3, latent_channels=128, block_out_channels=(128, 256, 512, 1024, 2048),
    down_block_types=("LTXVideo095DownBlock3D",) * 4, decoder_block_out_channels=(256, 512, 1024),
    layers_per_block=(4, 6, 6, 2, 2), decoder_layers_per_block=(5, 5, 5, 5),
    spatio_temporal_scaling=(True, True, True, True), decoder_spatio_temporal_scaling=(True, True, True),
    decoder_inject_noise=(False, False, False, False),
    downsample_type=("spatial", "temporal", "spatiotemporal", "spatiotemporal"),
    upsample_residual=(True, True, True), upsample_factor=(2, 2, 2), timestep_conditioning=True, patch_size=4,
    patch_size_t=1, resnet_norm_eps=1e-6, scaling_factor=1.0, encoder_causal=True, decoder_causal=False,
    spatial_compression_ratio=32, temporal_compression_ratio=8,
)

#: ``downsample_type`` / ``upsample_type`` -> (t, h, w) stride.
STRIDES = {"spatial": (1, 2, 2), "temporal": (2, 1, 1), "spatiotemporal": (2, 2, 2)}
_RMS_EPS = 1e-8
_FREQ_DIM = 256


@dataclass(eq=False)
class LTXVAEConfig:
    """diffusers ``AutoencoderKLLTXVideo`` config.json fields (and the LTX-2 ones its 0.9.x configs lack, at values
    that keep 0.9.x's behaviour), plus the latent statistics (checkpoint buffers).

    Not frozen: :func:`load_vae` fills ``latents_mean`` / ``latents_std`` from the weights. Hashed by identity, so
    the model that holds it can be a static jit argument."""

    in_channels: int = 3
    out_channels: int = 3
    latent_channels: int = 128
    block_out_channels: tuple[int, ...] = (128, 256, 512, 512)
    down_block_types: tuple[str, ...] = ("LTXVideoDownBlock3D",) * 4
    decoder_block_out_channels: tuple[int, ...] = (128, 256, 512, 512)
    layers_per_block: tuple[int, ...] = (4, 3, 3, 3, 4)
    decoder_layers_per_block: tuple[int, ...] = (4, 3, 3, 3, 4)
    spatio_temporal_scaling: tuple[bool, ...] = (True, True, True, False)
    decoder_spatio_temporal_scaling: tuple[bool, ...] = (True, True, True, False)
    decoder_inject_noise: tuple[bool, ...] = (False, False, False, False, False)
    downsample_type: tuple[str, ...] = ("conv", "conv", "conv", "conv")
    upsample_residual: tuple[bool, ...] = (False, False, False, False)
    upsample_factor: tuple[int, ...] = (1, 1, 1, 1)
    timestep_conditioning: bool = False
    patch_size: int = 4
    patch_size_t: int = 1
    resnet_norm_eps: float = 1e-6
    scaling_factor: float = 1.0
    encoder_causal: bool = True
    decoder_causal: bool = False
    encoder_spatial_padding_mode: str = "zeros"
    decoder_spatial_padding_mode: str = "zeros"
    upsample_type: tuple[str, ...] | None = None
    spatial_compression_ratio: int | None = None
    temporal_compression_ratio: int | None = None
    latents_mean: tuple[float, ...] | None = None
    latents_std: tuple[float, ...] | None = None
    dtype: Any = jnp.float32

    #: The encoder block type this generation's encoder is built from (``down_block_types`` must all be it).
    ENCODER_BLOCK: ClassVar[str] = "LTXVideo095DownBlock3D"
    #: What the refusals call this generation.
    GENERATION: ClassVar[str] = "LTX-Video 0.9.5+"

    def encoder_widths(self) -> tuple[int, ...]:
        """Channels after conv_in, then after each down block (the last is the mid block's width): 0.9.5's encoder
        runs ``block_out_channels`` (``len - 1`` down blocks)."""
        return tuple(int(c) for c in self.block_out_channels)

    def upsample_strides(self) -> list[tuple[int, int, int]]:
        """(t, h, w) stride of each decoder up block in decoding order: ``upsample_type[i]`` (not reversed, as the
        reference indexes it), "spatiotemporal" when the config has none."""
        n = len(self.decoder_block_out_channels)
        kinds = self.upsample_type or ("spatiotemporal",) * n
        return [STRIDES[k] for k in kinds[:n]]

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> "LTXVAEConfig":
        """From a diffusers config.json dict (unknown keys ignored); resolves the compression ratios as the
        reference does (``patch * 2 ** sum(spatio_temporal_scaling)`` when the config leaves them null)."""
        cfg = from_config_dict(cls, dict(config), **overrides)
        n = sum(bool(s) for s in cfg.spatio_temporal_scaling)
        if cfg.spatial_compression_ratio is None:
            cfg.spatial_compression_ratio = int(cfg.patch_size) * 2**n
        if cfg.temporal_compression_ratio is None:
            cfg.temporal_compression_ratio = int(cfg.patch_size_t) * 2**n
        return cfg

    def check_supported(self, *, with_encoder: bool) -> None:
        """Refuse layouts this implementation does not run (none of them is used by LTX-Video 0.9.5+), and
        per-block lists whose lengths disagree (a damaged config.json)."""
        per_block = {"decoder_block_out_channels": self.decoder_block_out_channels,
                     "decoder_spatio_temporal_scaling": self.decoder_spatio_temporal_scaling,
                     "upsample_residual": self.upsample_residual, "upsample_factor": self.upsample_factor}
        sizes = {k: len(v) for k, v in per_block.items()}
        if len(set(sizes.values())) > 1 or len(self.decoder_layers_per_block) != sizes["upsample_factor"] + 1:
            raise UserError("vae/config.json: the decoder's per-block lists disagree in length ("
                            + ", ".join(f"{k} {n}" for k, n in sizes.items())
                            + f", decoder_layers_per_block {len(self.decoder_layers_per_block)}, one more): "
                            "fix or re-download it")
        if any(self.decoder_inject_noise):
            raise UserError("vae/config.json: decoder_inject_noise (LTX-Video 0.9.1) is not supported; "
                            f"use an {self.GENERATION} VAE")
        if with_encoder and any(t != self.ENCODER_BLOCK for t in self.down_block_types):
            raise UserError(f"vae/config.json: only {self.ENCODER_BLOCK} encoder blocks ({self.GENERATION}) are "
                            f"supported, got {list(self.down_block_types)}")
        for name in ("encoder_spatial_padding_mode", "decoder_spatial_padding_mode"):
            if getattr(self, name) not in SPATIAL_PADDING:
                raise UserError(f"vae/config.json: {name} {getattr(self, name)!r} is not one of "
                                f"{list(SPATIAL_PADDING)}")
        if any(k not in STRIDES for k in self.upsample_type or ()):
            raise UserError(f"vae/config.json: upsample_type {list(self.upsample_type)} is not supported; "
                            "use spatial / temporal / spatiotemporal")
        if with_encoder and any(t not in ("spatial", "temporal", "spatiotemporal") for t, s in
                                zip(self.downsample_type, self.spatio_temporal_scaling) if s):
            raise UserError(f"vae/config.json: downsample_type {list(self.downsample_type)} is not supported; "
                            "use spatial / temporal / spatiotemporal")
        if self.timestep_conditioning:
            for cin, cout, _f in _up_block_channels(self):
                if cin != cout:
                    raise UserError("vae/config.json: a timestep-conditioned decoder whose up block changes width "
                                    "before upsampling is not supported (the reference cannot run it either)")


# --------------------------------------------------------------------------------------------------------------
# layers


@dataclass(frozen=True)
class ConvMode:
    """How every conv of one side (encoder or decoder) pads: ``causal`` in time (edge-frame repeat in front only,
    else split front and back) and ``padding``, torch's spatial ``padding_mode`` ("zeros", or "reflect" for the
    LTX-2 decoder)."""

    causal: bool
    padding: str = "zeros"


class Conv(nnx.Module):
    """``LTXVideoCausalConv3d`` / ``LTX2VideoCausalConv3d``: edge-frame repeat in time (causal: front only),
    'same' padding in space (zeros or reflect, ``mode``).

    Holds the core :class:`~vidax_core.vae.causal_conv.CausalConv3d` (time-VALID) as ``conv``, so the parameter
    path mirrors diffusers' ``<name>.conv.weight``. ``area``: a padded tile's real area, which the core conv fills
    its padding for (zeros or the mirrored real edge), as every layer below that takes one."""

    def __init__(self, cin: int, cout: int, k: int = 3, *, mode: ConvMode, dtype=jnp.float32):
        self.conv = CausalConv3d(cin, cout, (k, k, k), spatial_padding=mode.padding, dtype=dtype)
        self.causal = mode.causal
        self.k = k

    def __call__(self, x: jax.Array, area: TileArea | None = None) -> jax.Array:
        if self.k > 1:
            if self.causal:
                x = jnp.concatenate([jnp.repeat(x[:, :1], self.k - 1, axis=1), x], axis=1)
            else:
                p = (self.k - 1) // 2
                x = jnp.concatenate([jnp.repeat(x[:, :1], p, axis=1), x, jnp.repeat(x[:, -1:], p, axis=1)], axis=1)
        return self.conv(x, area)


def _norm(x: jax.Array) -> jax.Array:
    """Gain-free RMSNorm over channels (diffusers ``RMSNorm(eps=1e-8, elementwise_affine=False)``)."""
    return rms_norm(x, eps=_RMS_EPS)


class TimeEmbedder(nnx.Module):
    """``PixArtAlphaCombinedTimestepSizeEmbeddings(dim, 0)``: 256-d sinusoid (cos first, shift 0) -> MLP."""

    def __init__(self, dim: int, *, dtype=jnp.float32):
        self.timestep_embedder = TimestepEmbedding(_FREQ_DIM, dim, dtype=dtype, rngs=nnx.Rngs(0))

    def __call__(self, t: jax.Array, dtype) -> jax.Array:
        proj = timestep_embedding(t, _FREQ_DIM, flip_sin_to_cos=True, downscale_freq_shift=0)
        return self.timestep_embedder(proj.astype(dtype)).astype(dtype)


class Resnet(nnx.Module):
    """``LTXVideoResnetBlock3d``; ``temb`` (B, 4 C) modulates both norms when the block is timestep-conditioned."""

    def __init__(self, cin: int, cout: int, *, eps: float, mode: ConvMode, timestep: bool = False, dtype=jnp.float32):
        self.conv1 = Conv(cin, cout, mode=mode, dtype=dtype)
        self.conv2 = Conv(cout, cout, mode=mode, dtype=dtype)
        if cin != cout:
            self.norm3 = LayerNorm(cin, eps=eps, out_dtype=None)
            self.conv_shortcut = Conv(cin, cout, 1, mode=mode, dtype=dtype)
        else:
            self.norm3 = None
            self.conv_shortcut = None
        self.scale_shift_table = nnx.Param(jnp.zeros((4, cin), jnp.float32)) if timestep else None

    def __call__(self, x: jax.Array, temb: jax.Array | None = None, area: TileArea | None = None) -> jax.Array:
        h = _norm(x)
        if self.scale_shift_table is not None:
            b = x.shape[0]
            mod = temb.reshape(b, 4, -1) + self.scale_shift_table[...].astype(temb.dtype)[None]
            mod = mod[:, :, None, None, None, :].astype(x.dtype)  # (B, 4, 1, 1, 1, C)
            shift1, scale1, shift2, scale2 = mod[:, 0], mod[:, 1], mod[:, 2], mod[:, 3]
            h = h * (1 + scale1) + shift1
        h = self.conv1(jax.nn.silu(h), area)
        h = _norm(h)
        if self.scale_shift_table is not None:
            h = h * (1 + scale2) + shift2
        h = self.conv2(jax.nn.silu(h), area)  # dropout: inference no-op
        if self.norm3 is not None:
            x = self.conv_shortcut(self.norm3(x))
        return h + x


def space_to_depth(x: jax.Array, s: Sequence[int]) -> jax.Array:
    """(B, T, H, W, C) -> (B, T/s0, H/s1, W/s2, C*s0*s1*s2), channels ordered (c, s0, s1, s2)."""
    b, t, h, w, c = x.shape
    y = x.reshape(b, t // s[0], s[0], h // s[1], s[1], w // s[2], s[2], c)
    y = y.transpose(0, 1, 3, 5, 7, 2, 4, 6)
    return y.reshape(b, t // s[0], h // s[1], w // s[2], c * s[0] * s[1] * s[2])


def depth_to_space(x: jax.Array, s: Sequence[int]) -> jax.Array:
    """Inverse of :func:`space_to_depth`: channels (c, s0, s1, s2) -> (B, T*s0, H*s1, W*s2, c)."""
    b, t, h, w, cc = x.shape
    c = cc // (s[0] * s[1] * s[2])
    y = x.reshape(b, t, h, w, c, s[0], s[1], s[2]).transpose(0, 1, 5, 2, 6, 3, 7, 4)
    return y.reshape(b, t * s[0], h * s[1], w * s[2], c)



class Downsampler(nnx.Module):
    """``LTXVideoDownsampler3d``: conv to ``cout / prod(s)`` then space-to-depth, plus the space-to-depth input
    averaged over channel groups; the first ``s0 - 1`` frames are repeated in front."""

    def __init__(self, cin: int, cout: int, stride: tuple[int, int, int], *, mode: ConvMode, dtype=jnp.float32):
        self.stride = stride
        n = stride[0] * stride[1] * stride[2]
        self.group = cin * n // cout
        self.conv = Conv(cin, cout // n, mode=mode, dtype=dtype)

    def __call__(self, x: jax.Array, area: TileArea | None = None) -> jax.Array:
        s = self.stride
        x = jnp.concatenate([x[:, : s[0] - 1], x], axis=1)
        r = space_to_depth(x, s)
        r = r.reshape(*r.shape[:-1], -1, self.group).mean(axis=-1)
        return space_to_depth(self.conv(x, area), s) + r


class Upsampler(nnx.Module):
    """``LTXVideoUpsampler3d`` (``stride`` (t, h, w), 2 in each for LTX's "spatiotemporal"): conv then
    depth-to-space, dropping the first ``stride_t - 1`` frames; with ``residual`` the depth-to-space input,
    channel-repeated, is added."""

    def __init__(self, cin: int, *, residual: bool, factor: int, mode: ConvMode, stride=(2, 2, 2),
                 dtype=jnp.float32):
        self.residual = residual
        self.stride = tuple(int(v) for v in stride)
        n = self.stride[0] * self.stride[1] * self.stride[2]
        self.repeats = n // factor
        self.conv = Conv(cin, cin * n // factor, mode=mode, dtype=dtype)

    def __call__(self, x: jax.Array, area: TileArea | None = None) -> jax.Array:
        s = self.stride
        y = depth_to_space(self.conv(x, area), s)[:, s[0] - 1 :]
        if self.residual:
            r = depth_to_space(x, s)
            y = y + jnp.tile(r, (1, 1, 1, 1, self.repeats))[:, s[0] - 1 :]
        return y


class DownBlock(nnx.Module):
    """``LTXVideo095DownBlock3D``: resnets at the input width, then the downsampler to ``cout``."""

    def __init__(self, cin: int, cout: int, n: int, scale: bool, kind: str, *, eps: float, mode: ConvMode,
                 dtype=jnp.float32):
        self.resnets = nnx.List([Resnet(cin, cin, eps=eps, mode=mode, dtype=dtype) for _ in range(n)])
        self.downsamplers = (nnx.List([Downsampler(cin, cout, STRIDES[kind], mode=mode, dtype=dtype)])
                             if scale else None)

    def __call__(self, x: jax.Array, area: TileArea | None = None) -> jax.Array:
        for r in self.resnets:
            x = r(x, area=area)
        if self.downsamplers is not None:
            x = self.downsamplers[0](x, area)
        return x


class MidBlock(nnx.Module):
    """``LTXVideoMidBlock3d``; with timestep conditioning its own embedder turns the timestep into (B, 4 C)."""

    def __init__(self, dim: int, n: int, *, eps: float, mode: ConvMode, timestep: bool, dtype=jnp.float32):
        self.time_embedder = TimeEmbedder(4 * dim, dtype=dtype) if timestep else None
        self.resnets = nnx.List([Resnet(dim, dim, eps=eps, mode=mode, timestep=timestep, dtype=dtype)
                                 for _ in range(n)])

    def __call__(self, x: jax.Array, t: jax.Array | None = None, area: TileArea | None = None) -> jax.Array:
        temb = self.time_embedder(t, x.dtype) if self.time_embedder is not None else None
        for r in self.resnets:
            x = r(x, temb, area)
        return x


class UpBlock(nnx.Module):
    """``LTXVideoUpBlock3d``: [conv_in resnet], [upsampler], resnets; timestep-conditioned like the mid block."""

    def __init__(self, cin: int, cout: int, n: int, scale: bool, residual: bool, factor: int, *, eps: float,
                 mode: ConvMode, timestep: bool, stride=(2, 2, 2), dtype=jnp.float32):
        self.time_embedder = TimeEmbedder(4 * cin, dtype=dtype) if timestep else None
        self.conv_in = Resnet(cin, cout, eps=eps, mode=mode, timestep=timestep, dtype=dtype) if cin != cout else None
        self.upsamplers = (nnx.List([Upsampler(cout * factor, residual=residual, factor=factor, mode=mode,
                                               stride=stride, dtype=dtype)]) if scale else None)
        self.resnets = nnx.List([Resnet(cout, cout, eps=eps, mode=mode, timestep=timestep, dtype=dtype)
                                 for _ in range(n)])

    def __call__(self, x: jax.Array, t: jax.Array | None = None, area: TileArea | None = None) -> jax.Array:
        if self.conv_in is not None:
            x = self.conv_in(x, area=area)
        temb = self.time_embedder(t, x.dtype) if self.time_embedder is not None else None
        if self.upsamplers is not None:
            x = self.upsamplers[0](x, area)
        for r in self.resnets:
            x = r(x, temb, area)
        return x


def _up_block_channels(cfg: LTXVAEConfig) -> list[tuple[int, int, int]]:
    """(in, out, upsample factor) of each decoder up block, in decoding order."""
    chans = tuple(reversed(cfg.decoder_block_out_channels))
    factors = tuple(reversed(cfg.upsample_factor))
    out, prev = [], chans[0]
    for i, c in enumerate(chans):
        f = int(factors[i])
        out.append((prev // f, c // f, f))
        prev = c // f
    return out


class Encoder(nnx.Module):
    """``LTXVideoEncoder3d`` with 0.9.5 down blocks (or ``LTX2VideoEncoder3d``, the same net with its widths read
    differently, :meth:`LTXVAEConfig.encoder_widths`): patchify, conv_in, down blocks, mid block, norm, conv_out."""

    def __init__(self, cfg: LTXVAEConfig, *, dtype=jnp.float32):
        mode, eps = ConvMode(bool(cfg.encoder_causal), cfg.encoder_spatial_padding_mode), cfg.resnet_norm_eps
        ch = cfg.encoder_widths()
        self.conv_in = Conv(cfg.in_channels * cfg.patch_size**2, ch[0], mode=mode, dtype=dtype)
        self.down_blocks = nnx.List([
            DownBlock(ch[i], ch[i + 1], cfg.layers_per_block[i], bool(cfg.spatio_temporal_scaling[i]),
                      cfg.downsample_type[i], eps=eps, mode=mode, dtype=dtype)
            for i in range(len(ch) - 1)
        ])
        self.mid_block = MidBlock(ch[-1], cfg.layers_per_block[-1], eps=eps, mode=mode, timestep=False,
                                  dtype=dtype)
        self.conv_out = Conv(ch[-1], cfg.latent_channels + 1, mode=mode, dtype=dtype)
        self.p, self.pt = int(cfg.patch_size), int(cfg.patch_size_t)

    def __call__(self, x: jax.Array, area: TileArea | None = None) -> jax.Array:
        """Pixels (B, T, H, W, 3) -> (B, t, h, w, C + 1): the latent mean and the single log-variance channel.
        ``area``: a padded tile's real pixel area (its sides multiples of the compression, whole at every level)."""
        b, t, h, w, c = x.shape
        p, pt = self.p, self.pt
        x = x.reshape(b, t // pt, pt, h // p, p, w // p, p, c).transpose(0, 1, 3, 5, 7, 2, 6, 4)
        x = self.conv_in(x.reshape(b, t // pt, h // p, w // p, c * pt * p * p), area)
        for blk in self.down_blocks:
            x = blk(x, area)
        x = self.mid_block(x, area=area)
        return self.conv_out(jax.nn.silu(_norm(x)), area)


class Decoder(nnx.Module):
    """``LTXVideoDecoder3d``: conv_in, mid block, up blocks, norm (+ timestep scale/shift), conv_out, unpatchify."""

    def __init__(self, cfg: LTXVAEConfig, *, dtype=jnp.float32):
        mode = ConvMode(bool(cfg.decoder_causal), cfg.decoder_spatial_padding_mode)
        eps, ts = cfg.resnet_norm_eps, cfg.timestep_conditioning
        chans = tuple(reversed(cfg.decoder_block_out_channels))
        layers = tuple(reversed(cfg.decoder_layers_per_block))
        scaling = tuple(reversed(cfg.decoder_spatio_temporal_scaling))
        residual = tuple(reversed(cfg.upsample_residual))
        self.conv_in = Conv(cfg.latent_channels, chans[0], mode=mode, dtype=dtype)
        self.mid_block = MidBlock(chans[0], layers[0], eps=eps, mode=mode, timestep=ts, dtype=dtype)
        blocks = []
        strides = cfg.upsample_strides()
        for i, (cin, cout, f) in enumerate(_up_block_channels(cfg)):
            blocks.append(UpBlock(cin, cout, layers[i + 1], bool(scaling[i]), bool(residual[i]), f, eps=eps,
                                  mode=mode, timestep=ts, stride=strides[i], dtype=dtype))
        self.up_blocks = nnx.List(blocks)
        last = _up_block_channels(cfg)[-1][1]
        self.conv_out = Conv(last, cfg.out_channels * cfg.patch_size**2, mode=mode, dtype=dtype)
        if ts:
            self.timestep_scale_multiplier = nnx.Param(jnp.zeros((), jnp.float32))
            self.time_embedder = TimeEmbedder(2 * last, dtype=dtype)
            self.scale_shift_table = nnx.Param(jnp.zeros((2, last), jnp.float32))
        else:
            self.timestep_scale_multiplier = self.time_embedder = self.scale_shift_table = None
        self.p, self.pt = int(cfg.patch_size), int(cfg.patch_size_t)

    def __call__(self, z: jax.Array, timestep: jax.Array | None, area: TileArea | None = None) -> jax.Array:
        """Raw latents (B, F, h, w, C), timestep (B,) or None -> decoder output pixels (B, T, H, W, 3). ``area``: a
        padded tile's real latent area."""
        x = self.conv_in(z, area)
        t = None
        if self.timestep_scale_multiplier is not None:
            t = timestep.astype(jnp.float32) * self.timestep_scale_multiplier[...]
        x = self.mid_block(x, t, area)
        for blk in self.up_blocks:
            x = blk(x, t, area)
        x = _norm(x)
        if self.time_embedder is not None:
            emb = self.time_embedder(t, x.dtype).reshape(x.shape[0], 2, -1)
            mod = (emb + self.scale_shift_table[...].astype(emb.dtype)[None])[:, :, None, None, None, :]
            x = x * (1 + mod[:, 1]) + mod[:, 0]
        x = self.conv_out(jax.nn.silu(x), area)
        b, f, h, w, cc = x.shape
        p, pt = self.p, self.pt
        c = cc // (pt * p * p)
        x = x.reshape(b, f, h, w, c, pt, p, p).transpose(0, 1, 5, 2, 7, 3, 6, 4)  # channels (c, t, w, h)
        return x.reshape(b, f * pt, h * p, w * p, c)


class LTXVAE(nnx.Module):
    """``AutoencoderKLLTXVideo`` (``AutoencoderKLLTX2Video`` with an :class:`~vidax_ltx.ltx2_vae.LTX2VAEConfig`).
    Parameters start at zeros; :func:`load_vae` fills them."""

    def __init__(self, cfg: LTXVAEConfig, *, with_encoder: bool = True):
        cfg.check_supported(with_encoder=with_encoder)
        dtype = jnp.dtype(cfg.dtype)
        self.cfg = cfg
        self.decoder = Decoder(cfg, dtype=dtype)
        self.encoder = Encoder(cfg, dtype=dtype) if with_encoder else None


def load_vae(cfg: LTXVAEConfig, tensors: Mapping[str, Any], *, with_encoder: bool, put=None) -> LTXVAE:
    """A diffusers ``AutoencoderKLLTXVideo`` state dict (key -> array or lazy loader) -> a live :class:`LTXVAE`.

    An original single-file state dict (``vae.*`` keys; other keys, e.g. the DiT's, are left out) is renamed first
    (:func:`vidax_ltx.vae_convert.original_vae_tensors`). Every VAE key must be used (the encoder's are dropped when
    ``with_encoder`` is False); the ``latents_mean`` / ``latents_std`` buffers go to ``cfg`` (zeros / ones when the
    checkpoint lacks them, diffusers' init)."""
    if any(k.startswith("vae.") for k in tensors):
        tensors = original_vae_tensors(tensors)
    read_latent_stats(cfg, tensors)
    return _load_tables(cfg, tensors, with_encoder=with_encoder, put=put)


def read_latent_stats(cfg: LTXVAEConfig, tensors: Mapping[str, Any]) -> None:
    """The ``latents_mean`` / ``latents_std`` buffers of a diffusers VAE state dict into ``cfg`` (zeros / ones when
    the checkpoint lacks them, diffusers' init); nothing else is read."""
    c = cfg.latent_channels
    stats = {}
    for key, default in (("latents_mean", 0.0), ("latents_std", 1.0)):
        v = tensors[key] if key in tensors else None
        v = v() if callable(v) else v
        arr = np.full((c,), default, np.float32) if v is None else np.asarray(v, np.float32).reshape(-1)
        if arr.shape != (c,):
            raise UserError(f"vae checkpoint: {key} has {arr.size} entries, expected latent_channels={c}")
        stats[key] = tuple(float(a) for a in arr)
    cfg.latents_mean, cfg.latents_std = stats["latents_mean"], stats["latents_std"]


_load_tables = vae_loader(LTXVAE, vae_rules(True), vae_rules(False), ignore=STATS_KEYS,
                          decode_only_ignore=DECODER_IGNORE)


# --------------------------------------------------------------------------------------------------------------
# decode / encode


def tiling_options(tiling: Any) -> TilingOptions:
    """``vae.tiling``: False/None off, True on with LTX's defaults (512 / 448 px), a mapping overrides those."""
    if tiling is None or tiling is False:
        return TilingOptions()
    if tiling is True:
        return LTX_TILING
    if isinstance(tiling, TilingOptions):
        return tiling
    TilingOptions.coerce(tiling)  # rejects unknown keys
    return dataclasses.replace(LTX_TILING, **dict(tiling))


def decode_plan(cfg: LTXVAEConfig, latent_hw: Sequence[int], tiling: Any = None) -> TilePlan:
    """diffusers ``_decode`` / ``tiled_decode``: tiles laid out in latents (``tile_sample_* // 32``), blended and
    cropped in pixels; one tile unless tiling is on and the latent exceeds a tile."""
    return stride_decode_plan(tiling_options(tiling), latent_hw, int(cfg.spatial_compression_ratio))


def encode_plan(cfg: LTXVAEConfig, pixel_hw: Sequence[int], tiling: Any = None) -> TilePlan:
    """diffusers ``_encode`` / ``tiled_encode``: tiles in pixels, blended and cropped in latents."""
    return stride_encode_plan(tiling_options(tiling), pixel_hw, int(cfg.spatial_compression_ratio))


def _decode_impl(graphdef, state, z, t, area=None):
    """``area``: None, or the (B, 2) real latent rows and columns of padded tiles (one program for every tile)."""
    return nnx.merge(graphdef, state).decoder(z, t, tile_area(z, area))


def _encode_impl(graphdef, state, x, area=None):
    """``area``: None, or the (B, 2) real pixel rows and columns of padded tiles (multiples of the compression)."""
    return nnx.merge(graphdef, state).encoder(x, tile_area(x, area))


_decode_jit = jax.jit(_decode_impl, static_argnames=("graphdef",))
_encode_jit = jax.jit(_encode_impl, static_argnames=("graphdef",))


def _timesteps(vae: LTXVAE, timestep: Any, batch: int) -> np.ndarray | None:
    if not vae.cfg.timestep_conditioning:
        return None
    if timestep is None:
        raise UserError("this LTX VAE decoder is timestep-conditioned: pass a decode timestep")
    t = np.asarray(timestep, np.float32).reshape(-1)
    if t.size == 1:
        t = np.full((batch,), t[0], np.float32)
    if t.shape != (batch,):
        raise ValueError(f"decode timestep: expected one value or {batch} (one per batch entry), got {t.size}")
    return t


def decode(vae: LTXVAE, z: Any, *, timestep: Any = None, tiling: Any = None,
           on_chunk: Callable[[int, int], None] | None = None, devices: Sequence[Any] | None = None) -> np.ndarray:
    """``vae.decode(z, temb).sample``: raw latents (B, C, F, h, w) -> (B, 3, 1 + 8 (F - 1), 32 h, 32 w) float32.

    ``timestep``: a scalar or (B,) (required when the decoder is timestep-conditioned, ignored otherwise).
    ``tiling``: see :func:`tiling_options`. ``devices``: spread tiles / batch entries over these. ``on_chunk(1, 1)``
    fires when the video is on the host (the non-causal decoder runs all frames at once)."""
    zz = np.moveaxis(np.asarray(z, np.float32), 1, -1)  # (B, F, h, w, C)
    b = zz.shape[0]
    t = _timesteps(vae, timestep, b)
    plan = decode_plan(vae.cfg, zz.shape[2:4], tiling)
    if t is not None and b > 1 and not np.all(t == t[0]):
        # a group of units may mix batch entries; with distinct timesteps run each entry on its own
        parts = [decode(vae, np.asarray(z)[i : i + 1], timestep=t[i : i + 1], tiling=tiling, devices=devices)
                 for i in range(b)]
        if on_chunk is not None:
            on_chunk(1, 1)
        return np.concatenate(parts, axis=0)
    extra = (lambda n: (None,)) if t is None else (lambda n: (np.full((n,), t[0], np.float32),))
    out = run_tiled(zz, chunk_runner(vae, _decode_jit, streams=False, extra=extra), plan=plan,
                    bounds=[(0, zz.shape[1])], devices=devices, on_chunk=on_chunk, pad_tiles=True)
    return np.ascontiguousarray(np.moveaxis(out, -1, 1), np.float32)


def encode(vae: LTXVAE, x: Any, *, tiling: Any = None, devices: Sequence[Any] | None = None
           ) -> tuple[np.ndarray, np.ndarray]:
    """``vae.encode(x).latent_dist``: video (B, 3, T, H, W) in [-1, 1] -> ``(mean, logvar)``, each
    (B, C, 1 + (T - 1) // 8, H / 32, W / 32) float32, logvar clamped to [-30, 20] (one channel, broadcast)."""
    if vae.encoder is None:
        raise ValueError("this LTX VAE was loaded without its encoder (with_encoder=False)")
    xx = np.moveaxis(np.asarray(x, np.float32), 1, -1)
    plan = encode_plan(vae.cfg, xx.shape[2:4], tiling)
    pad = plan.sides_divisible(int(vae.cfg.spatial_compression_ratio))  # (others fail the reshapes anyway)
    out = run_tiled(xx, chunk_runner(vae, _encode_jit, streams=False), plan=plan, bounds=[(0, xx.shape[1])],
                    devices=devices, pad_tiles=pad)
    return gaussian_posterior(out, vae.cfg.latent_channels)
