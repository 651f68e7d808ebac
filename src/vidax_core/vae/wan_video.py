"""The Wan2.1 / Wan2.2 VAE as the generic pipeline sees it (:class:`vidax_core.model_api.VideoAutoencoder`).

Families that decode with the Wan VAE (Wan, Cosmos-Predict2.5) wrap the core model the same way: latent grid from
the config's compression factors, normalised latents in and out, frames in [0, 1], tiles and batch entries spread
over this host's devices unless the caller names others.
"""

from __future__ import annotations

from typing import Any, Mapping

SPATIAL_FACTOR = 8
TEMPORAL_FACTOR = 4


class WanVideoAutoencoder:
    """A loaded :class:`vidax_core.vae.wan21.WanVAE` (or Wan2.2's) with the pipeline-facing methods."""

    def __init__(self, vae: Any) -> None:
        self.vae = vae
        cfg = vae.cfg
        self.temporal_factor = int(getattr(cfg, "scale_factor_temporal", None) or TEMPORAL_FACTOR)
        self.spatial_factor = int(getattr(cfg, "scale_factor_spatial", None) or SPATIAL_FACTOR)

    def latent_shape(self, num_frames: int, height: int, width: int) -> tuple[int, int, int]:
        t, sp = self.temporal_factor, self.spatial_factor
        return (num_frames - 1) // t + 1, height // sp, width // sp

    def decode_video(self, latents, on_chunk=None, **params):
        """``params``: ``tiling`` (diffusers' ``enable_tiling`` knobs), ``devices``; others are ignored."""
        import jax

        from vidax_core.vae.wan21 import decode_video

        params.setdefault("devices", jax.local_devices())
        return decode_video(self.vae, latents, on_chunk=on_chunk, **params)

    def decode_stream(self, **params):
        """A decoder for latents that arrive window by window (:class:`vidax_core.vae.wan21.DecodeStream`): its
        ``push(latents)`` gives their frames, together exactly :meth:`decode_video` of the joined latents."""
        import jax

        from vidax_core.vae.wan21 import DecodeStream

        params.setdefault("devices", jax.local_devices())
        return DecodeStream(self.vae, **params)

    def encode_posterior(self, frames, on_chunk=None, **params):
        """Frames in [0, 1] (B, T, H, W, 3) -> the raw posterior ``(mean, logvar)`` (B, z, t, h, w), for a
        pipeline that samples it; :func:`vidax_core.vae.wan21.normalize_latents` normalises a sample."""
        import jax

        from vidax_core.vae.wan21 import encode_posterior

        params.setdefault("devices", jax.local_devices())
        return encode_posterior(self.vae, frames, on_chunk=on_chunk, **params)

    def encode_video(self, frames, on_chunk=None, **params):
        """Frames in [0, 1] (B, T, H, W, 3) -> normalised latents (the VAE's posterior mean)."""
        import jax

        from vidax_core.vae.wan21 import encode_video

        params.setdefault("devices", jax.local_devices())
        return encode_video(self.vae, frames, on_chunk=on_chunk, **params)


def load_wan_autoencoder(config: Mapping[str, Any], tensors: Mapping[str, Any], *,
                         with_encoder: bool) -> WanVideoAutoencoder:
    """Build the Wan2.1 (or Wan2.2, by its config) VAE of a diffusers ``vae/config.json`` from its tensors."""
    from vidax_core.vae.wan21 import WanVAEConfig

    cfg = WanVAEConfig.from_config(config)
    if cfg.is_residual or cfg.patch_size is not None:
        from vidax_core.vae.convert_wan22 import load_vae22

        return WanVideoAutoencoder(load_vae22(cfg, tensors, with_encoder=with_encoder))
    from vidax_core.vae.convert_wan21 import load_vae

    return WanVideoAutoencoder(load_vae(cfg, tensors, with_encoder=with_encoder))


def latent_grid(config: Mapping[str, Any], num_frames: int, height: int, width: int) -> tuple[int, int, int]:
    """The latent grid of a video from ``vae/config.json`` alone (no weights), as the loaded VAE reports it."""
    from types import SimpleNamespace

    from vidax_core.vae.wan21 import WanVAEConfig

    shell = WanVideoAutoencoder(SimpleNamespace(cfg=WanVAEConfig.from_config(config)))
    return shell.latent_shape(num_frames, height, width)
