"""LTX-2.x video VAE (diffusers ``AutoencoderKLLTX2Video``): the LTX-Video 0.9.5+ VAE of :mod:`vidax_ltx.vae`
read with LTX-2's config, key names and single-file layout.

What differs from 0.9.x is configuration, not math: the encoder's ``conv_in`` goes to ``latent_channels`` and its
down blocks then follow ``block_out_channels`` (:meth:`LTX2VAEConfig.encoder_widths`), every conv's spatial
padding is a config choice (the decoder pads by reflection in LTX-2.0), the up blocks' strides come from
``upsample_type``, and the resnets' 1x1 shortcut is a plain conv (its key lacks ``.conv``). Norms (gain-free
per-channel RMS, eps 1e-8), causal time padding, the (c, t, w, h) patch order, the group-mean downsampler residual,
the timestep-conditioned decoder (2.3 / 2.5) and the one broadcast log-variance channel are 0.9.x's. So is the tiled
decode / encode: edge tiles padded to the tile shape, one compiled program for every tile (the reflect-padded 2.0
decoder's padding holds the real edge mirrored, :meth:`vidax_core.vae.tile_area.TileArea.fill_reflect`).

Public interface (what the LTX-2 pipeline calls):

* :meth:`LTX2VAEConfig.from_config` (a ``vae/config.json`` dict) and :func:`load_ltx2_vae` (a diffusers state dict,
  or the original single-file one, ``vae.*`` keys or the bare file ``vae/ltx-2*-video-vae*.safetensors``; also
  fills ``cfg.latents_mean`` / ``cfg.latents_std``);
* :func:`decode` / :func:`encode` / :func:`decode_plan` / :func:`encode_plan`: those of :mod:`vidax_ltx.vae` (raw
  latents (B, 128, F, h, w) -> ``vae.decode(z, temb).sample``; video -> the posterior's ``(mean, logvar)``, whose
  mean is what image-to-video takes, ``retrieve_latents(..., "argmax")``; ``tiling`` as diffusers'
  ``enable_tiling``);
* :func:`normalize_latents` / :func:`denormalize_latents` (LTX2Pipeline's ``_normalize_latents`` /
  ``_denormalize_latents``) and :func:`mix_decode_noise` (its decode-noise step, applied to *normalised* latents
  before denormalising, unlike LTX-Video 0.9.x).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import numpy as np

from .vae import (PUBLISHED_VAE_CONFIG, LTXVAE, LTXVAEConfig, decode, decode_plan, encode, encode_plan, load_vae,
                  read_latent_stats, tiling_options)
from .vae_convert import original_vae_tensors

__all__ = ["PUBLISHED_LTX2_VAE_CONFIG", "LTX2VAEConfig", "load_ltx2_vae", "load_ltx2_latent_stats", "decode", "encode",
           "decode_plan", "encode_plan", "tiling_options", "normalize_latents", "denormalize_latents",
           "mix_decode_noise", "is_original_layout"]

#: The published LTX-2.0 video VAE ``config.json`` (diffusers' ``convert_ltx2_to_diffusers.py``, version "2.0"):
#: LTX-Video 0.9.8's published VAE with the encoder's first width moved to ``latent_channels`` (the same 128), LTX-2
#: block types, no timestep conditioning and a reflect-padded decoder.
PUBLISHED_LTX2_VAE_CONFIG: dict[str, Any] = dict(
    PUBLISHED_VAE_CONFIG, block_out_channels=PUBLISHED_VAE_CONFIG["block_out_channels"][1:],
    down_block_types=("LTX2VideoDownBlock3D",) * 4, timestep_conditioning=False,
    encoder_spatial_padding_mode="zeros", decoder_spatial_padding_mode="reflect",
)

#: Config keys the reference accepts as one bool for every block (expanded to a tuple), with the block count.
_BOOL_LISTS = {"spatio_temporal_scaling": lambda c: len(c["layers_per_block"]) - 1,
               "decoder_spatio_temporal_scaling": lambda c: len(c["decoder_layers_per_block"]) - 1,
               "decoder_inject_noise": lambda c: len(c["decoder_layers_per_block"]),
               "upsample_residual": lambda c: len(c["decoder_layers_per_block"]) - 1}


@dataclass(eq=False)
class LTX2VAEConfig(LTXVAEConfig):
    """diffusers ``AutoencoderKLLTX2Video`` config.json fields with the reference's defaults, plus the latent
    statistics :func:`load_ltx2_vae` fills."""

    block_out_channels: tuple[int, ...] = (256, 512, 1024, 2048)
    down_block_types: tuple[str, ...] = ("LTX2VideoDownBlock3D",) * 4
    decoder_block_out_channels: tuple[int, ...] = (256, 512, 1024)
    layers_per_block: tuple[int, ...] = (4, 6, 6, 2, 2)
    decoder_layers_per_block: tuple[int, ...] = (5, 5, 5, 5)
    spatio_temporal_scaling: tuple[bool, ...] = (True, True, True, True)
    decoder_spatio_temporal_scaling: tuple[bool, ...] = (True, True, True)
    decoder_inject_noise: tuple[bool, ...] = (False, False, False, False)
    downsample_type: tuple[str, ...] = ("spatial", "temporal", "spatiotemporal", "spatiotemporal")
    upsample_type: tuple[str, ...] | None = ("spatiotemporal", "spatiotemporal", "spatiotemporal")
    upsample_residual: tuple[bool, ...] = (True, True, True)
    upsample_factor: tuple[int, ...] = (2, 2, 2)
    decoder_causal: bool = True
    encoder_spatial_padding_mode: str = "zeros"
    decoder_spatial_padding_mode: str = "reflect"

    ENCODER_BLOCK: ClassVar[str] = "LTX2VideoDownBlock3D"
    GENERATION: ClassVar[str] = "LTX-2"

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> "LTX2VAEConfig":
        """From a diffusers config.json dict (unknown keys ignored; a single bool for a per-block list is
        expanded as the reference does); compression ratios resolved as in :meth:`LTXVAEConfig.from_config`
        (the published config sets them: 32 and 8)."""
        config = dict(config)
        defaults = {f.name: f.default for f in dataclasses.fields(cls)}
        for key, count in _BOOL_LISTS.items():
            if isinstance(config.get(key), bool):
                sizes = {k: config.get(k) or defaults[k] for k in ("layers_per_block", "decoder_layers_per_block")}
                config[key] = (config[key],) * count(sizes)
        return super().from_config(config, **overrides)

    def encoder_widths(self) -> tuple[int, ...]:
        """``LTX2VideoEncoder3d``: conv_in to ``latent_channels``, then one down block per ``block_out_channels``
        entry."""
        return (int(self.latent_channels), *(int(c) for c in self.block_out_channels))


def is_original_layout(tensors: Mapping[str, Any]) -> bool:
    """Whether ``tensors`` use the original (ltx-core) names: ``vae.``-prefixed keys of a whole-model file, or a
    bare VAE file's ``per_channel_statistics`` / ``res_blocks``."""
    return any(k.startswith("vae.") or k.startswith("per_channel_statistics.") or ".res_blocks." in k
               for k in tensors)


