"""The CogVideoX VAE (diffusers ``AutoencoderKLCogVideoX``): config, loading, decode and encode exactly as diffusers.

Public arrays are diffusers' channel-first ``(B, C, T, H, W)`` host arrays; inside, activations are channel-last.

* :func:`decode` takes raw VAE latents as ``vae.decode(z)`` does (the pipeline has already divided by, or for 1.5
  multiplied by, ``scaling_factor``) and returns ``.sample``: unclamped pixels, about [-1, 1], float32.
* :func:`encode` returns ``vae.encode(x).latent_dist``'s ``(mean, logvar)`` (logvar clamped to [-30, 20]).

Both run the reference's frame batches: the decoder takes 2 latent frames at a time (the first batch also takes the
odd one: 13 latent frames -> 3, 2, 2, 2, 2, 2), the encoder 8 frames (the first also takes the remainder: 49 ->
9, 8, 8, 8, 8, 8). Batch boundaries change the result (GroupNorm statistics span a batch), so they are the
reference's, with the causal-conv cache carried between batches. With ``tiling`` on they run per spatial tile, and
the tiles are laid out and blended as diffusers' ``tiled_decode`` / ``tiled_encode`` do, through
:func:`vidax_core.vae.tiling.run_tiled` (the blend reads tiles already blended, as the reference's does).

CogVideoX's tiling knobs are those of its ``enable_tiling``: ``tile_sample_min_height`` / ``_width`` (default half
the config's ``sample_height`` / ``sample_width``) and ``tile_overlap_factor_height`` / ``_width`` (default 1/6 and
1/5). Tiles start every ``int(tile * (1 - factor))`` input pixels, are blended over ``int(output tile * factor)``
output pixels and cropped to ``output tile - blend``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.io.arch_base import CheckedConfig
from vidax_core.errors import UserError
from vidax_core.vae.causal_conv import FeatureCache
from vidax_core.vae.chunks import channels_last, chunk_runner, gaussian_posterior
from vidax_core.vae.config_checks import block_problems
from vidax_core.vae.loader import vae_loader
from vidax_core.vae.tiling import TilePlan, TilingOptions, run_tiled

from .vae_blocks import Decoder, Encoder
from .vae_convert import DECODE_ONLY_IGNORE, DECODER_RULES, VAE_RULES

#: Latent frames per decoder batch and pixel frames per encoder batch (diffusers ``num_latent_frames_batch_size`` /
#: ``num_sample_frames_batch_size``).
DECODE_FRAME_BATCH = 2
ENCODE_FRAME_BATCH = 8

_DOWN = "CogVideoXDownBlock3D"
_UP = "CogVideoXUpBlock3D"


@dataclass(frozen=True)
class CogVideoXVAEConfig(CheckedConfig):
    """The fields of diffusers' ``AutoencoderKLCogVideoX`` config.json, under their names."""

    in_channels: int = 3
    out_channels: int = 3
    down_block_types: tuple[str, ...] = (_DOWN,) * 4
    up_block_types: tuple[str, ...] = (_UP,) * 4
    block_out_channels: tuple[int, ...] = (128, 256, 256, 512)
    latent_channels: int = 16
    layers_per_block: int = 3
    act_fn: str = "silu"
    norm_eps: float = 1e-6
    norm_num_groups: int = 32
    temporal_compression_ratio: float = 4
    sample_height: int = 480
    sample_width: int = 720
    scaling_factor: float = 1.15258426
    shift_factor: float | None = None
    latents_mean: tuple[float, ...] | None = None
    latents_std: tuple[float, ...] | None = None
    force_upcast: Any = True
    use_quant_conv: bool = False
    use_post_quant_conv: bool = False
    invert_scale_latents: bool = False
    dtype: Any = jnp.float32

    @property
    def spatial_ratio(self) -> int:
        return 2 ** (len(self.block_out_channels) - 1)

    @property
    def time_levels(self) -> int:
        """How many blocks halve time (diffusers ``int(log2(temporal_compression_ratio))``)."""
        return int(np.log2(self.temporal_compression_ratio))

    label = "the CogVideoX VAE config"

    def problems(self) -> list[str]:
        n = len(self.block_out_channels)
        if n == 0:
            return ["block_out_channels must not be empty"]
        problems = block_problems(self, _DOWN, _UP, "CogVideoX")
        if self.use_quant_conv or self.use_post_quant_conv:
            problems.append("use_quant_conv / use_post_quant_conv are not supported (no CogVideoX VAE has them)")
        r = float(self.temporal_compression_ratio)
        if r < 1 or 2 ** self.time_levels != r or self.time_levels > n - 1:
            problems.append(f"temporal_compression_ratio {self.temporal_compression_ratio} must be a power of 2 "
                            f"of at most {2 ** (n - 1)}")
        return problems


