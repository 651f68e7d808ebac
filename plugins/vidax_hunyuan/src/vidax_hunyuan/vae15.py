"""The HunyuanVideo-1.5 VAE (diffusers ``AutoencoderKLHunyuanVideo15``): config, loading, decode and encode exactly
as diffusers, 32 latent channels, 16x spatial and 4x temporal compression (layers in :mod:`.vae15_blocks`).

Public arrays are diffusers' channel-first ``(B, C, T, H, W)`` host arrays; inside, activations are channel-last.

* :func:`decode` takes raw latents as ``vae.decode(z)`` does (the pipeline has already divided by
  ``scaling_factor``) and returns ``.sample``: unclamped pixels, about [-1, 1], float32.
* :func:`encode` returns ``vae.encode(x).latent_dist``'s ``(mean, logvar)`` (logvar clamped to [-30, 20]).

Tiling follows diffusers: in space only (the mid-block attention and the clip's frames run at once; there is no
temporal tiling in this VAE), off unless asked for (``enable_tiling``; the diffusers pipeline's examples turn it on
and a 720p clip needs it). A tiled decode cuts the latent into tiles of ``tile_latent_min`` positions every
``int(tile_latent_min * (1 - tile_overlap_factor))``, blends the decoded tiles over
``int(tile_sample_min * tile_overlap_factor)`` pixels and keeps ``tile_sample_min`` less that blend of each; a tiled
encode does the same from pixels to latents (:class:`HunyuanVideo15Tiling`, :func:`decode_plan`, :func:`encode_plan`).
The smaller edge tiles are padded to the tile shape and run the same compiled program as the others, told their real
area (:class:`vidax_core.vae.tile_area.TileArea`: the replicate-padded convs see the real edge repeated into the
padding, the attention sees real keys only), so a tiled decode or encode compiles once, whatever its tile grid;
their outputs are cropped back to the real area. Encode tiles can be padded too: their real sizes are multiples of
16 pixels (the frame's sides and the tile stride are), so they stay whole through every 2x downsampling.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.errors import UserError
from vidax_core.io.arch_base import CheckedConfig
from vidax_core.vae.chunks import channels_last, chunk_runner, gaussian_posterior
from vidax_core.vae.hunyuan_video import HunyuanVideoAutoencoder, latent_grid
from vidax_core.vae.loader import vae_loader
from vidax_core.vae.tile_area import tile_area
from vidax_core.vae.tiling import TilePlan, knob, run_tiled

from .hunyuan15_presets import TILING15
from .vae15_blocks import Decoder, Encoder, down_levels, up_levels
from .vae15_convert import DECODE_ONLY_IGNORE, DECODER_RULES, VAE_RULES


def _pow2(n: int) -> bool:
    return n >= 1 and not n & (n - 1)


@dataclass(frozen=True)
class HunyuanVAE15Config(CheckedConfig):
    """The fields of diffusers' ``AutoencoderKLHunyuanVideo15`` config.json, under their names, with its defaults."""

    in_channels: int = 3
    out_channels: int = 3
    latent_channels: int = 32
    block_out_channels: tuple[int, ...] = (128, 256, 512, 1024, 1024)
    layers_per_block: int = 2
    spatial_compression_ratio: int = 16
    temporal_compression_ratio: int = 4
    downsample_match_channel: bool = True
    upsample_match_channel: bool = True
    scaling_factor: float = 1.03682
    dtype: Any = jnp.float32

    label = "the HunyuanVideo-1.5 VAE config"

    def problems(self) -> list[str]:
        """Layouts diffusers itself cannot run (a channel count its reshapes do not divide) or vidax does not build."""
        chans, lat = list(self.block_out_channels), self.latent_channels
        s, t = self.spatial_compression_ratio, self.temporal_compression_ratio
        n, out = len(chans), []
        if not _pow2(s) or not _pow2(t) or t > s:
            return [f"spatial / temporal compression {s} / {t} must be powers of 2, temporal at most spatial"]
        if n <= int(np.log2(s)):
            out.append(f"{n} block_out_channels cannot hold {int(np.log2(s))} downsampling levels plus the last block")
        if chans[-1] % (2 * lat):
            out.append(f"block_out_channels[-1] {chans[-1]} must be a multiple of 2 x latent_channels {lat}")
        for i, (down, temporal) in enumerate(down_levels(n, s, t)):
            if down and i + 1 < n:
                cout, f = (chans[i + 1] if self.downsample_match_channel else chans[i]), (8 if temporal else 4)
                if cout % f or (f * chans[i]) % cout or (temporal and (f * chans[i] // cout) % 2):
                    out.append(f"encoder block {i}: {chans[i]} -> {cout} channels does not pack by {f}")
        rev = chans[::-1]
        for i, (up, temporal) in enumerate(up_levels(n, s, t)):
            if up and i + 1 < n:
                cout, f = (rev[i + 1] if self.upsample_match_channel else rev[i]), (8 if temporal else 4)
                if (f * cout) % rev[i] or (temporal and (f * cout // rev[i]) % 2):
                    out.append(f"decoder block {i}: {rev[i]} -> {cout} channels does not unpack by {f}")
        return out


class HunyuanVAE15(nnx.Module):
    """``AutoencoderKLHunyuanVideo15``; parameters start at zeros/ones, real ones come from :func:`load_vae15`."""

    def __init__(self, cfg: HunyuanVAE15Config, *, with_encoder: bool = True):
        cfg.check_supported()
        dtype = jnp.dtype(cfg.dtype)
        self.cfg = cfg
        common = dict(latent_channels=cfg.latent_channels, block_out_channels=cfg.block_out_channels,
                      layers_per_block=cfg.layers_per_block, spatial_ratio=cfg.spatial_compression_ratio,
                      temporal_ratio=cfg.temporal_compression_ratio, dtype=dtype)
        self.decoder = Decoder(out_channels=cfg.out_channels, match_channel=cfg.upsample_match_channel, **common)
        self.encoder = (Encoder(in_channels=cfg.in_channels, match_channel=cfg.downsample_match_channel, **common)
                        if with_encoder else None)


load_vae15 = vae_loader(HunyuanVAE15, VAE_RULES, DECODER_RULES, decode_only_ignore=DECODE_ONLY_IGNORE, doc="""\
``load_vae15(cfg, tensors, *, with_encoder=True, put=None)``: a diffusers ``AutoencoderKLHunyuanVideo15`` state
dict (key -> array or lazy loader) as a live :class:`HunyuanVAE15`; every missing, unexpected or mis-shaped tensor
is reported at once. ``with_encoder=False`` skips the encoder's tensors.""")


# --------------------------------------------------------------------------------------------------------------
# tiling knobs and plans



@dataclass(frozen=True)
class HunyuanVideo15Tiling:
    """diffusers ``AutoencoderKLHunyuanVideo15.enable_tiling`` knobs with its defaults (``enabled``: ``use_tiling``).

    ``tile_latent_min_*`` None: the model's own ``256 // spatial_compression_ratio`` (diffusers sets it once in
    ``__init__`` and ``enable_tiling`` does not recompute it from a new ``tile_sample_min_*``)."""

    enabled: bool = False
    tile_sample_min_height: int = 256
    tile_sample_min_width: int = 256
    tile_latent_min_height: int | None = None
    tile_latent_min_width: int | None = None
    tile_overlap_factor: float = 0.25

    def latent_min(self, ratio: int) -> tuple[int, int]:
        return (self.tile_latent_min_height or 256 // ratio, self.tile_latent_min_width or 256 // ratio)


def tiling_options(tiling: Any = None) -> HunyuanVideo15Tiling:
    """``tiling``: None/False -> off (diffusers' default); True -> ``enable_tiling()``; a mapping of
    :class:`HunyuanVideo15Tiling` knobs (on unless ``enabled`` says otherwise). Raises :class:`UserError` for bad
    knobs."""
    if tiling is None or tiling is False:
        return HunyuanVideo15Tiling()
    if tiling is True:
        return HunyuanVideo15Tiling(enabled=True)
    if isinstance(tiling, HunyuanVideo15Tiling):
        return tiling
    if not isinstance(tiling, Mapping):
        raise UserError(f"VAE tiling must be true/false or a mapping of {list(TILING15)}, got {tiling!r:.60}")
    unknown = sorted(str(k) for k in tiling if k not in TILING15)
    if unknown:
        raise UserError(f"VAE tiling option(s) {unknown} do not apply to HunyuanVideo-1.5; its knobs: "
                        f"{list(TILING15)}")
    try:
        kw = {k: knob(k, v, TILING15[k]) for k, v in tiling.items()}
    except ValueError as exc:
        raise UserError(str(exc)) from None
    return replace(HunyuanVideo15Tiling(enabled=True), **kw)



def _axis_plan(sample: int, latent: int, f: float, ratio: int, decode: bool, axis: str
               ) -> tuple[int, int, int, int]:
    """(input tile, input stride, output blend, output kept) along one axis, as diffusers computes them; a
    :class:`UserError` where those do not tile the output edge to edge (kept != stride in output units)."""
    if decode:
        tile, stride, blend = latent, int(latent * (1 - f)), int(sample * f)
        keep, out_stride = sample - blend, stride * ratio
    else:
        tile, stride, blend = sample, int(sample * (1 - f)), int(latent * f)
        keep, out_stride = latent - blend, stride
        if stride % ratio or tile % ratio:
            raise UserError(f"VAE tiling: encode tiles of {tile} pixels every {stride} along {axis} must be multiples "
                            f"of the {ratio}x compression")
        out_stride //= ratio
    if stride < 1 or keep != out_stride:
        raise UserError(
            f"VAE tiling along {axis}: tile_sample_min {sample}, tile_latent_min {latent} and tile_overlap_factor "
            f"{f:g} do not fit ({'decode' if decode else 'encode'} tiles every {stride} keep {keep} instead of "
            f"{out_stride}); set tile_latent_min_{axis} to tile_sample_min_{axis} / {ratio}")
    return tile, stride, blend, keep


def _plan(opts: HunyuanVideo15Tiling, size_hw: Sequence[int], ratio: int, decode: bool) -> TilePlan:
    h, w = (int(v) for v in size_hw)
    out = (h * ratio, w * ratio) if decode else (h // ratio, w // ratio)
    lat = opts.latent_min(ratio)
    limit = lat if decode else (opts.tile_sample_min_height, opts.tile_sample_min_width)
    if not (opts.enabled and (h > limit[0] or w > limit[1])):
        return TilePlan.whole((h, w), out)
    ah = _axis_plan(opts.tile_sample_min_height, lat[0], opts.tile_overlap_factor, ratio, decode, "height")
    aw = _axis_plan(opts.tile_sample_min_width, lat[1], opts.tile_overlap_factor, ratio, decode, "width")
    return TilePlan((h, w), (ah[0], aw[0]), (ah[1], aw[1]), (ah[3], aw[3]), (ah[2], aw[2]), out)


def decode_plan(cfg: HunyuanVAE15Config, latent_hw: Sequence[int], opts: HunyuanVideo15Tiling) -> TilePlan:
    """diffusers ``_decode`` / ``tiled_decode``: tiled when on and the latent exceeds ``tile_latent_min``."""
    return _plan(opts, latent_hw, cfg.spatial_compression_ratio, True)


def encode_plan(cfg: HunyuanVAE15Config, pixel_hw: Sequence[int], opts: HunyuanVideo15Tiling) -> TilePlan:
    """diffusers ``_encode`` / ``tiled_encode``: tiled when on and the frame exceeds ``tile_sample_min``."""
    return _plan(opts, pixel_hw, cfg.spatial_compression_ratio, False)


# --------------------------------------------------------------------------------------------------------------
# jitted programs


def _decode_impl(graphdef, state, z, area=None):
    """``area``: None, or the (B, 2) real latent rows and columns of padded tiles (one program for every tile)."""
    return nnx.merge(graphdef, state).decoder(z, tile_area(z, area))


def _encode_impl(graphdef, state, x, area=None):
    """``area``: None, or the (B, 2) real pixel rows and columns of padded tiles (multiples of 16)."""
    return nnx.merge(graphdef, state).encoder(x, tile_area(x, area))


_decode_program = jax.jit(_decode_impl, static_argnames=("graphdef",))
_encode_program = jax.jit(_encode_impl, static_argnames=("graphdef",))


def _run(x: np.ndarray, program: Callable, vae: HunyuanVAE15, plan: TilePlan, devices, on_chunk) -> np.ndarray:
    """The whole clip through ``program``, tile by tile as ``plan`` says, edge tiles padded to the tile shape (one
    program for all); ``on_chunk(1, 1)`` once it is back."""
    return run_tiled(x, chunk_runner(vae, program, streams=False), plan=plan, bounds=[(0, x.shape[1])],
                     devices=devices, on_chunk=on_chunk, pad_tiles=True)


def decode(vae: HunyuanVAE15, z: Any, *, tiling: Any = None, on_chunk: Callable[[int, int], None] | None = None,
           devices: Sequence[Any] | None = None) -> np.ndarray:
    """Raw latents (B, C, F, h, w) -> ``vae.decode(z).sample`` (B, 3, 4 (F - 1) + 1, 16h, 16w), float32 numpy.

    ``tiling``: see :func:`tiling_options`. ``on_chunk(1, 1)`` when done; ``devices``: spread spatial tiles / batch
    entries over these.
    """
    cfg = vae.cfg
    zz = channels_last(z, cfg.latent_channels, "HunyuanVideo-1.5 VAE decode wants latents", "F")
    plan = decode_plan(cfg, zz.shape[2:4], tiling_options(tiling))
    out = _run(zz, _decode_program, vae, plan, devices, on_chunk)
    return np.ascontiguousarray(np.moveaxis(out, -1, 1), dtype=np.float32)


def encode(vae: HunyuanVAE15, x: Any, *, tiling: Any = None, on_chunk: Callable[[int, int], None] | None = None,
           devices: Sequence[Any] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Pixels (B, 3, 1 + 4k, H, W) in [-1, 1], H and W multiples of 16 -> the posterior's ``(mean, logvar)``
    (B, C, 1 + k, H / 16, W / 16), float32 numpy."""
    cfg = vae.cfg
    if vae.encoder is None:
        raise ValueError("this HunyuanVideo-1.5 VAE was built without its encoder (with_encoder=False)")
    xx = channels_last(x, cfg.in_channels, "HunyuanVideo-1.5 VAE encode wants pixels")
    r, rt = cfg.spatial_compression_ratio, cfg.temporal_compression_ratio
    t, h, w = xx.shape[1:4]
    if (t - 1) % rt or h % r or w % r:
        raise UserError(f"HunyuanVideo-1.5 VAE encode wants 1 + {rt}k frames and sides that are multiples of {r}, "
                        f"got {t} frames of {h}x{w}")
    plan = encode_plan(cfg, (h, w), tiling_options(tiling))
    moments = _run(xx, _encode_program, vae, plan, devices, on_chunk)
    return gaussian_posterior(moments, cfg.latent_channels)


# --------------------------------------------------------------------------------------------------------------
# the pipeline's view (vidax_core.model_api.VideoAutoencoder)


def latent_grid15(config: Mapping[str, Any], num_frames: int, height: int, width: int) -> tuple[int, int, int]:
    """(latent frames, height, width) of a video from ``vae/config.json`` alone (the pipeline's ``prepare_latents``)."""
    return latent_grid(config, num_frames, height, width, spatial=16)


class HunyuanVideo15Autoencoder(HunyuanVideoAutoencoder):
    """The VAE as the generic pipeline sees it, like :class:`vidax_core.vae.hunyuan_video.HunyuanVideoAutoencoder`.

    The DiT's latents are the raw latents times ``scaling_factor`` (no shift): ``decode_video`` divides by it,
    decodes and returns ``video / 2 + 0.5`` clipped to [0, 1], (B, T, H, W, 3); ``encode_video`` (I2V's first
    frame) maps [0, 1] frames to ``2 x - 1`` and returns the posterior mean times ``scaling_factor``
    (``retrieve_latents(..., "argmax")``). ``params``: ``tiling`` (:func:`tiling_options`), ``devices``.
    """

    spatial_compression = 16

    def _decode(self, z, **kw):
        return decode(self.vae, z, **kw)

    def _encode(self, x, **kw):
        return encode(self.vae, x, **kw)


def load_autoencoder15(config: Mapping[str, Any], tensors: Mapping[str, Any], *, with_encoder: bool
                       ) -> HunyuanVideo15Autoencoder:
    """``vae/config.json`` and its safetensors (diffusers key names) -> the pipeline's autoencoder; as
    :func:`vidax_core.vae.hunyuan_video.load_autoencoder` for 1.0."""
    cfg = HunyuanVAE15Config.from_config(config)
    return HunyuanVideo15Autoencoder(load_vae15(cfg, tensors, with_encoder=with_encoder), config)
