"""CogVideoX position tables for a (frames, height, width) token grid, computed on the host.

* 2B: fixed 3-D sin-cos embedding added to the video tokens (diffusers ``get_3d_sincos_pos_embed``): features
  ``[time (D/4) | width (3D/8) | height (3D/8)]``, each ``[sin | cos]``; spatial positions divided by
  ``spatial_interpolation_scale``, time by ``temporal_interpolation_scale``.
* 5B / 1.5: 3-D RoPE on the video tokens (the pipelines' ``_prepare_rotary_positional_embeddings``): the head dim
  split ``[t D/4 | h 3D/8 | w 3D/8]``; 1.0 places the grid in a crop region of the base grid with float32
  ``linspace`` positions, 1.5 takes integer positions (``grid_type="slice"``, bounded by the base grid).

Tokens are in (f, h, w) row-major order.
"""

from __future__ import annotations

import numpy as np

from vidax_core.nn import rope as rope_lib
from vidax_core.nn.sincos import sincos_table


def sincos_3d(dim: int, grid: tuple[int, int, int], spatial_scale: float, temporal_scale: float) -> np.ndarray:
    """(f*h*w, dim) float64 sin-cos table of a (f, h, w) token grid."""
    if dim % 16:
        raise ValueError(f"the CogVideoX sin-cos position embedding needs a width divisible by 16, got {dim}")
    f, h, w = grid
    f32 = np.float32
    ys = np.arange(h, dtype=np.float32) / f32(spatial_scale)
    xs = np.arange(w, dtype=np.float32) / f32(spatial_scale)
    ts = np.arange(f, dtype=np.float32) / f32(temporal_scale)
    d_s, d_t = 3 * dim // 4, dim // 4
    yy, xx = np.meshgrid(ys, xs, indexing="ij")  # (h, w)
    spatial = np.concatenate([sincos_table(xx, d_s // 2), sincos_table(yy, d_s // 2)], axis=1)  # (h*w, d_s)
    temporal = sincos_table(ts, d_t)  # (f, d_t)
    out = np.concatenate([np.broadcast_to(temporal[:, None], (f, h * w, d_t)),
                          np.broadcast_to(spatial[None], (f, h * w, d_s))], axis=-1)
    return out.reshape(f * h * w, dim)


def _linspace_f32(start: float, stop: float, n: int) -> np.ndarray:
    """float32 ``linspace`` evaluated as torch does on the CPU (first half from the start, second from the end)."""
    if n == 1:
        return np.array([start], np.float32)
    s, e = np.float32(start), np.float32(stop)
    step = (e - s) / np.float32(n - 1)
    i = np.arange(n)
    lo = s + step * i.astype(np.float32)
    hi = e - step * (n - 1 - i).astype(np.float32)
    return np.where(i < n // 2, lo, hi).astype(np.float32)


def crop_region(grid_hw: tuple[int, int], base_w: int, base_h: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """The grid's (top, left), (bottom, right) once resized to fit the base grid, centred (1.0 pipelines)."""
    h, w = grid_hw
    if h / w > base_h / base_w:
        rh, rw = base_h, int(round(base_h / h * w))
    else:
        rw, rh = base_w, int(round(base_w / w * h))
    top, left = int(round((base_h - rh) / 2.0)), int(round((base_w - rw) / 2.0))
    return (top, left), (top + rh, left + rw)


def rope_positions(grid: tuple[int, int, int], base_hw: tuple[int, int], *, sliced: bool) -> list[np.ndarray]:
    """(t, h, w) positions of the RoPE axes: 1.0's crop-region linspace grid, or 1.5's integer slice."""
    f, h, w = grid
    base_h, base_w = base_hw
    if sliced:
        if h > base_h or w > base_w:
            raise ValueError(f"token grid {h}x{w} exceeds the model's RoPE grid {base_h}x{base_w}")
        return [np.arange(f, dtype=np.float32), np.arange(h, dtype=np.float32), np.arange(w, dtype=np.float32)]
    (top, left), (bottom, right) = crop_region((h, w), base_w, base_h)
    return [_linspace_f32(0.0, f * (f - 1) / f, f),
            _linspace_f32(top, bottom * (h - 1) / h, h),
            _linspace_f32(left, right * (w - 1) / w, w)]


def rope_angles(head_dim: int, grid: tuple[int, int, int], base_hw: tuple[int, int], *, sliced: bool) -> np.ndarray:
    """(f*h*w, head_dim / 2) float64 angle table in pair space ``[t | h | w]`` (apply interleaved)."""
    dims = rope_lib.split_axes_cogvideox(head_dim)
    if sum(dims) != head_dim:
        raise ValueError(f"attention_head_dim={head_dim} does not split into CogVideoX's t/h/w RoPE axes "
                         "(needs a multiple of 8)")
    return rope_lib.grid_angles(rope_positions(grid, base_hw, sliced=sliced), dims)