class CogVideoXVAE(nnx.Module):
    """``AutoencoderKLCogVideoX``; parameters start at zeros/ones, real ones come from :func:`load_vae`."""

    def __init__(self, cfg: CogVideoXVAEConfig, *, with_encoder: bool = True):
        cfg.check_supported()
        dtype = jnp.dtype(cfg.dtype)
        self.cfg = cfg
        common = dict(latent_channels=cfg.latent_channels, block_out_channels=cfg.block_out_channels,
                      layers_per_block=cfg.layers_per_block, groups=cfg.norm_num_groups, eps=cfg.norm_eps,
                      time_levels=cfg.time_levels, dtype=dtype)
        self.decoder = Decoder(out_channels=cfg.out_channels, **common)
        self.encoder = Encoder(in_channels=cfg.in_channels, **common) if with_encoder else None


load_vae = vae_loader(CogVideoXVAE, VAE_RULES, DECODER_RULES, decode_only_ignore=DECODE_ONLY_IGNORE, doc="""\
``load_vae(cfg, tensors, *, with_encoder=True, put=None)``: a diffusers ``AutoencoderKLCogVideoX`` state dict
(key -> array or lazy loader) as a live :class:`CogVideoXVAE`; every missing, unexpected or mis-shaped tensor is
reported at once. ``with_encoder=False`` builds the decoder only and skips the encoder's tensors.""")


# --------------------------------------------------------------------------------------------------------------
# tiling knobs and plans


@dataclass(frozen=True)
class CogVideoXTiling:
    """diffusers ``AutoencoderKLCogVideoX.enable_tiling`` knobs, resolved against a config."""

    enabled: bool
    tile_sample_min_height: int
    tile_sample_min_width: int
    tile_overlap_factor_height: float
    tile_overlap_factor_width: float


_KNOBS = ("tile_sample_min_height", "tile_sample_min_width", "tile_overlap_factor_height", "tile_overlap_factor_width")


