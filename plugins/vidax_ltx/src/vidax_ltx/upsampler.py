"""LTX-Video latent upscaler (diffusers ``LTXLatentUpsamplerModel``, ``ltxv-spatial-upscaler-0.9.8``) in Flax NNX, and
LTX-2's (``LTX2LatentUpsamplerModel``, the LTX-2 checkpoints' ``latent_upsampler/``), which is the same network
with its spatial upsampler as a rational resampler: a conv to ``num^2 * mid`` channels, a 2-D pixel shuffle by
``num`` and a blur-and-stride downsample by ``den`` (``rational_spatial_scale`` 2.0 = 2/1: no blur; 1.5 = 3/2; 0.75
= 3/4; 4.0 = 4/1; the blur is a normalised 5x5 binomial filter applied per channel and frame, zero padding 2).

``upsample(model, latents)`` is ``LTXLatentUpsamplerModel.forward``: latents (B, C, F, h, w) in, (B, C, F', h', w')
out (2x in h and w for the spatial upscaler; 2x - 1 frames for a temporal one), float32 numpy. The network: 3x3(x3)
conv to ``mid_channels``, GroupNorm(32), SiLU, ``num_blocks_per_stage`` residual blocks (conv, GroupNorm, SiLU, conv,
GroupNorm, SiLU after the residual add), the upsampler (a conv to ``k * mid`` channels then pixel shuffle), as many
residual blocks again, and a conv back to ``in_channels``. All convs zero-pad ("same"), in time too.

Facts of the reference kept here: with ``dims=3`` the spatial upsampler is a 2-D conv and pixel shuffle applied to
each frame, while everything else is 3-D (GroupNorm statistics span all frames); with ``dims=2`` every layer works
per frame, GroupNorm included. A temporal upsampler drops the first output frame. The original release file uses
diffusers' names unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.io.arch import SOURCE_KEY, from_config_dict
from vidax_core.errors import UserError
from vidax_core.io.convert import KeyRule, conv, convert
from vidax_core.nn.group_norm import GroupNorm
from vidax_core.nn.state import abstract_model, materialize
from vidax_core.vae.causal_conv import CausalConv3d

from .vae import depth_to_space

_GROUPS = 32
#: ``rational_spatial_scale`` -> (upsampling factor, blur downsampling stride), as diffusers' mapping.
RATIONAL_SCALES = {0.75: (3, 4), 1.5: (3, 2), 2.0: (2, 1), 4.0: (4, 1)}

#: The published 0.9.7 / 0.9.8 spatial upscaler ``config.json``.
PUBLISHED_UPSAMPLER_CONFIG: dict[str, Any] = dict(in_channels=128, mid_channels=512, num_blocks_per_stage=4, dims=3,
                                                  spatial_upsample=True, temporal_upsample=False)


@dataclass(frozen=True)
class LTXUpsamplerConfig:
    """diffusers ``LTXLatentUpsamplerModel`` config.json fields."""

    in_channels: int = 128
    mid_channels: int = 512
    num_blocks_per_stage: int = 4
    dims: int = 3
    spatial_upsample: bool = True
    temporal_upsample: bool = False
    rational_spatial_scale: float = 2.0
    use_rational_resampler: bool = False  # LTX2LatentUpsamplerModel's default is True (from_config)
    dtype: Any = jnp.float32

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> "LTXUpsamplerConfig":
        config = dict(config)
        if config.get("_class_name") == "LTX2LatentUpsamplerModel":
            config.setdefault("use_rational_resampler", True)
        cfg = from_config_dict(cls, config, **overrides)
        if cfg.rational and float(cfg.rational_spatial_scale) not in RATIONAL_SCALES:
            raise UserError(f"latent upsampler config: rational_spatial_scale must be one of "
                            f"{', '.join(map(str, RATIONAL_SCALES))}, got {cfg.rational_spatial_scale}")
        if cfg.dims not in (2, 3):
            raise UserError(f"latent upsampler config: dims must be 2 or 3, got {cfg.dims}")
        if not (cfg.spatial_upsample or cfg.temporal_upsample):
            raise UserError("latent upsampler config: spatial_upsample or temporal_upsample must be true")
        if cfg.dims == 2 and cfg.temporal_upsample:
            raise UserError("latent upsampler config: a temporal upsampler needs dims=3 (the reference cannot run it)")
        if cfg.mid_channels % _GROUPS:
            raise UserError(f"latent upsampler config: mid_channels={cfg.mid_channels} must be a multiple of 32")
        return cfg

    @property
    def rational(self) -> bool:
        """LTX-2's rational resampler does the spatial-only upsampling."""
        return self.use_rational_resampler and self.spatial_upsample and not self.temporal_upsample

    @property
    def stride(self) -> tuple[int, int, int]:
        """(t, h, w) factors of the upsampler's pixel shuffle."""
        s = (RATIONAL_SCALES[float(self.rational_spatial_scale)][0] if self.rational
             else 2 if self.spatial_upsample else 1)
        return (2 if self.temporal_upsample else 1, s, s)


