"""The HunyuanVideo VAE (diffusers ``AutoencoderKLHunyuanVideo``): config, loading, decode and encode exactly as
diffusers, 16 latent channels, 8x spatial and 4x temporal compression.

Public arrays are diffusers' channel-first ``(B, C, T, H, W)`` host arrays; inside, activations are channel-last.

* :func:`decode` takes raw latents as ``vae.decode(z)`` does (the pipeline has already divided by
  ``scaling_factor``) and returns ``.sample``: unclamped pixels, about [-1, 1], float32.
* :func:`encode` returns ``vae.encode(x).latent_dist``'s ``(mean, logvar)`` (logvar clamped to [-30, 20]).

Tiling follows diffusers, not the original HunyuanVideo code: diffusers tiles in *time* whenever a clip is longer
than ``tile_sample_min_num_frames`` (16 pixel frames, 4 latent frames; ``use_framewise_decoding`` /
``_encoding`` are on by default, even with spatial tiling off), in overlapping tiles: decode takes 5 latent frames
every 3 and blends the outputs over 4 pixel frames, encode takes 17 pixel frames every 12 and blends over 1 latent
frame (:mod:`vidax_core.vae.time_tiling`). The original HunyuanVideo code only tiles in space, so on clips above 16
frames its output differs from diffusers' (and vidax's) at the temporal seams.
With ``tiling`` on, each temporal tile (or the whole clip) is also split into spatial tiles of
256 pixels every 192 (:func:`vidax_core.vae.tiling.run_tiled`). ``framewise=False`` in ``tiling`` runs the whole
clip at once, as diffusers does with ``use_framewise_decoding = False``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.io.arch_base import CheckedConfig
from vidax_core.errors import UserError
from vidax_core.vae.chunks import channels_last, chunk_runner, gaussian_posterior
from vidax_core.vae.config_checks import block_problems
from vidax_core.vae.loader import vae_loader
from vidax_core.vae.tiling import TilePlan, TilingOptions, run_tiled, stride_decode_plan, stride_encode_plan
from vidax_core.vae.time_tiling import run_time_tiles

from vidax_core.vae.convert_hunyuan import DECODE_ONLY_IGNORE, DECODER_RULES, VAE_RULES
from vidax_core.vae.hunyuan_blocks import Decoder, Encoder, PointwiseConv3d

_DOWN = "HunyuanVideoDownBlock3D"
_UP = "HunyuanVideoUpBlock3D"


@dataclass(frozen=True)
class HunyuanVAEConfig(CheckedConfig):
    """The fields of diffusers' ``AutoencoderKLHunyuanVideo`` config.json, under their names."""

    in_channels: int = 3
    out_channels: int = 3
    latent_channels: int = 16
    down_block_types: tuple[str, ...] = (_DOWN,) * 4
    up_block_types: tuple[str, ...] = (_UP,) * 4
    block_out_channels: tuple[int, ...] = (128, 256, 512, 512)
    layers_per_block: int = 2
    act_fn: str = "silu"
    norm_num_groups: int = 32
    scaling_factor: float = 0.476986
    spatial_compression_ratio: int = 8
    temporal_compression_ratio: int = 4
    mid_block_add_attention: bool = True
    dtype: Any = jnp.float32

    label = "the HunyuanVideo VAE config"

    def problems(self) -> list[str]:
        n = len(self.block_out_channels)
        problems = block_problems(self, _DOWN, _UP, "HunyuanVideo")
        if self.temporal_compression_ratio != 4 or n < 3:
            problems.append("only temporal_compression_ratio 4 (with at least 3 blocks) is supported, as in diffusers' "
                            "decoder")
        s = self.spatial_compression_ratio
        if s < 1 or s & (s - 1) or s > 2 ** n:
            problems.append(f"spatial_compression_ratio {s} must be a power of 2 of at most {2 ** n}")
        return problems


class HunyuanVAE(nnx.Module):
    """``AutoencoderKLHunyuanVideo``; parameters start at zeros/ones, real ones come from :func:`load_vae`."""

    def __init__(self, cfg: HunyuanVAEConfig, *, with_encoder: bool = True):
        cfg.check_supported()
        dtype = jnp.dtype(cfg.dtype)
        self.cfg = cfg
        common = dict(latent_channels=cfg.latent_channels, block_out_channels=cfg.block_out_channels,
                      layers_per_block=cfg.layers_per_block, groups=cfg.norm_num_groups,
                      spatial_ratio=cfg.spatial_compression_ratio, temporal_ratio=cfg.temporal_compression_ratio,
                      add_attention=cfg.mid_block_add_attention, dtype=dtype)
        c = cfg.latent_channels
        self.decoder = Decoder(out_channels=cfg.out_channels, **common)
        self.post_quant_conv = PointwiseConv3d(c, c, dtype=dtype)
        self.encoder = Encoder(in_channels=cfg.in_channels, **common) if with_encoder else None
        self.quant_conv = PointwiseConv3d(2 * c, 2 * c, dtype=dtype) if with_encoder else None


