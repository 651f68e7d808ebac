"""Overlapping temporal tiles of a causal video VAE, blended as diffusers' ``_temporal_tiled_decode`` /
``_temporal_tiled_encode`` do (``AutoencoderKLHunyuanVideo``, and the same scheme in other video VAEs whose
GroupNorm or attention spans the whole clip, so that the clip cannot be streamed chunk by chunk).

Tiles start every ``stride`` input frames and take ``tile + 1`` frames (one extra, the causal first frame of the
next tile's output overlap). Every tile but the first drops its first output frame; each is then linearly blended
with the previous (already blended) tile over ``blend`` output frames, ramps ``1 - x / blend`` and ``x / blend``
in float32, and cropped to ``out_stride`` frames (the first tile to ``out_stride + 1``).
"""

from __future__ import annotations

from typing import Callable

import numpy as np


def blend_t(a: np.ndarray, b: np.ndarray, extent: int) -> np.ndarray:
    """Blend the last frames of ``a`` into the first frames of ``b`` in place (axis 1 of (B, T, H, W, C))."""
    e = min(a.shape[1], b.shape[1], extent)
    if e > 0:
        x = np.arange(e, dtype=np.float64) / e
        wa = (1.0 - x).astype(np.float32)[:, None, None, None]
        wb = x.astype(np.float32)[:, None, None, None]
        b[:, :e] = a[:, a.shape[1] - e:] * wa + b[:, :e] * wb
    return b


def tile_starts(frames: int, stride: int) -> list[int]:
    return list(range(0, frames, stride))


def run_time_tiles(
    x: np.ndarray,
    fn: Callable[[np.ndarray], np.ndarray],
    *,
    tile: int,
    stride: int,
    out_stride: int,
    out_blend: int,
    out_frames: int,
    on_tile: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """``fn`` over the temporal tiles of ``x`` (B, T, ...), in input frames; the stitched result (B, out_frames,
    ...) float32. Only the previous tile is kept while the next one runs. ``on_tile(done, total)`` after each."""
    if stride <= 0 or tile < stride:
        raise ValueError(f"temporal tiling: need 0 < stride <= tile, got tile {tile}, stride {stride}")
    starts = tile_starts(x.shape[1], stride)
    pieces: list[np.ndarray] = []
    prev = None
    for k, i in enumerate(starts):
        out = np.array(fn(x[:, i : i + tile + 1]), np.float32, copy=True)
        if k > 0:
            out = out[:, 1:]
            blend_t(prev, out, out_blend)
            pieces.append(out[:, :out_stride])
        else:
            pieces.append(out[:, : out_stride + 1])
        prev = out
        if on_tile is not None:
            on_tile(k + 1, len(starts))
    return np.concatenate(pieces, axis=1)[:, :out_frames]
