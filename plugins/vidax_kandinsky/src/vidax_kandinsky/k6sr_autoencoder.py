"""The decoder side of Kandinsky 6's SR stage as the generic pipeline sees it: tile latents in, the blended video
out.

Each tile's latents (tiles, C, frames, h, w), as the windows of :mod:`.k6sr_windows` leave them, are divided by
``scaling_factor`` and K-VAE decoded; the pixels go back from the K-VAE's range (``(x + 1) 128 / 127.5 - 1``,
clamped to [-1, 1]), are weighted by a Hann window without zero borders (:func:`.k6sr_tiles.hann_2d`) and summed
onto the output canvas at the tile's place times the tiling scale; the canvas divided by the summed windows,
clamped and mapped to [0, 1] is the video. The canvas lives on the host (float32, frames x output size).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .k6sr_tiles import TileGeometry, hann_2d


class TileBlender:
    """``push(latents)`` decodes a batch of tiles onto the canvas; the last push returns the video (B, T, H, W, 3)
    in [0, 1], every other push no frames (the video exists only once every tile is in)."""

    def __init__(self, vae: "Kandinsky6SRAutoencoder"):
        self.vae, self.geom, self.done = vae, vae.geom, 0
        (oh, ow), t = self.geom.out_size, self.geom.frames
        self.canvas = np.zeros((t, oh, ow, 3), np.float32)
        self.weight = np.zeros((oh, ow), np.float32)
        self.window = hann_2d(*self.geom.base)

    def push(self, latents: np.ndarray, on_chunk=None) -> np.ndarray:
        g, s = self.geom, self.geom.scale
        pixels = self.vae.decode_tiles(latents)  # (tiles, T, bh, bw, 3) in [-1, 1]
        bh, bw = g.base
        for tile in pixels:
            top, left = (v * s for v in g.positions[self.done])
            self.canvas[:, top:top + bh, left:left + bw] += tile * self.window[None, :, :, None]
            self.weight[top:top + bh, left:left + bw] += self.window
            self.done += 1
            if on_chunk is not None:
                on_chunk(self.done, g.count)
        if self.done < g.count:
            return np.zeros((1, 0, *g.out_size, 3), np.float32)
        video = np.clip(self.canvas / self.weight[None, :, :, None], -1.0, 1.0)
        return np.clip(video * np.float32(0.5) + np.float32(0.5), 0.0, 1.0)[None]


class Kandinsky6SRAutoencoder:
    """The K-VAE decoder and the run's tile geometry: ``latent_shape`` is one tile's latent grid (what the DiT
    runs on), ``decode_stream`` a :class:`TileBlender`, ``decode_video`` every tile at once."""

    def __init__(self, kvae: Any, geom: TileGeometry):
        import jax

        self.kvae, self.geom = kvae, geom
        self.scaling_factor = float(kvae.cfg.scaling_factor)
        self._decode = jax.jit(lambda m, z: m.decode(z))

    def latent_shape(self, num_frames: int, height: int, width: int) -> tuple[int, int, int]:
        return self.geom.latent_grid

    def decode_tiles(self, latents: np.ndarray) -> np.ndarray:
        """Scaled tile latents (tiles, C, t, h, w) -> pixels (tiles, T, bh, bw, 3) in [-1, 1]."""
        z = np.moveaxis(np.asarray(latents, np.float32), 1, -1) / np.float32(self.scaling_factor)
        video = np.asarray(self._decode(self.kvae, z), np.float32)
        return np.clip((video + np.float32(1.0)) * np.float32(128.0 / 127.5) - np.float32(1.0), -1.0, 1.0)

    def decode_stream(self, **params) -> TileBlender:
        return TileBlender(self)

    def decode_video(self, latents, on_chunk=None, **params) -> np.ndarray:
        blender = TileBlender(self)
        latents = np.asarray(latents)
        return blender.push(latents, on_chunk=on_chunk)

    def encode_video(self, frames, on_chunk=None, **params):
        raise NotImplementedError("the SR stage encodes its clip itself (vidax_kandinsky.k6sr_windows)")
