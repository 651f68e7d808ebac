"""The tile geometry of ``Kandinsky6SRPipeline``: where the overlapping tiles sit, at which trained size each is
refined, and the Hann windows that blend the decoded tiles. Plain numbers (no JAX): the run checks, the plan's
windows and the decoder share it.

A run at ``resolution_scale`` 2 or 4 tiles the input clip as it is; at 2.25 the clip is first resized bilinearly
by 1.125 (each side rounded to the K-VAE's spatial factor ``snap``) and then tiled at 2. The trained tile size
(``transformer.config.tile_sizes``) whose aspect ratio is closest to the clip's is the output tile ``base``; the
input tile is ``base / scale``; tile starts are evenly spread, ``snap``-aligned and overlap by at least
``min_overlap`` of a tile. The output is the clip's size times the tiling scale.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

SCALES = (2.0, 2.25, 4.0)


def tile_positions(length: int, tile: int, min_overlap: float, snap: int) -> list[int]:
    """Evenly spread, ``snap``-aligned starts covering ``[0, length - tile]`` with at least ``min_overlap`` (a
    fraction of ``tile``) shared by neighbours (the pipeline's ``_tile_positions``)."""
    if tile >= length:
        return [0]
    span = (length - tile) // snap
    stride = max(1, math.floor(tile * (1.0 - min_overlap) / snap))
    count = math.ceil(span / stride) + 1
    return [round(i * span / (count - 1)) * snap for i in range(count)]


def hann_2d(height: int, width: int) -> np.ndarray:
    """A (height, width) float32 Hann window without its zero borders (torch ``hann_window(n + 2)[1:-1]``)."""
    def one(n: int) -> np.ndarray:
        k = np.arange(1, n + 1, dtype=np.float64)
        return (0.5 - 0.5 * np.cos(2.0 * np.pi * k / (n + 2))).astype(np.float32)

    return one(height)[:, None] * one(width)[None, :]


def bilinear_matrix(n_in: int, n_out: int) -> np.ndarray:
    """(n_out, n_in) weights of torch's ``interpolate(mode="bilinear", align_corners=False)`` along one axis."""
    m = np.zeros((n_out, n_in), np.float32)
    scale = n_in / n_out
    for i in range(n_out):
        src = max((i + 0.5) * scale - 0.5, 0.0)
        i0 = min(int(math.floor(src)), n_in - 1)
        i1 = min(i0 + 1, n_in - 1)
        lam = src - i0
        m[i, i0] += 1.0 - lam
        m[i, i1] += lam
    return m


@dataclass(frozen=True)
class TileGeometry:
    """One run's tiles (module docstring). Pixel sizes are (height, width); ``size`` is the clip's after the
    pre-upscale (equal to the run's size unless ``pre``), ``tops`` x ``lefts`` the input tiles' starts."""

    frames: int
    latent_frames: int
    run_size: tuple[int, int]
    size: tuple[int, int]
    scale: int
    base: tuple[int, int]
    tile: tuple[int, int]
    snap: int
    tops: tuple[int, ...]
    lefts: tuple[int, ...]

    @property
    def pre(self) -> bool:
        return self.size != self.run_size

    @property
    def positions(self) -> list[tuple[int, int]]:
        return [(top, left) for top in self.tops for left in self.lefts]

    @property
    def count(self) -> int:
        return len(self.tops) * len(self.lefts)

    @property
    def out_size(self) -> tuple[int, int]:
        return self.size[0] * self.scale, self.size[1] * self.scale

    @property
    def latent_grid(self) -> tuple[int, int, int]:
        """The latent grid (frames, height, width) of one tile, which the DiT refines."""
        return self.latent_frames, self.base[0] // self.snap, self.base[1] // self.snap


def geometry(height: int, width: int, num_frames: int, resolution_scale: float, min_overlap: float,
             tile_sizes, snap: int, temporal: int) -> TileGeometry:
    """The tiles of a ``height`` x ``width`` clip of ``num_frames``; ValueError (a phrase naming what to change)
    when the pipeline would refuse the combination."""
    scale, pre = (2, 1.125) if float(resolution_scale) == 2.25 else (int(resolution_scale), 1.0)
    size = (height, width)
    if pre != 1.0:
        size = (round(height * pre / snap) * snap, round(width * pre / snap) * snap)
    h, w = size
    base = min((tuple(int(v) for v in t) for t in tile_sizes), key=lambda hw: abs(hw[1] / hw[0] - w / h))
    if base[0] % (snap * scale) or base[1] % (snap * scale):
        raise ValueError(f"the trained tile size {base[0]}x{base[1]} is not a multiple of the K-VAE's factor {snap} "
                         f"times the tiling scale {scale}")
    tile = (base[0] // scale, base[1] // scale)
    if h < tile[0] or w < tile[1]:
        raise ValueError(f"a {size[1]}x{size[0]} clip is smaller than the {tile[1]}x{tile[0]} input tile of "
                         f"resolution_scale {resolution_scale}: give a clip of at least that size")
    return TileGeometry(num_frames, (num_frames - 1) // temporal + 1, (height, width), size, scale, base, tile, snap,
                        tuple(tile_positions(h, tile[0], min_overlap, snap)),
                        tuple(tile_positions(w, tile[1], min_overlap, snap)))


def chunks(count: int, batch: int) -> list[range]:
    """The tiles of each DiT call (``tiles_batch_size`` at a time, in order)."""
    return [range(i, min(i + batch, count)) for i in range(0, count, batch)]