class Conv(nnx.Module):
    """torch ``Conv3d(k=3, padding=1)`` (``kt=3``) or a per-frame ``Conv2d(k=3, padding=1)`` (``kt=1``)."""

    def __init__(self, cin: int, cout: int, kt: int, *, dtype=jnp.float32):
        self.conv = CausalConv3d(cin, cout, (kt, 3, 3), dtype=dtype)
        self.pad = (kt - 1) // 2

    def __call__(self, x: jax.Array) -> jax.Array:
        if self.pad:
            x = jnp.pad(x, ((0, 0), (self.pad, self.pad), (0, 0), (0, 0), (0, 0)))
        return self.conv(x)


class ResBlock(nnx.Module):
    def __init__(self, dim: int, kt: int, axes: tuple[int, ...], *, dtype=jnp.float32):
        self.conv1 = Conv(dim, dim, kt, dtype=dtype)
        self.norm1 = GroupNorm(dim, _GROUPS, axes=axes)
        self.conv2 = Conv(dim, dim, kt, dtype=dtype)
        self.norm2 = GroupNorm(dim, _GROUPS, axes=axes)

    def __call__(self, x: jax.Array) -> jax.Array:
        h = jax.nn.silu(self.norm1(self.conv1(x)))
        return jax.nn.silu(self.norm2(self.conv2(h)) + x)


