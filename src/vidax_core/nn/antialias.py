"""Anti-aliased 1-D resampling (BigVGAN's ``alias_free_torch``, as diffusers' LTX-2 vocoder has it), channel-last.

A pointwise nonlinearity on a sampled signal creates harmonics above Nyquist that fold back as aliasing; vocoders
therefore upsample by ``ratio`` (zero-stuffing and a windowed-sinc low-pass), apply the activation, and low-pass and
decimate back (:class:`AntiAliasAct1d`). The same upsampler with a Hann-windowed sinc resamples a waveform to a
higher rate (LTX-2.3+'s bandwidth extension).

* :func:`kaiser_sinc_filter`, :func:`hann_sinc_filter` — the filter taps, float32, as the reference computes them;
* :class:`UpSample1d` / :class:`DownSample1d` — edge-replicating resamplers, (B, L, C) -> (B, L * ratio, C) and
  (B, L, C) -> (B, ceil(L / ratio), C);
* :class:`AntiAliasAct1d` — upsample, ``act``, downsample.

The reference stores the taps as buffers; a persistent buffer (``persistent=True``, saved in the checkpoint) is an
``nnx.Param`` ``filter`` (K,) here, filled by the key table, so a checkpoint whose taps were rounded (bf16) gives the
reference's taps; a non-persistent one is recomputed from the config and kept static.

The upsampler is a transposed depthwise conv computed in polyphase form: output phase ``p`` is an ordinary
correlation of the input with every ``ratio``-th tap starting at ``p``, so no zero-stuffed signal is materialised.
"""

from __future__ import annotations

import functools
import math
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx


def kaiser_sinc_filter(cutoff: float, half_width: float, kernel_size: int) -> np.ndarray:
    """Kaiser-windowed sinc low-pass, normalised to unit DC gain: ``cutoff`` and ``half_width`` in cycles per sample
    (Nyquist 0.5); beta from the transition width by Kaiser's attenuation formula. (K,) float32."""
    return _kaiser_sinc_filter(float(cutoff), float(half_width), int(kernel_size)).copy()


@functools.lru_cache(maxsize=64)
def _kaiser_sinc_filter(cutoff: float, half_width: float, kernel_size: int) -> np.ndarray:
    delta_f = 4 * half_width
    half = kernel_size // 2
    amplitude = 2.285 * (half - 1) * math.pi * delta_f + 7.95
    if amplitude > 50.0:
        beta = 0.1102 * (amplitude - 8.7)
    elif amplitude >= 21.0:
        beta = 0.5842 * (amplitude - 21) ** 0.4 + 0.07886 * (amplitude - 21.0)
    else:
        beta = 0.0
    window = np.kaiser(kernel_size, beta).astype(np.float32)
    even = kernel_size % 2 == 0
    t = (np.arange(-half, half) + 0.5 if even else np.arange(kernel_size) - half).astype(np.float32)
    if cutoff == 0.0:
        return np.zeros(kernel_size, np.float32)
    t = np.float32(2 * cutoff) * t
    safe = np.where(t == 0, np.float32(1), t)
    sinc = np.where(t == 0, np.float32(1), np.sin(np.float32(math.pi) * t) / np.float32(math.pi) / safe)
    f = np.float32(2 * cutoff) * window * sinc.astype(np.float32)
    return (f / f.sum()).astype(np.float32)


def hann_sinc_filter(ratio: int, rolloff: float = 0.99, lowpass_filter_width: int = 6) -> tuple[np.ndarray, int]:
    """The Hann-windowed sinc interpolation filter of an upsampler by ``ratio`` (torchaudio-style resampling, as
    diffusers' ``UpSample1d(window_type="hann")``): taps (2 w ratio + 1,) float32 and the half width ``w`` in input
    samples."""
    width = math.ceil(lowpass_filter_width / rolloff)
    k = 2 * width * ratio + 1
    t = (np.arange(k, dtype=np.float64) / ratio - width) * rolloff
    tc = np.clip(t, -lowpass_filter_width, lowpass_filter_width)
    window = np.cos(tc * math.pi / lowpass_filter_width / 2) ** 2
    return (np.sinc(t) * window * rolloff / ratio).astype(np.float32), width


def _replicate_pad(x: jax.Array, left: int, right: int) -> jax.Array:
    return jnp.pad(x, ((0, 0), (left, right), (0, 0)), mode="edge")


def _taps(module: nnx.Module) -> jax.Array:
    return module.filter[...] if module.filter is not None else jnp.asarray(module.static_taps, jnp.float32)