load_vae = vae_loader(HunyuanVAE, VAE_RULES, DECODER_RULES, decode_only_ignore=DECODE_ONLY_IGNORE, doc="""\
``load_vae(cfg, tensors, *, with_encoder=True, put=None)``: a diffusers ``AutoencoderKLHunyuanVideo`` state dict
(key -> array or lazy loader; the original ``.pt`` through
:func:`vidax_core.vae.convert_hunyuan.open_original_vae`) as a
live :class:`HunyuanVAE`; every missing, unexpected or mis-shaped tensor is reported at once. ``with_encoder=False``
skips the encoder's tensors.""")


# --------------------------------------------------------------------------------------------------------------
# tiling knobs and plans


@dataclass(frozen=True)
class HunyuanTiling:
    """diffusers ``AutoencoderKLHunyuanVideo.enable_tiling`` knobs (pixels / pixel frames) with its defaults.

    ``enabled``: spatial tiling (``use_tiling``). ``framewise``: temporal tiling above ``tile_sample_min_num_frames``
    (``use_framewise_decoding`` / ``_encoding``, on by default in diffusers whether or not tiling is enabled).
    """

    enabled: bool = False
    framewise: bool = True
    tile_sample_min_height: int = 256
    tile_sample_min_width: int = 256
    tile_sample_min_num_frames: int = 16
    tile_sample_stride_height: int = 192
    tile_sample_stride_width: int = 192
    tile_sample_stride_num_frames: int = 12


_KNOBS = tuple(f.name for f in fields(HunyuanTiling))


