"""Rotary position embeddings (RoPE): frequencies, angle tables, and the two ways of rotating a head vector.

Everything is expressed in *pair space*: a table holds one angle (or cos/sin) per rotated pair, width
``rot_dim / 2``. The two layouts differ only in which features form a pair:

* interleaved pairs ``(x[2i], x[2i+1])`` — Wan, HunyuanVideo, CogVideoX, original Cosmos, LTX-Video
  (diffusers ``use_real_unbind_dim=-1`` / ``repeat_interleave_real=True``);
* rotate-half pairs ``(x[i], x[i + D/2])`` — Llama, Qwen, Gemma, Cosmos in diffusers
  (transformers ``rotate_half``; diffusers ``use_real_unbind_dim=-2``).

So one table serves both; :func:`apply_interleaved` / :func:`apply_rotate_half` pick the pairing. When the table is
narrower than the head (partial rotary), only the leading ``2 * table_width`` features rotate.

Frequencies are computed on the host in float64 (:func:`inv_freq`); angles are ``position * inv_freq`` in float32
(as transformers does with ``position_ids``), so positions may be traced integer, fractional or seconds-based
values. Multi-axis tables (3-D video RoPE) concatenate per-axis blocks ``[t | h | w]`` in pair space
(:func:`grid_angles`); Qwen2.5-VL's mRoPE picks pair sections from three position streams (:func:`mrope_angles`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

# --------------------------------------------------------------------------------------------------------------
# Frequencies
# --------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Llama3Scaling:
    """Llama-3.1 frequency scaling (transformers ``rope_type="llama3"``): long wavelengths are divided by
    ``factor``, short ones kept, the band between interpolated smoothly."""

    factor: float = 8.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192


def inv_freq(
    dim: int,
    theta: float = 10000.0,
    *,
    ntk_factor: float = 1.0,
    linear_factor: float = 1.0,
    llama3: Llama3Scaling | None = None,
) -> np.ndarray:
    """Inverse frequencies ``1 / (theta * ntk_factor) ** (2i / dim) / linear_factor`` for ``i < dim // 2``.

    ``ntk_factor`` multiplies the base (NTK-aware scaling; per axis in 3-D RoPE, e.g. Cosmos' extrapolation ratio
    ``r ** (d / (d - 2))``); ``linear_factor`` divides the frequencies (position interpolation, transformers
    ``rope_type="linear"``); ``llama3`` applies Llama-3.1's band-wise scaling. float64, shape (dim // 2,).
    """
    if dim % 2:
        raise ValueError(f"rope dim must be even, got {dim}")
    base = float(theta) * float(ntk_factor)
    freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)) / float(linear_factor)
    if llama3 is not None:
        freqs = _llama3_scale(freqs, llama3)
    return freqs


def _llama3_scale(freqs: np.ndarray, s: Llama3Scaling) -> np.ndarray:
    old = float(s.original_max_position_embeddings)
    low_wavelen = old / s.low_freq_factor
    high_wavelen = old / s.high_freq_factor
    wavelen = 2.0 * math.pi / freqs
    scaled = np.where(wavelen > low_wavelen, freqs / s.factor, freqs)
    smooth = (old / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor)
    smoothed = (1.0 - smooth) * scaled / s.factor + smooth * scaled
    medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return np.where(medium, smoothed, scaled)


# --------------------------------------------------------------------------------------------------------------
# Angle tables
# --------------------------------------------------------------------------------------------------------------


def angles(positions: jax.Array | np.ndarray, freqs: np.ndarray | jax.Array) -> jax.Array:
    """``positions[..., None] * freqs`` in float32: shape ``positions.shape + (len(freqs),)``.

    Positions may be integer indices, fractional coordinates or times in seconds (any float array)."""
    p = jnp.asarray(positions).astype(jnp.float32)
    return p[..., None] * jnp.asarray(freqs, jnp.float32)


def host_angles(positions: np.ndarray | int, freqs: np.ndarray) -> np.ndarray:
    """Like :func:`angles` but on the host in float64 (static grids; the reference's float64 path)."""
    p = np.arange(positions, dtype=np.float64) if isinstance(positions, int) else np.asarray(positions, np.float64)
    return p[..., None] * np.asarray(freqs, np.float64)


def cos_sin(ang: jax.Array | np.ndarray, dtype=jnp.float32) -> tuple[jax.Array, jax.Array]:
    """(cos, sin) of an angle table, cast to ``dtype`` (host float64 tables are rounded once, at the end)."""
    if isinstance(ang, np.ndarray):
        return jnp.asarray(np.cos(ang).astype(dtype)), jnp.asarray(np.sin(ang).astype(dtype))
    return jnp.cos(ang).astype(dtype), jnp.sin(ang).astype(dtype)


def split_axes_wan(head_dim: int) -> tuple[int, int, int]:
    """(t, h, w) split of the head dim used by Wan and Cosmos: h = w = 2 * (head_dim // 6), t the rest."""
    hw = 2 * (head_dim // 6)
    return head_dim - 2 * hw, hw, hw


def split_axes_cogvideox(head_dim: int) -> tuple[int, int, int]:
    """(t, h, w) split used by CogVideoX: t = head_dim / 4, h = w = 3/8 head_dim."""
    return head_dim // 4, head_dim // 8 * 3, head_dim // 8 * 3


def grid_angles(
    axis_positions: Sequence[np.ndarray | jax.Array | int],
    axes_dims: Sequence[int],
    theta: float | Sequence[float] = 10000.0,
    *,
    ntk_factors: Sequence[float] | None = None,
    host: bool = True,
) -> np.ndarray | jax.Array:
    """Angle table of a multi-axis grid, shape ``(prod(n_axis), sum(axes_dims) // 2)``.

    ``axis_positions[a]`` are the positions along axis ``a`` (an int n means ``arange(n)``; fractional and
    seconds-based coordinates are float arrays); axis ``a`` rotates ``axes_dims[a]`` features. Tokens are in
    row-major grid order (t slowest), the table is ``[t | h | w]`` in pair space. ``theta`` and ``ntk_factors``
    may differ per axis. ``host=True`` computes in float64 numpy (static grids), else float32 jax.
    """
    n_axes = len(axes_dims)
    thetas = [theta] * n_axes if isinstance(theta, (int, float)) else list(theta)
    ntk = [1.0] * n_axes if ntk_factors is None else list(ntk_factors)
    xp = np if host else jnp
    tables = []
    for pos, d, th, k in zip(axis_positions, axes_dims, thetas, ntk):
        f = inv_freq(d, th, ntk_factor=k)
        if host:
            tables.append(host_angles(pos, f))
        else:
            tables.append(angles(jnp.arange(pos) if isinstance(pos, int) else pos, f))
    grid = tuple(t.shape[0] for t in tables)
    parts = []
    for a, t in enumerate(tables):
        shape = [1] * n_axes + [t.shape[-1]]
        shape[a] = grid[a]
        parts.append(xp.broadcast_to(t.reshape(shape), grid + (t.shape[-1],)))
    return xp.concatenate(parts, axis=-1).reshape(int(np.prod(grid)), -1)


def mrope_angles(position_ids: jax.Array, freqs: np.ndarray | jax.Array, mrope_section: Sequence[int]) -> jax.Array:
    """Qwen2.5-VL multimodal RoPE: ``position_ids`` (3, B, S) hold (temporal, height, width) positions; pair
    section ``j`` of widths ``mrope_section`` (summing to ``len(freqs)``) takes its angles from stream ``j``.
    Returns (B, S, len(freqs)) float32; apply with :func:`apply_rotate_half`."""
    if sum(mrope_section) != len(freqs):
        raise ValueError(f"mrope_section {tuple(mrope_section)} must sum to the pair count {len(freqs)}")
    a = angles(position_ids, freqs)  # (3, B, S, P)
    parts, start = [], 0
    for j, w in enumerate(mrope_section):
        parts.append(a[j % 3, ..., start:start + w])
        start += w
    return jnp.concatenate(parts, axis=-1)


def ltx_angles(coords: jax.Array, dim: int, theta: float = 10000.0) -> jax.Array:
    """LTX-Video's RoPE angles from fractional coordinates ``coords`` (..., 3) (frame, y, x already divided by the
    base sizes, so mostly in [0, 1)).

    Frequencies are log-spaced ``theta ** linspace(0, 1, dim // 6) * pi / 2`` and shared by the three axes; the
    angle of frequency ``j`` on axis ``a`` is ``f_j * (2 * coord_a - 1)``, laid out frequency-major
    (``[f0.t, f0.y, f0.x, f1.t, ...]``). When ``dim % 6`` the leading ``(dim % 6) / 2`` pairs get angle 0
    (identity), as the reference pads cos with 1 and sin with 0 in front. Returns (..., dim // 2) float32 for
    :func:`apply_interleaved`. The frequencies are computed in float32 in the reference's order (its largest one,
    ~15708, differs by one float32 ulp = 1e-3 rad from the float64 value, which the models were trained with)."""
    n = dim // 6
    f32 = np.float32
    f = np.power(f32(theta), np.linspace(0.0, 1.0, n, dtype=np.float32)) * f32(math.pi) / f32(2.0)
    c = jnp.asarray(coords).astype(jnp.float32)
    a = (c[..., :, None] * 2.0 - 1.0) * jnp.asarray(f, jnp.float32)  # (..., 3, n)
    a = jnp.swapaxes(a, -1, -2).reshape(*c.shape[:-1], 3 * n)
    pad = (dim % 6) // 2
    if pad:
        a = jnp.concatenate([jnp.zeros(a.shape[:-1] + (pad,), a.dtype), a], axis=-1)
    return a


# --------------------------------------------------------------------------------------------------------------
# Apply
# --------------------------------------------------------------------------------------------------------------


def _split_rot(x: jax.Array, pairs: int) -> tuple[jax.Array, jax.Array | None]:
    rot = 2 * pairs
    if rot > x.shape[-1]:
        raise ValueError(f"rope table rotates {rot} features but the head has {x.shape[-1]}")
    return (x, None) if rot == x.shape[-1] else (x[..., :rot], x[..., rot:])


def apply_interleaved(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """Rotate interleaved pairs ``(x[2i], x[2i+1])`` by the angle whose cos/sin are ``cos[..., i]``/``sin[..., i]``.

    ``cos``/``sin`` broadcast against ``x.shape[:-1] + (pairs,)`` (e.g. (S, 1, P) for x (B, S, H, D)); math in
    float32, result in ``x.dtype``. Features beyond ``2 * pairs`` pass through unchanged."""
    xr, rest = _split_rot(x, cos.shape[-1])
    xf = xr.astype(jnp.float32).reshape(*xr.shape[:-1], xr.shape[-1] // 2, 2)
    x1, x2 = xf[..., 0], xf[..., 1]
    c, s = cos.astype(jnp.float32), sin.astype(jnp.float32)
    out = jnp.stack([x1 * c - x2 * s, x1 * s + x2 * c], axis=-1).reshape(xr.shape).astype(x.dtype)
    return out if rest is None else jnp.concatenate([out, rest], axis=-1)


def apply_rotate_half(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """Rotate pairs ``(x[i], x[i + R/2])`` (R = 2 * pairs), the transformers ``rotate_half`` convention.

    Same table shape, dtype and partial-rotary rules as :func:`apply_interleaved`."""
    xr, rest = _split_rot(x, cos.shape[-1])
    xf = xr.astype(jnp.float32)
    h = xr.shape[-1] // 2
    x1, x2 = xf[..., :h], xf[..., h:]
    c, s = cos.astype(jnp.float32), sin.astype(jnp.float32)
    out = jnp.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1).astype(x.dtype)
    return out if rest is None else jnp.concatenate([out, rest], axis=-1)


def apply(x: jax.Array, cos: jax.Array, sin: jax.Array, *, interleaved: bool) -> jax.Array:
    """:func:`apply_interleaved` or :func:`apply_rotate_half`."""
    return (apply_interleaved if interleaved else apply_rotate_half)(x, cos, sin)