def tiling_options(cfg: CogVideoXVAEConfig, tiling: Any = None) -> CogVideoXTiling:
    """``tiling`` (None/False: off; True: ``enable_tiling()``'s defaults; a mapping of knobs, on unless ``enabled``
    says otherwise; a :class:`TilingOptions`: its tile sizes, with overlap factors where it has them) -> knobs.

    Raises :class:`UserError` for unknown or out-of-range knobs (the strides of other VAEs do not apply here:
    CogVideoX overlaps tiles by a factor).
    """
    defaults = dict(enabled=False, tile_sample_min_height=cfg.sample_height // 2,
                    tile_sample_min_width=cfg.sample_width // 2, tile_overlap_factor_height=1 / 6,
                    tile_overlap_factor_width=1 / 5)
    if tiling is None or tiling is False:
        return CogVideoXTiling(**defaults)
    if tiling is True:
        return CogVideoXTiling(**{**defaults, "enabled": True})
    if isinstance(tiling, TilingOptions):
        given = {k: getattr(tiling, k) for k in _KNOBS if getattr(tiling, k, None) is not None}
        given["enabled"] = tiling.enabled
    elif isinstance(tiling, Mapping):
        given = dict(tiling)
        unknown = sorted(set(given) - set(_KNOBS) - {"enabled"})
        if unknown:
            raise UserError(f"VAE tiling option(s) {unknown} do not apply to CogVideoX; its knobs: {list(_KNOBS)}")
        given.setdefault("enabled", True)
    else:
        raise UserError(f"VAE tiling must be true/false or a mapping of {list(_KNOBS)}, got {tiling!r}")
    opts = CogVideoXTiling(**{**defaults, **given})
    r = cfg.spatial_ratio
    for name in _KNOBS[:2]:
        v = getattr(opts, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < r:
            raise UserError(f"VAE tiling: {name} must be an integer of at least {r} pixels, got {v!r}")
    for name, size in zip(_KNOBS[2:], _KNOBS[:2]):
        f = getattr(opts, name)
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 <= f < 1:
            raise UserError(f"VAE tiling: {name} must be a number in [0, 1), got {f!r}")
        if int(int(getattr(opts, size) / r) * (1 - f)) < 1:
            raise UserError(f"VAE tiling: {name} {f} leaves no stride between tiles of {getattr(opts, size)} "
                            "pixels; lower it or use larger tiles")
    return opts


def check_tiling(tiling: Any) -> None:
    """Validate a run's ``vae.tiling`` for CogVideoX before anything loads (one :class:`UserError` line)."""
    tiling_options(CogVideoXVAEConfig(), tiling)


def _encoded_size(n: int, levels: int) -> int:
    """Pixels -> latent positions along one axis: each down block pads 1 and convolves 3x3 with stride 2."""
    for _ in range(levels):
        n = (n + 1 - 3) // 2 + 1
    return n


def _cropped_total(size: int, stride: int, tile: int, out_of: Callable[[int], int], row_limit: int) -> int:
    """Output length along one axis: the sum of each tile's output, cropped to ``row_limit``."""
    return sum(min(row_limit, out_of(min(tile, size - i))) for i in range(0, size, stride))


def decode_plan(cfg: CogVideoXVAEConfig, latent_hw: Sequence[int], tiling: Any = None) -> TilePlan:
    """diffusers ``_decode`` / ``tiled_decode``: tiled when on and the latent is larger than a latent tile."""
    opts = tiling_options(cfg, tiling)
    r = cfg.spatial_ratio
    h, w = (int(v) for v in latent_hw)
    th, tw = int(opts.tile_sample_min_height / r), int(opts.tile_sample_min_width / r)
    if not (opts.enabled and (w > tw or h > th)):
        return TilePlan.whole((h, w), (h * r, w * r))
    sh = int(th * (1 - opts.tile_overlap_factor_height))
    sw = int(tw * (1 - opts.tile_overlap_factor_width))
    bh = int(opts.tile_sample_min_height * opts.tile_overlap_factor_height)
    bw = int(opts.tile_sample_min_width * opts.tile_overlap_factor_width)
    lh, lw = opts.tile_sample_min_height - bh, opts.tile_sample_min_width - bw
    out = (_cropped_total(h, sh, th, lambda n: n * r, lh), _cropped_total(w, sw, tw, lambda n: n * r, lw))
    return TilePlan((h, w), (th, tw), (sh, sw), (lh, lw), (bh, bw), out)


def encode_plan(cfg: CogVideoXVAEConfig, pixel_hw: Sequence[int], tiling: Any = None) -> TilePlan:
    """diffusers ``_encode`` / ``tiled_encode``: tiled when on and the frame is larger than a tile."""
    opts = tiling_options(cfg, tiling)
    r, levels = cfg.spatial_ratio, len(cfg.block_out_channels) - 1
    h, w = (int(v) for v in pixel_hw)
    th, tw = opts.tile_sample_min_height, opts.tile_sample_min_width
    enc = lambda n: _encoded_size(n, levels)  # noqa: E731
    if not (opts.enabled and (w > tw or h > th)):
        return TilePlan.whole((h, w), (enc(h), enc(w)))
    lth, ltw = int(th / r), int(tw / r)
    sh = int(th * (1 - opts.tile_overlap_factor_height))
    sw = int(tw * (1 - opts.tile_overlap_factor_width))
    bh = int(lth * opts.tile_overlap_factor_height)
    bw = int(ltw * opts.tile_overlap_factor_width)
    lh, lw = lth - bh, ltw - bw
    out = (_cropped_total(h, sh, th, enc, lh), _cropped_total(w, sw, tw, enc, lw))
    return TilePlan((h, w), (th, tw), (sh, sw), (lh, lw), (bh, bw), out)


def frame_batches(frames: int, size: int) -> list[tuple[int, int]]:
    """The reference's frame batches: ``size`` frames each, the first one also taking ``frames % size``."""
    rem = frames % size
    return [(size * i + (rem if i else 0), min(size * (i + 1) + rem, frames))
            for i in range(max(frames // size, 1))]


# --------------------------------------------------------------------------------------------------------------
# jitted chunk programs


def _decode_impl(graphdef, state, z, caches, *, first):
    cache = FeatureCache(caches)
    return nnx.merge(graphdef, state).decoder(z, cache), cache.outputs


def _encode_impl(graphdef, state, x, caches, *, first):
    cache = FeatureCache(caches)
    return nnx.merge(graphdef, state).encoder(x, cache), cache.outputs


# ``first`` is static but costs no compile: the first frame batch is the one without caches
_decode_chunk = jax.jit(_decode_impl, static_argnames=("graphdef", "first"))
_encode_chunk = jax.jit(_encode_impl, static_argnames=("graphdef", "first"))


def decode(vae: CogVideoXVAE, z: Any, *, tiling: Any = None, on_chunk: Callable[[int, int], None] | None = None,
           devices: Sequence[Any] | None = None) -> np.ndarray:
    """Raw latents (B, C, F, h, w) -> ``vae.decode(z).sample`` (B, 3, T, H, W), float32 numpy, unclamped.

    ``tiling``: see :func:`tiling_options`. ``on_chunk(done, total)`` after each frame batch; ``devices``: spread
    tiles / batch entries over these (one program per tile shape, compiled once).
    """
    zz = channels_last(z, vae.cfg.latent_channels, "CogVideoX VAE decode wants latents", "F")
    plan = decode_plan(vae.cfg, zz.shape[2:4], tiling)
    out = run_tiled(zz, chunk_runner(vae, _decode_chunk), plan=plan,
                    bounds=frame_batches(zz.shape[1], DECODE_FRAME_BATCH), devices=devices, on_chunk=on_chunk)
    return np.moveaxis(out, -1, 1)


def encode(vae: CogVideoXVAE, x: Any, *, tiling: Any = None, on_chunk: Callable[[int, int], None] | None = None,
           devices: Sequence[Any] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Video (B, 3, T, H, W) in [-1, 1] -> ``vae.encode(x).latent_dist`` ``(mean, logvar)``, each (B, C, t, h, w)
    float32 numpy; ``logvar`` clamped to [-30, 20] as diffusers' ``DiagonalGaussianDistribution`` does."""
    if vae.encoder is None:
        raise ValueError("this CogVideoX VAE was built without its encoder (with_encoder=False)")
    xx = channels_last(x, vae.cfg.in_channels, "CogVideoX VAE encode wants video")
    plan = encode_plan(vae.cfg, xx.shape[2:4], tiling)
    h = run_tiled(xx, chunk_runner(vae, _encode_chunk), plan=plan,
                  bounds=frame_batches(xx.shape[1], ENCODE_FRAME_BATCH), devices=devices, on_chunk=on_chunk)
    return gaussian_posterior(h, vae.cfg.latent_channels)
