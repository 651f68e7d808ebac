"""The CogVideoX VAE as the generic pipeline sees it (:class:`vidax_core.model_api.VideoAutoencoder`).

The sampler's latents are the pipelines' (B, F, C, H, W), scaled by the VAE's ``scaling_factor``; for 1.5
(temporal patch 2) F is padded to a multiple of the patch, and the pad frames sit in FRONT. Decoding drops them,
moves channels first, divides by ``scaling_factor`` (every model, 1.5 included), decodes and maps [-1, 1] to
[0, 1] frames. Encoding (image-to-video) returns the first frame's latent as the I2V pipeline scales it: times
``scaling_factor``, or divided by it when the config sets ``invert_scale_latents`` (1.5).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def latent_grid(num_frames: int, height: int, width: int, *, temporal: int = 4, spatial: int = 8,
                patch_t: int = 1) -> tuple[int, int, int]:
    """(latent frames padded to a multiple of ``patch_t``, height, width) as the pipelines compute them."""
    f = (num_frames - 1) // temporal + 1
    return f + (-f) % patch_t, height // spatial, width // spatial


def pad_frames(num_frames: int, *, temporal: int = 4, patch_t: int = 1) -> int:
    """How many latent frames the pipelines pad in front for the temporal patch (dropped before decoding)."""
    f = (num_frames - 1) // temporal + 1
    return (-f) % patch_t


class CogVideoXAutoencoder:
    """Wraps the VAE helper's model (:mod:`vidax_cogvideox.vae`) with the pipelines' layout and scaling."""

    def __init__(self, vae: Any, cfg: Any, patch_t: int = 1):
        self.vae, self.cfg, self.patch_t = vae, cfg, int(patch_t)
        self.spatial_factor = int(cfg.spatial_ratio)
        self.temporal_factor = int(cfg.temporal_compression_ratio)
        self.pad = 0

    def latent_shape(self, num_frames: int, height: int, width: int) -> tuple[int, int, int]:
        return latent_grid(num_frames, height, width, temporal=self.temporal_factor, spatial=self.spatial_factor,
                           patch_t=self.patch_t)

    def raw_latents(self, latents: np.ndarray, pad: int) -> np.ndarray:
        """Sampler latents (B, F, C, H, W) -> VAE latents (B, C, F - pad, H, W) / scaling_factor."""
        z = np.asarray(latents, np.float32)[:, pad:]
        return np.ascontiguousarray(z.transpose(0, 2, 1, 3, 4) / np.float32(self.cfg.scaling_factor))

    def decode_video(self, latents, on_chunk=None, **params):
        """``params``: ``tiling`` (diffusers' ``enable_tiling`` knobs), ``devices``, ``pad`` (front latent frames
        to drop; default: what the temporal patch padded for this frame count)."""
        import jax

        from . import vae as vae_lib

        pad = self.pad if params.get("pad") is None else int(params["pad"])
        devices = params.get("devices") or jax.local_devices()
        video = vae_lib.decode(self.vae, self.raw_latents(latents, pad), tiling=params.get("tiling"),
                               on_chunk=on_chunk, devices=devices)
        frames = np.clip(np.asarray(video, np.float32) * np.float32(0.5) + np.float32(0.5), 0.0, 1.0)
        return np.ascontiguousarray(frames.transpose(0, 2, 3, 4, 1))

    def for_frames(self, num_frames: int) -> "CogVideoXAutoencoder":
        """Record the run's pixel frame count: it fixes the front pad dropped at decode (a padded latent count
        alone does not say whether it was padded)."""
        self.pad = pad_frames(num_frames, temporal=self.temporal_factor, patch_t=self.patch_t)
        return self

    def scale_image_latents(self, z: np.ndarray) -> np.ndarray:
        s = np.float32(self.cfg.scaling_factor)
        return (z / s if self.cfg.invert_scale_latents else z * s).astype(np.float32)

    def encode_image(self, pixels: np.ndarray, seed: int) -> np.ndarray:
        """(1, 3, H, W) in [-1, 1] -> the scaled first-frame latent (1, 1, C, h, w): a posterior sample drawn with
        vidax's own seeded noise (the reference's generator draw cannot be reproduced), then scaled."""
        import jax

        from . import vae as vae_lib

        mean, logvar = (np.asarray(a, np.float32) for a in vae_lib.encode(self.vae, pixels[:, :, None]))
        key = jax.random.fold_in(jax.random.key(seed), 3)
        eps = np.asarray(jax.random.normal(key, mean.shape, np.float32))
        z = mean + np.exp(np.float32(0.5) * logvar) * eps
        return self.scale_image_latents(z).transpose(0, 2, 1, 3, 4)

    def encode_video(self, frames, on_chunk=None, **params):
        raise NotImplementedError("CogVideoX conditions on a single image (image-to-video); "
                                  "video input is not supported")