def load_ltx2_vae(cfg: LTX2VAEConfig, tensors: Mapping[str, Any], *, with_encoder: bool = True, put=None) -> LTXVAE:
    """A diffusers ``AutoencoderKLLTX2Video`` state dict, or an original single-file one (renamed the way
    diffusers' ``convert_ltx2_vae_to_diffusers`` does; other models' keys in a whole-model file are left out), ->
    a live VAE; ``latents_mean`` / ``latents_std`` go to ``cfg``. Every VAE key must be used (the encoder's are
    dropped when ``with_encoder`` is False)."""
    return load_vae(cfg, _diffusers_names(tensors), with_encoder=with_encoder, put=put)


def load_ltx2_latent_stats(cfg: LTX2VAEConfig, tensors: Mapping[str, Any]) -> None:
    """Only ``latents_mean`` / ``latents_std`` into ``cfg`` (a run that decodes with the diffusion decoder and
    encodes no image needs nothing else of the VAE); either layout."""
    read_latent_stats(cfg, _diffusers_names(tensors))


def _diffusers_names(tensors: Mapping[str, Any]) -> Mapping[str, Any]:
    if is_original_layout(tensors):
        if not any(k.startswith("vae.") for k in tensors):
            tensors = {"vae." + k: v for k, v in tensors.items()}
        tensors = original_vae_tensors(tensors, ltx2=True)
    return tensors


def _stats(cfg: LTXVAEConfig) -> tuple[np.ndarray, np.ndarray, np.float32]:
    if cfg.latents_mean is None or cfg.latents_std is None:
        raise ValueError("the VAE's latent statistics are unknown: load the VAE (load_ltx2_vae) first")
    shape = (1, -1, 1, 1, 1)
    return (np.asarray(cfg.latents_mean, np.float32).reshape(shape),
            np.asarray(cfg.latents_std, np.float32).reshape(shape), np.float32(cfg.scaling_factor))


def normalize_latents(z: Any, cfg: LTXVAEConfig) -> np.ndarray:
    """Raw VAE latents (B, C, F, H, W) -> the DiT's space: ``(z - mean) * scaling_factor / std`` (LTX2Pipeline's
    ``_normalize_latents``; image-to-video passes scaling 1, which the published config's 1.0 equals)."""
    mean, std, scale = _stats(cfg)
    return ((np.asarray(z, np.float32) - mean) * scale / std).astype(np.float32)


def denormalize_latents(z: Any, cfg: LTXVAEConfig) -> np.ndarray:
    """Normalised latents (B, C, F, H, W) -> raw VAE latents: ``z * std / scaling_factor + mean`` (what
    ``output_type="latent"`` returns and :func:`decode` takes)."""
    mean, std, scale = _stats(cfg)
    return (np.asarray(z, np.float32) * std / scale + mean).astype(np.float32)


def mix_decode_noise(z: Any, noise: Any, scale: Any) -> np.ndarray:
    """LTX2Pipeline's decode noise for a timestep-conditioned VAE: ``(1 - s) * z + s * noise`` on the normalised
    latents (B, C, F, H, W), ``s`` a scalar or one per batch entry (``decode_noise_scale``, by default the decode
    timestep); denormalise afterwards."""
    z = np.asarray(z, np.float32)
    s = np.asarray(scale, np.float32).reshape(-1, *([1] * (z.ndim - 1)))
    return ((1 - s) * z + s * np.asarray(noise, np.float32)).astype(np.float32)
