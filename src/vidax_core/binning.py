"""Resolution binning (diffusers' ``use_resolution_binning``): sample at the aspect-ratio bin closest to the
requested size, then resize the frames to cover the requested size and crop its centre.

PixArt, SANA and SANA-Video train on a fixed set of sizes, one per aspect ratio; their pipelines map a request to
the bin whose ratio (height / width) is closest (``classify_height_width_bin``: the first such bin in the table's
order on a tie), denoise and decode at that size, and finish with ``resize_and_crop_tensor``: a bilinear resize
(half-pixel centres, no antialiasing) by the larger of the two scale factors, so the frame covers the requested
size, then a centre crop. A family returns its table from the ``resolution_binning`` hook; the planner runs every
pass at the bin (:func:`vidax_core.runner.plan.sampling_passes`) and the call resizes the decoded frames with
:func:`cover_and_crop`. Only numpy is imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np


@dataclass(frozen=True)
class ResolutionBins:
    """Aspect-ratio bins as the pipelines write them: ratio key (a string, height / width) -> (height, width), in
    the table's order; ``name`` says which table (for the plan's line)."""

    bins: tuple[tuple[str, tuple[int, int]], ...]
    name: str = ""

    @classmethod
    def of(cls, table: Mapping[str, tuple[float, float]], name: str = "") -> "ResolutionBins":
        return cls(tuple((str(k), (int(v[0]), int(v[1]))) for k, v in table.items()), name)

    def closest(self, height: int, width: int) -> tuple[int, int]:
        """The (height, width) of the bin whose ratio is closest to ``height / width`` (the first one on a tie)."""
        ratio = float(height / width)
        key = min((k for k, _ in self.bins), key=lambda k: abs(float(k) - ratio))
        return dict(self.bins)[key]


def _axis(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Source indices and weights of a bilinear resize along one axis (torch ``align_corners=False``: source
    coordinate ``n_in / n_out * (i + 0.5) - 0.5`` in float32 as torch computes it, clamped at 0, upper neighbour
    clamped at the edge)."""
    f32 = np.float32
    scale = f32(n_in) / f32(n_out)
    src = np.maximum(scale * (np.arange(n_out, dtype=f32) + f32(0.5)) - f32(0.5), f32(0.0))
    lo = np.minimum(src.astype(np.int64), n_in - 1)
    hi = np.minimum(lo + 1, n_in - 1)
    return lo, hi, (src - lo.astype(f32)).astype(f32)


def bilinear(frames: np.ndarray, height: int, width: int) -> np.ndarray:
    """(..., H, W, C) float -> (..., height, width, C): torch ``interpolate(mode="bilinear", align_corners=False)``
    without antialiasing, float32."""
    x = np.asarray(frames, np.float32)
    lo, hi, w = _axis(x.shape[-3], height)
    x = x[..., lo, :, :] * (1 - w)[:, None, None] + x[..., hi, :, :] * w[:, None, None]
    lo, hi, w = _axis(x.shape[-2], width)
    return (x[..., lo, :] * (1 - w)[:, None] + x[..., hi, :] * w[:, None]).astype(np.float32)


def cover_and_crop(frames: np.ndarray, height: int, width: int) -> np.ndarray:
    """diffusers' ``resize_and_crop_tensor`` on (B, T, H, W, 3) frames: bilinear by the larger scale factor (each
    side truncated to an int), then the centre ``height`` x ``width``; unchanged when already that size."""
    h, w = frames.shape[2:4]
    if (h, w) == (height, width):
        return np.asarray(frames, np.float32)
    ratio = max(height / h, width / w)
    rh, rw = int(h * ratio), int(w * ratio)
    out = bilinear(frames, rh, rw)
    top, left = (rh - height) // 2, (rw - width) // 2
    return np.ascontiguousarray(out[:, :, top:top + height, left:left + width])


__all__ = ["ResolutionBins", "bilinear", "cover_and_crop"]