def tiling_options(tiling: Any = None) -> HunyuanTiling:
    """``tiling``: None/False -> spatial tiling off (temporal tiling on, as diffusers); True -> ``enable_tiling()``;
    a mapping of :class:`HunyuanTiling` knobs (on unless ``enabled`` says otherwise); a core
    :class:`~vidax_core.vae.tiling.TilingOptions` (its spatial sizes). Raises :class:`UserError` for bad knobs."""
    if tiling is None or tiling is False:
        opts = HunyuanTiling()
    elif tiling is True:
        opts = HunyuanTiling(enabled=True)
    elif isinstance(tiling, HunyuanTiling):
        opts = tiling
    elif isinstance(tiling, TilingOptions):
        opts = HunyuanTiling(**{f: getattr(tiling, f) for f in ("enabled", "tile_sample_min_height",
                                                                 "tile_sample_min_width", "tile_sample_stride_height",
                                                                 "tile_sample_stride_width")})
    elif isinstance(tiling, Mapping):
        unknown = sorted(set(tiling) - set(_KNOBS))
        if unknown:
            raise UserError(f"VAE tiling option(s) {unknown} do not apply to HunyuanVideo; its knobs: {list(_KNOBS)}")
        opts = replace(HunyuanTiling(enabled=True), **dict(tiling))
    else:
        raise UserError(f"VAE tiling must be true/false or a mapping of {list(_KNOBS)}, got {tiling!r}")
    for name in _KNOBS[2:]:
        v = getattr(opts, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise UserError(f"VAE tiling: {name} must be a positive integer, got {v!r}")
    for axis in ("height", "width", "num_frames"):
        tile, stride = getattr(opts, f"tile_sample_min_{axis}"), getattr(opts, f"tile_sample_stride_{axis}")
        if stride > tile:
            raise UserError(f"VAE tiling: tile_sample_stride_{axis} {stride} is larger than tile_sample_min_{axis} "
                            f"{tile}, which leaves gaps; lower the stride")
    return opts


def _check_latent_tiles(cfg: HunyuanVAEConfig, opts: HunyuanTiling) -> None:
    """Every tile and stride must span at least one latent position (diffusers divides them by the ratios)."""
    for axis, r in (("height", cfg.spatial_compression_ratio), ("width", cfg.spatial_compression_ratio),
                    ("num_frames", cfg.temporal_compression_ratio)):
        for kind in ("min", "stride"):
            name = f"tile_sample_{kind}_{axis}"
            if getattr(opts, name) < r:
                raise UserError(f"VAE tiling: {name} {getattr(opts, name)} is under one latent position; use at "
                                f"least {r}")


def encoded_size(n: int, cfg: HunyuanVAEConfig) -> int:
    """Pixels -> latent positions along H or W: each spatial down block pads 1 on both sides, 3x3 with stride 2."""
    for _ in range(int(np.log2(cfg.spatial_compression_ratio))):
        n = (n - 1) // 2 + 1
    return n


def decode_plan(cfg: HunyuanVAEConfig, latent_hw: Sequence[int], opts: HunyuanTiling) -> TilePlan:
    """diffusers ``_decode`` / ``tiled_decode``: spatially tiled when on and the latent exceeds a latent tile."""
    return stride_decode_plan(opts, latent_hw, cfg.spatial_compression_ratio, check=False)


def encode_plan(cfg: HunyuanVAEConfig, pixel_hw: Sequence[int], opts: HunyuanTiling) -> TilePlan:
    """diffusers ``_encode`` / ``tiled_encode``: spatially tiled when on and the frame exceeds a tile."""
    h, w = (int(v) for v in pixel_hw)
    return stride_encode_plan(opts, (h, w), cfg.spatial_compression_ratio, check=False,
                              untiled_out=(encoded_size(h, cfg), encoded_size(w, cfg)))


# --------------------------------------------------------------------------------------------------------------
# jitted programs


def _decode_impl(graphdef, state, z):
    vae = nnx.merge(graphdef, state)
    return vae.decoder(vae.post_quant_conv(z))


def _encode_impl(graphdef, state, x):
    vae = nnx.merge(graphdef, state)
    return vae.quant_conv(vae.encoder(x))


_decode_program = jax.jit(_decode_impl, static_argnames=("graphdef",))
_encode_program = jax.jit(_encode_impl, static_argnames=("graphdef",))


def _spatial(x: np.ndarray, run: Callable, plan: TilePlan, devices) -> np.ndarray:
    return run_tiled(x, run, plan=plan, bounds=[(0, x.shape[1])], devices=devices)


def _run_clip(x: np.ndarray, run: Callable, plan: TilePlan, devices, on_chunk, time_tiles: dict | None
              ) -> np.ndarray:
    """The whole clip at once (``time_tiles`` None), or overlapping temporal tiles, each split in space by
    ``plan``."""
    if time_tiles is None:
        out = _spatial(x, run, plan, devices)
        if on_chunk is not None:
            on_chunk(1, 1)
        return out
    return run_time_tiles(x, lambda part: _spatial(part, run, plan, devices), on_tile=on_chunk, **time_tiles)


def decode(vae: HunyuanVAE, z: Any, *, tiling: Any = None, on_chunk: Callable[[int, int], None] | None = None,
           devices: Sequence[Any] | None = None) -> np.ndarray:
    """Raw latents (B, C, F, h, w) -> ``vae.decode(z).sample`` (B, 3, 4 (F - 1) + 1, 8h, 8w), float32 numpy.

    ``tiling``: see :func:`tiling_options`. ``on_chunk(done, total)`` after each temporal tile (once when the clip
    is one tile); ``devices``: spread spatial tiles / batch entries over these.
    """
    cfg = vae.cfg
    zz = channels_last(z, cfg.latent_channels, "HunyuanVideo VAE decode wants latents", "F")
    opts = tiling_options(tiling)
    _check_latent_tiles(cfg, opts)
    rt, frames = cfg.temporal_compression_ratio, zz.shape[1]
    tile, stride = opts.tile_sample_min_num_frames, opts.tile_sample_stride_num_frames
    time_tiles = (dict(tile=tile // rt, stride=stride // rt, out_stride=stride, out_blend=tile - stride,
                       out_frames=(frames - 1) * rt + 1) if opts.framewise and frames > tile // rt else None)
    out = _run_clip(zz, chunk_runner(vae, _decode_program, streams=False), decode_plan(cfg, zz.shape[2:4], opts),
                    devices, on_chunk, time_tiles)
    return np.ascontiguousarray(np.moveaxis(out, -1, 1))


def encode(vae: HunyuanVAE, x: Any, *, tiling: Any = None, on_chunk: Callable[[int, int], None] | None = None,
           devices: Sequence[Any] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Video (B, 3, T, H, W) in [-1, 1] -> ``vae.encode(x).latent_dist`` ``(mean, logvar)``, each
    (B, C, (T - 1) // 4 + 1, h, w) float32 numpy; ``logvar`` clamped to [-30, 20] as diffusers'
    ``DiagonalGaussianDistribution`` does. Tiling as :func:`decode`."""
    cfg = vae.cfg
    if vae.encoder is None:
        raise ValueError("this HunyuanVideo VAE was built without its encoder (with_encoder=False)")
    xx = channels_last(x, cfg.in_channels, "HunyuanVideo VAE encode wants video")
    opts = tiling_options(tiling)
    _check_latent_tiles(cfg, opts)
    rt, frames = cfg.temporal_compression_ratio, xx.shape[1]
    tile, stride = opts.tile_sample_min_num_frames, opts.tile_sample_stride_num_frames
    time_tiles = (dict(tile=tile, stride=stride, out_stride=stride // rt, out_blend=tile // rt - stride // rt,
                       out_frames=(frames - 1) // rt + 1) if opts.framewise and frames > tile else None)
    h = _run_clip(xx, chunk_runner(vae, _encode_program, streams=False), encode_plan(cfg, xx.shape[2:4], opts),
                  devices, on_chunk, time_tiles)
    return gaussian_posterior(h, cfg.latent_channels)
