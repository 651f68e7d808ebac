"""The HunyuanVideo VAE as the generic pipeline sees it (:class:`vidax_core.model_api.VideoAutoencoder`).

HunyuanVideo (channel-first latents) and Kandinsky 5 (channel-last latents) decode with it. The DiT's latents are
the VAE's raw latents times ``scaling_factor`` (the pipelines divide by it before ``vae.decode``), in the family's
layout: ``(B, C, F, h, w)``, or ``(B, F, h, w, C)`` with ``channels_last``. Frames come back as ``video / 2 + 0.5``
clipped to [0, 1], (B, T, H, W, 3), as the pipelines' video processor returns them. Encoding (I2V) is the posterior
mean (``retrieve_latents(..., "argmax")``) times ``scaling_factor``, in the same layout. Tiling follows diffusers
(time tiles above 16 frames by default, see :func:`vidax_core.vae.hunyuan.tiling_options`).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np


def latent_grid(config: Mapping[str, Any], num_frames: int, height: int, width: int, *,
                spatial: int = 8) -> tuple[int, int, int]:
    """(latent frames, height, width) of a video from ``vae/config.json`` alone; ``spatial``: the compression
    when the config does not say (8 for 1.0, 16 for 1.5)."""
    from vidax_core.io.arch import config_value

    t = config_value(config, "temporal_compression_ratio", int, 4)
    s = config_value(config, "spatial_compression_ratio", int, spatial)
    return (num_frames - 1) // t + 1, height // s, width // s


class HunyuanVideoAutoencoder:
    """The scaling, pixel range and layout around a HunyuanVideo VAE's ``decode`` / ``encode``; a subclass names
    another VAE's functions (:meth:`_decode`, :meth:`_encode`) and default compression. ``channels_last``: the
    family's latents are ``(B, F, h, w, C)`` (Kandinsky 5), else ``(B, C, F, h, w)`` (HunyuanVideo)."""

    spatial_compression = 8

    def __init__(self, vae: Any, config: Mapping[str, Any], *, channels_last: bool = False) -> None:
        self.vae = vae
        self.config = dict(config)
        self.scaling_factor = float(vae.cfg.scaling_factor)
        self.channels_last = channels_last

    def latent_shape(self, num_frames: int, height: int, width: int) -> tuple[int, int, int]:
        return latent_grid(self.config, num_frames, height, width, spatial=self.spatial_compression)

    def _decode(self, z, **kw):
        from vidax_core.vae.hunyuan import decode

        return decode(self.vae, z, **kw)

    def _encode(self, x, **kw):
        from vidax_core.vae.hunyuan import encode

        return encode(self.vae, x, **kw)

    def decode_video(self, latents, on_chunk=None, **params):
        """Latents in the family's layout -> frames; ``params``: ``tiling`` (diffusers' ``enable_tiling`` knobs),
        ``devices``; others are ignored."""
        import jax

        z = np.asarray(latents, np.float32) / np.float32(self.scaling_factor)
        if self.channels_last:
            z = np.moveaxis(z, -1, 1)
        video = self._decode(z, tiling=params.get("tiling"), on_chunk=on_chunk,
                             devices=params.get("devices") or jax.local_devices())
        frames = np.clip(video / 2.0 + 0.5, 0.0, 1.0)
        return np.ascontiguousarray(np.moveaxis(frames, 1, -1), dtype=np.float32)

    def encode_video(self, frames, on_chunk=None, **params):
        """Frames in [0, 1] (B, T, H, W, 3) -> the posterior mean times ``scaling_factor``, in the family's
        layout."""
        import jax

        x = np.moveaxis(np.asarray(frames, np.float32), -1, 1) * 2.0 - 1.0
        mean, _ = self._encode(x, tiling=params.get("tiling"), on_chunk=on_chunk,
                               devices=params.get("devices") or jax.local_devices())
        mean = mean * np.float32(self.scaling_factor)
        return np.ascontiguousarray(np.moveaxis(mean, 1, -1)) if self.channels_last else mean


def load_autoencoder(config: Mapping[str, Any], tensors: Mapping[str, Any], *, with_encoder: bool,
                     channels_last: bool = False) -> HunyuanVideoAutoencoder:
    """A diffusers ``AutoencoderKLHunyuanVideo`` (``vae/config.json`` and its tensors) as the pipeline's
    autoencoder, in the family's latent layout."""
    from vidax_core.vae.hunyuan import HunyuanVAEConfig, load_vae

    cfg = HunyuanVAEConfig.from_config(config)
    return HunyuanVideoAutoencoder(load_vae(cfg, tensors, with_encoder=with_encoder), config,
                                   channels_last=channels_last)
