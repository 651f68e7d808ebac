"""The LTX-Video VAE as the generic pipeline sees it (:class:`vidax_core.model_api.VideoAutoencoder`).

The pipeline hands it normalised latents: the packed tokens (B, F*H*W, C) of LTXPipeline, or the unpacked
(B, C, F, H, W) of LTXConditionPipeline. Decoding unpacks packed ones,
undoes the per-channel normalisation (``z * std / scaling_factor + mean``), mixes
in decode noise when the decoder is timestep-conditioned (``(1 - s) * z + s * noise`` with
``s = decode_noise_scale``, default the decode timestep; the noise is vidax's own seeded draw, so parity with a
diffusers run holds at ``s = 0``), decodes with ``timestep = decode_timestep`` and maps [-1, 1] to [0, 1] frames.
Encoding (image-to-video) returns a posterior sample normalised as the reference does (mean/std, scale 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


def pack(z: np.ndarray) -> np.ndarray:
    """(B, C, F, H, W) -> (B, F*H*W, C) (diffusers ``_pack_latents`` with patch size 1)."""
    b, c = z.shape[:2]
    return np.ascontiguousarray(np.moveaxis(z, 1, -1).reshape(b, -1, c))


def unpack(tokens: np.ndarray, grid: tuple[int, int, int]) -> np.ndarray:
    """(B, F*H*W, C) -> (B, C, F, H, W)."""
    b, _, c = tokens.shape
    return np.ascontiguousarray(np.moveaxis(np.asarray(tokens).reshape(b, *grid, c), -1, 1))


@dataclass
class DecodeSettings:
    """``options.decode_timestep`` / ``decode_noise_scale`` (None = the decode timestep) and the noise seed."""

    timestep: float = 0.0
    noise_scale: float | None = None
    seed: int = 0

    @classmethod
    def of(cls, run: Any) -> "DecodeSettings":
        o = run.options
        return cls(float(o.get("decode_timestep") or 0.0), o.get("decode_noise_scale"), int(run.sampling.seed))


class LTXVideoAutoencoder:
    """Wraps the VAE helper's model (``vidax_ltx.vae``) with the pipeline's token layout and latent statistics."""

    def __init__(self, vae: Any, cfg: Any, grid: tuple[int, int, int], decode: DecodeSettings):
        self.vae, self.cfg, self.grid, self.decode = vae, cfg, tuple(grid), decode
        self.spatial_factor = int(getattr(cfg, "spatial_compression_ratio", None) or 32)
        self.temporal_factor = int(getattr(cfg, "temporal_compression_ratio", None) or 8)

    def latent_shape(self, num_frames: int, height: int, width: int) -> tuple[int, int, int]:
        return latent_grid(num_frames, height, width, self.temporal_factor, self.spatial_factor)

    def for_call(self, run: Any) -> "LTXVideoAutoencoder":
        """This VAE (same weights and programs) with the call's decode settings: its seed and decode options."""
        import copy

        new = copy.copy(self)
        new.decode = DecodeSettings.of(run)
        return new

    def _stats(self) -> tuple[np.ndarray, np.ndarray, float]:
        c = self.cfg
        shape = (1, -1, 1, 1, 1)
        return (np.asarray(c.latents_mean, np.float32).reshape(shape),
                np.asarray(c.latents_std, np.float32).reshape(shape),
                float(c.scaling_factor))

    def raw_latents(self, latents: np.ndarray) -> np.ndarray:
        """Normalised latents, packed tokens (B, S, C) or unpacked (B, C, F, H, W) -> raw VAE latents
        (B, C, F, H, W), before any decode noise."""
        mean, std, scale = self._stats()
        z = np.asarray(latents, np.float32)
        z = z if z.ndim == 5 else unpack(z, self.grid)
        return (z * std / np.float32(scale) + mean).astype(np.float32)

    def decode_video(self, latents, on_chunk=None, **params):
        import jax

        from . import vae as vae_lib

        z = self.raw_latents(latents)
        timestep = None
        if getattr(self.cfg, "timestep_conditioning", False):
            d = self.decode
            s = d.timestep if d.noise_scale is None else d.noise_scale
            if s:
                key = jax.random.fold_in(jax.random.key(d.seed), 2)
                noise = np.asarray(jax.random.normal(key, z.shape, np.float32))
                z = ((1.0 - np.float32(s)) * z + np.float32(s) * noise).astype(np.float32)
            timestep = np.full((z.shape[0],), d.timestep, np.float32)
        params.setdefault("devices", jax.local_devices())
        video = vae_lib.decode(self.vae, z, timestep=timestep, tiling=params.get("tiling"), on_chunk=on_chunk,
                               devices=params["devices"])
        frames = np.clip(np.asarray(video, np.float32) * np.float32(0.5) + np.float32(0.5), 0.0, 1.0)
        return np.ascontiguousarray(frames.transpose(0, 2, 3, 4, 1))

    def encode_image(self, pixels: np.ndarray, seed: int) -> np.ndarray:
        """(1, 3, H, W) in [-1, 1] -> normalised first-frame latents (1, C, 1, h, w) (:meth:`encode_frames`)."""
        return self.encode_frames(pixels[:, :, None], seed)

    def encode_frames(self, pixels: np.ndarray, seed: int, item: int = 0) -> np.ndarray:
        """(1, 3, T, H, W) in [-1, 1], T = 8k+1 -> normalised latents (1, C, k+1, h, w): a posterior sample with
        vidax's own seeded noise ``jax.random.normal(fold_in(key(seed), 3), shape)`` (folded with ``item``, the
        conditioning item's index, after the first), then ``(z - mean) / std`` (the reference normalises with
        scale 1)."""
        import jax

        from . import vae as vae_lib
        from .seeds import item_key

        mean_z, logvar = (np.asarray(a, np.float32) for a in vae_lib.encode(self.vae, pixels))
        key = item_key(seed, 3, item)
        eps = np.asarray(jax.random.normal(key, mean_z.shape, np.float32))
        z = mean_z + np.exp(np.float32(0.5) * np.clip(logvar, -30.0, 20.0)) * eps  # diffusers' clamp
        mean, std, _ = self._stats()
        return ((z - mean) / std).astype(np.float32)

    def encode_video(self, frames, on_chunk=None, **params):
        raise NotImplementedError("LTX-Video conditions on a single image (image-to-video); "
                                  "video input is not supported")


def latent_grid(num_frames: int, height: int, width: int, temporal: int = 8, spatial: int = 32) -> tuple[int, int, int]:
    """(latent frames, height, width) as the pipelines compute them."""
    return (num_frames - 1) // temporal + 1, height // spatial, width // spatial