def blur_downsample(x: jax.Array, stride: int, size: int = 5) -> jax.Array:
    """Per channel and frame, the normalised binomial ``size x size`` filter at ``stride`` (zero padding
    ``size // 2``) on channels-last (B, T, H, W, C); identity at stride 1."""
    if stride == 1:
        return x
    import math

    k = np.array([math.comb(size - 1, i) for i in range(size)], np.float64)
    k2 = (np.outer(k, k) / np.outer(k, k).sum()).astype(np.float32)
    b, t, h, w, c = x.shape
    y = jax.lax.conv_general_dilated(x.reshape(b * t, h, w, c), jnp.asarray(np.tile(k2[:, :, None, None], (1, 1, 1, c)),
                                                                            x.dtype),
                                     (stride, stride), [(size // 2, size // 2)] * 2,
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=c,
                                     precision=jax.lax.Precision.HIGHEST)
    return y.reshape(b, t, *y.shape[1:])


class RationalResampler(nnx.Module):
    """LTX-2's ``SpatialRationalResampler`` per frame: conv to ``num^2`` times the channels, pixel shuffle by ``num``,
    blur downsample by ``den``."""

    def __init__(self, mid: int, scale: float, *, dtype=jnp.float32):
        self.num, self.den = RATIONAL_SCALES[float(scale)]
        self.conv = Conv(mid, mid * self.num**2, 1, dtype=dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        return blur_downsample(depth_to_space(self.conv(x), (1, self.num, self.num)), self.den)


class LTXUpsampler(nnx.Module):
    """``LTXLatentUpsamplerModel`` on channel-last latents (B, F, h, w, C). Parameters start at zeros/ones."""

    def __init__(self, cfg: LTXUpsamplerConfig):
        dtype = jnp.dtype(cfg.dtype)
        self.cfg = cfg
        kt = 3 if cfg.dims == 3 else 1
        axes = (1, 2, 3) if cfg.dims == 3 else (2, 3)  # GroupNorm over all frames, or per frame
        mid = cfg.mid_channels
        self.initial_conv = Conv(cfg.in_channels, mid, kt, dtype=dtype)
        self.initial_norm = GroupNorm(mid, _GROUPS, axes=axes)
        self.res_blocks = nnx.List([ResBlock(mid, kt, axes, dtype=dtype) for _ in range(cfg.num_blocks_per_stage)])
        s = cfg.stride
        self.upsampler = (RationalResampler(mid, cfg.rational_spatial_scale, dtype=dtype) if cfg.rational else
                          nnx.List([Conv(mid, mid * s[0] * s[1] * s[2], 3 if cfg.temporal_upsample else 1,
                                         dtype=dtype)]))
        self.post_upsample_res_blocks = nnx.List([ResBlock(mid, kt, axes, dtype=dtype)
                                                  for _ in range(cfg.num_blocks_per_stage)])
        self.final_conv = Conv(mid, cfg.in_channels, kt, dtype=dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = jax.nn.silu(self.initial_norm(self.initial_conv(x)))
        for blk in self.res_blocks:
            x = blk(x)
        if self.cfg.rational:
            x = self.upsampler(x)
        else:
            x = depth_to_space(self.upsampler[0](x), self.cfg.stride)
        if self.cfg.temporal_upsample:
            x = x[:, 1:]
        for blk in self.post_upsample_res_blocks:
            x = blk(x)
        return self.final_conv(x)


def _conv_weight(w: np.ndarray) -> np.ndarray:
    """torch Conv3d (out, in, kt, kh, kw) or Conv2d (out, in, kh, kw) weight -> (kt, kh, kw, in, out)."""
    k = conv(w)
    return k if w.ndim == 5 else k[None]


def _conv_rules(src: str, dst: str) -> list[KeyRule]:
    return [KeyRule(src + r"\.weight", dst + "/conv/kernel", _conv_weight),
            KeyRule(src + r"\.bias", dst + "/conv/bias")]


def _norm_rules(src: str, dst: str) -> list[KeyRule]:
    return [KeyRule(src + r"\.weight", dst + "/scale"), KeyRule(src + r"\.bias", dst + "/bias")]


#: diffusers (and original release) names -> :class:`LTXUpsampler` paths.
UPSAMPLER_RULES: list[KeyRule] = [
    *_conv_rules(r"(initial_conv|final_conv)", "{1}"),
    *_norm_rules(r"initial_norm", "initial_norm"),
    *_conv_rules(r"(res_blocks|post_upsample_res_blocks)\.(\d+)\.(conv1|conv2)", "{1}/{2}/{3}"),
    *_norm_rules(r"(res_blocks|post_upsample_res_blocks)\.(\d+)\.(norm1|norm2)", "{1}/{2}/{3}"),
    *_conv_rules(r"upsampler\.0", "upsampler/0"),
    *_conv_rules(r"upsampler\.conv", "upsampler/conv"),  # LTX-2's rational resampler
]
#: LTX-2's blur kernel is a fixed buffer (``upsampler.blur_down.kernel``), built here.
UPSAMPLER_IGNORE = (r"upsampler\.blur_down\.kernel",)


def load_upsampler(cfg: LTXUpsamplerConfig, tensors: Mapping[str, Any], *, put=None) -> LTXUpsampler:
    """A ``LTXLatentUpsamplerModel`` state dict (diffusers folder or the original ``ltxv-spatial-upscaler-*``
    file; key -> array or lazy loader) -> a live :class:`LTXUpsampler`; every key must be used."""
    graphdef, abstract, flat = abstract_model(lambda: LTXUpsampler(cfg))
    values = convert(tensors, UPSAMPLER_RULES, flat, component="latent_upsampler", ignore=UPSAMPLER_IGNORE)
    return materialize(graphdef, abstract, values, put=put)


def check_upsampler_file(path: str) -> None:
    """Before anything loads: the upscaler at ``path`` opens (safetensors header, config) and its tensor names and
    shapes are those of the model its config builds; nothing is materialized."""
    cfg, tensors = _open_files(path)
    _, _, flat = abstract_model(lambda: LTXUpsampler(cfg))
    convert(tensors, UPSAMPLER_RULES, flat, component="latent_upsampler", check_only=True, ignore=UPSAMPLER_IGNORE)


def open_upsampler(path: str, *, put=None) -> LTXUpsampler:
    """Load the upscaler users download: a diffusers folder (``config.json`` + ``diffusion_pytorch_model.safetensors``,
    e.g. ``latent_upsampler/``) or the original single file (``ltxv-spatial-upscaler-0.9.8.safetensors``: diffusers'
    tensor names, its config as JSON under the ``config`` key of the safetensors metadata; without one, the class
    defaults, which are the published configuration)."""
    cfg, tensors = _open_files(path)
    return load_upsampler(cfg, tensors, put=put)


def _open_files(path: str) -> tuple[LTXUpsamplerConfig, Any]:
    import json
    import os

    from vidax_core.io.checkpoint import read_json_file
    from vidax_core.io.safetensors import SafetensorsFile

    if os.path.isdir(path):
        weights = os.path.join(path, "diffusion_pytorch_model.safetensors")
        if not os.path.isfile(weights):
            raise UserError(f"{path}: no diffusion_pytorch_model.safetensors; point at the latent upsampler folder or "
                            "the ltxv-spatial-upscaler-*.safetensors file")
        config = read_json_file(os.path.join(path, "config.json"))
        tensors = SafetensorsFile(weights)
    else:
        tensors = SafetensorsFile(path)
        text = tensors.metadata.get("config")
        try:
            config = json.loads(text) if text else {}
        except ValueError:
            raise UserError(f"{path}: the config in its metadata is not valid JSON; re-download the file") from None
    if not isinstance(config, dict):
        raise UserError(f"{path}: the latent upsampler config must be a JSON object")
    return LTXUpsamplerConfig.from_config({**config, SOURCE_KEY: os.path.join(path, "config.json")
                                           if os.path.isdir(path) else f"{path} (metadata 'config')"}), tensors


def _forward_impl(graphdef, state, x):
    return nnx.merge(graphdef, state)(x)


_forward = jax.jit(_forward_impl, static_argnames=("graphdef",))


def upsample(model: LTXUpsampler, latents: Any) -> np.ndarray:
    """``LTXLatentUpsamplerModel.forward``: latents (B, C, F, h, w) -> upsampled latents, float32 numpy."""
    x = jnp.asarray(np.moveaxis(np.asarray(latents, np.float32), 1, -1), jnp.dtype(model.cfg.dtype))
    graphdef, state = nnx.split(model)
    return np.ascontiguousarray(np.moveaxis(np.asarray(_forward(graphdef, state, x), np.float32), -1, 1))


def adain_filter(latents: np.ndarray, reference: np.ndarray, factor: float) -> np.ndarray:
    """``LTXLatentUpsamplePipeline.adain_filter_latent``: per (entry, channel), give ``latents`` the mean and
    unbiased std of ``reference`` (over frames, rows, columns), then ``lerp(latents, that, factor)``."""
    x = np.asarray(latents, np.float64)
    r = np.asarray(reference, np.float64)
    axes = (2, 3, 4)
    moved = (x - x.mean(axis=axes, keepdims=True)) / x.std(axis=axes, ddof=1, keepdims=True)
    moved = moved * r.std(axis=axes, ddof=1, keepdims=True) + r.mean(axis=axes, keepdims=True)
    return (x + factor * (moved - x)).astype(np.float32)


def tone_map(latents: np.ndarray, compression: float) -> np.ndarray:
    """``LTXLatentUpsamplePipeline.tone_map_latents``: ``x * (1 - 0.8 s sigmoid(4 s (|x| - 1)))``, ``s = 0.75 c``."""
    x = np.asarray(latents, np.float64)
    s = compression * 0.75
    return (x * (1.0 - 0.8 * s / (1.0 + np.exp(-4.0 * s * (np.abs(x) - 1.0))))).astype(np.float32)


def upsample_latents(model: LTXUpsampler, latents: Any, *, latents_mean: Any, latents_std: Any,
                     scaling_factor: float = 1.0, adain_factor: float = 0.0,
                     tone_map_compression_ratio: float = 0.0) -> np.ndarray:
    """``LTXLatentUpsamplePipeline(latents=..., output_type="latent")``: normalised VAE latents (B, C, F, h, w)
    (the layout the pipeline takes) -> normalised upsampled latents. Between the VAE statistics' de- and
    re-normalisation: the upscaler, then optionally AdaIN towards the input (``adain_factor``) and tone mapping."""
    shape = (1, -1, 1, 1, 1)
    mean = np.asarray(latents_mean, np.float32).reshape(shape)
    std = np.asarray(latents_std, np.float32).reshape(shape)
    scale = np.float32(scaling_factor)
    raw = np.asarray(latents, np.float32) * std / scale + mean
    out = upsample(model, raw)
    if adain_factor > 0.0:
        out = adain_filter(out, raw, adain_factor)
    if tone_map_compression_ratio > 0.0:
        out = tone_map(out, tone_map_compression_ratio)
    return ((out - mean) * scale / std).astype(np.float32)
