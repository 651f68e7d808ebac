"""Cosmos3's conditioning image, as the pipeline's ``_preprocess_conditioning_image`` makes it: the RGB pixels
(0..255, float32) scaled by ``max(W / w0, H / h0)`` to ``ceil`` sizes with torch's antialiased bilinear
interpolation (``F.interpolate(mode="bilinear", antialias=True, align_corners=False)``), centre-cropped to H x W
(offsets ``round((size - target) / 2)``), rounded, clamped to 0..255 and mapped to [-1, 1] by ``/ 127.5 - 1``.

The resize is separable: each axis is a triangle filter whose support widens by the scale when shrinking, its
weights normalised per output pixel (torch's ``_compute_weights_aa``, computed in float32 as torch does for float
input); enlarging reduces it to plain bilinear with edge renormalisation.
"""

from __future__ import annotations

import math

import numpy as np


def aa_weights(in_size: int, out_size: int) -> np.ndarray:
    """(out_size, in_size) float32 interpolation matrix of one axis."""
    f32 = np.float32
    scale = f32(in_size) / f32(out_size)
    support = f32(scale) if scale >= 1.0 else f32(1.0)
    invscale = f32(1.0) / scale if scale >= 1.0 else f32(1.0)
    m = np.zeros((out_size, in_size), np.float32)
    for i in range(out_size):
        center = scale * f32(i + 0.5)
        xmin = max(int(center - support + f32(0.5)), 0)
        xmax = min(int(center + support + f32(0.5)), in_size)
        j = np.arange(xmin, xmax)
        x = (j.astype(np.float32) - center + f32(0.5)) * invscale
        w = np.where(np.abs(x) < 1.0, f32(1.0) - np.abs(x), f32(0.0)).astype(np.float32)
        total = w.sum(dtype=np.float32)
        m[i, xmin:xmax] = w / total if total != 0 else w
    return m


def resize_aa(x: np.ndarray, height: int, width: int) -> np.ndarray:
    """(C, H0, W0) float32 -> (C, height, width): width pass, then height pass."""
    h0, w0 = x.shape[-2:]
    out = np.asarray(x, np.float32)
    if w0 != width:
        out = np.einsum("chw,ow->cho", out, aa_weights(w0, width))
    if h0 != height:
        out = np.einsum("chw,oh->cow", out, aa_weights(h0, height))
    return out.astype(np.float32)


def preprocess(rgb: np.ndarray, height: int, width: int) -> np.ndarray:
    """(H0, W0, 3) uint8 RGB -> (3, height, width) float32 in [-1, 1]."""
    x = np.asarray(rgb, np.float32).transpose(2, 0, 1)
    h0, w0 = x.shape[-2:]
    scale = max(width / w0, height / h0)
    rh, rw = math.ceil(scale * h0), math.ceil(scale * w0)
    x = resize_aa(x, rh, rw)
    top, left = round((rh - height) / 2), round((rw - width) / 2)
    x = x[:, top:top + height, left:left + width]
    return (np.clip(np.round(x), 0, 255) / np.float32(127.5) - np.float32(1.0)).astype(np.float32)