class UpSample1d(nnx.Module):
    """diffusers ``UpSample1d``: replicate-pad by ``pad``, transposed depthwise conv with stride ``ratio``, gain
    ``ratio``, crop to ``L * ratio`` samples.

    ``window="kaiser"`` (BigVGAN's default, ``kernel_size`` taps, persistent) or ``"hann"`` (the resampler)."""

    def __init__(self, ratio: int = 2, kernel_size: int | None = None, *, window: str = "kaiser",
                 persistent: bool = True):
        self.ratio = ratio
        if window == "hann":
            taps, width = hann_sinc_filter(ratio)
            self.kernel_size = taps.size
            self.pad, self.pad_left, self.pad_right = width, 2 * width * ratio, taps.size - ratio
        elif window == "kaiser":
            self.kernel_size = int(6 * ratio // 2) * 2 if kernel_size is None else kernel_size
            taps = kaiser_sinc_filter(0.5 / ratio, 0.6 / ratio, self.kernel_size)
            self.pad = self.kernel_size // ratio - 1
            self.pad_left = self.pad * ratio + (self.kernel_size - ratio) // 2
            self.pad_right = self.pad * ratio + (self.kernel_size - ratio + 1) // 2
        else:
            raise ValueError(f"UpSample1d: unknown window {window!r} (kaiser or hann)")
        self.filter = nnx.Param(jnp.asarray(taps)) if persistent else None
        self.static_taps = None if persistent else tuple(float(t) for t in taps)

    def __call__(self, x: jax.Array) -> jax.Array:
        r, k = self.ratio, self.kernel_size
        b, n, c = x.shape
        xp = _replicate_pad(x, self.pad, self.pad)
        j = -(-k // r)  # taps per phase
        f = jnp.pad(_taps(self).astype(jnp.float32), (0, j * r - k)).reshape(j, r)[::-1]  # h[i, p] = f[(j-1-i) r + p]
        kernel = jnp.tile(f, (1, c))[:, None, :].astype(x.dtype)  # output channel c * r + p
        y = jax.lax.conv_general_dilated(
            xp, kernel, window_strides=(1,), padding=((j - 1, j - 1),), dimension_numbers=("NWC", "WIO", "NWC"),
            feature_group_count=c, preferred_element_type=jnp.float32)
        y = y.reshape(b, -1, c, r).transpose(0, 1, 3, 2).reshape(b, -1, c)  # full transposed-conv output
        return (r * y[:, self.pad_left : self.pad_left + n * r]).astype(x.dtype)


class DownSample1d(nnx.Module):
    """diffusers ``DownSample1d``: replicate padding, then a depthwise low-pass conv with stride ``ratio``."""

    def __init__(self, ratio: int = 2, kernel_size: int | None = None, *, persistent: bool = True):
        self.ratio = ratio
        self.kernel_size = kernel_size or int(6 * ratio // 2) * 2
        self.pad_left = self.kernel_size // 2 + self.kernel_size % 2 - 1
        self.pad_right = self.kernel_size // 2
        taps = kaiser_sinc_filter(0.5 / ratio, 0.6 / ratio, self.kernel_size)
        self.filter = nnx.Param(jnp.asarray(taps)) if persistent else None
        self.static_taps = None if persistent else tuple(float(t) for t in taps)

    def __call__(self, x: jax.Array) -> jax.Array:
        c = x.shape[-1]
        xp = _replicate_pad(x, self.pad_left, self.pad_right)
        kernel = jnp.broadcast_to(_taps(self)[:, None, None], (self.kernel_size, 1, c)).astype(x.dtype)
        y = jax.lax.conv_general_dilated(
            xp, kernel, window_strides=(self.ratio,), padding=((0, 0),), dimension_numbers=("NWC", "WIO", "NWC"),
            feature_group_count=c, preferred_element_type=jnp.float32)
        return y.astype(x.dtype)


class AntiAliasAct1d(nnx.Module):
    """diffusers ``AntiAliasAct1d``: ``downsample(act(upsample(x)))``; children ``upsample``, ``act``, ``downsample``
    (the reference's names)."""

    def __init__(self, act: Callable[[jax.Array], jax.Array], ratio: int = 2, kernel_size: int = 12):
        self.upsample = UpSample1d(ratio, kernel_size)
        self.act = act
        self.downsample = DownSample1d(ratio, kernel_size)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.downsample(self.act(self.upsample(x)))
