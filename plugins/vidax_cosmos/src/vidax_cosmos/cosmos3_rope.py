"""Cosmos3's interleaved 3-D mRoPE over one guidance branch's ``[text; video]`` sequence (the positions
``Cosmos3OmniPipeline`` builds, the tables ``Cosmos3VLTextRotaryEmbedding`` computes).

Positions, per batch row (one guidance branch) with ``n`` unpadded text tokens:

* text token i: ``(i, i, i)``;
* video token (f, y, x) of the patch grid: temporal ``n + margin + f`` — or, with fps modulation on (config
  ``enable_fps_modulation``, an ``fps`` given and more than one latent frame), ``f / (fps / tcf) * (base_fps / tcf)
  + n + margin`` as a float — and spatial ``(y, x)`` (plus ``n + margin`` when ``unified_3d_mrope_reset_spatial_ids``
  is false). So the two branches of classifier-free guidance, with prompts of different lengths, have different
  video offsets.

Frequencies: ``inv_freq_i = 1 / theta ** (2i / head_dim)`` (float32); pair i takes its angle from the height
stream when ``i % 3 == 1`` and ``i < 3 * sections[1]``, from the width stream when ``i % 3 == 2`` and
``i < 3 * sections[2]``, else from the temporal stream (the interleaved ``THWTHW...TT`` layout). Angles are the
float32 product ``position * inv_freq``, as the reference computes them with autocast off (at positions near the
15000 margin a float32 angle carries ~1e-3 rad of rounding, in the reference too). Tables are (B, S, head_dim / 2)
cos/sin for the rotate-half convention.
"""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np


def inv_freq(head_dim: int, theta: float) -> np.ndarray:
    """float32 ``1 / theta ** (arange(0, head_dim, 2) / head_dim)``, the power correctly rounded to float32 (what
    torch's float32 ``pow`` gives up to an ulp)."""
    e = np.arange(0, head_dim, 2, dtype=np.float32) / np.float32(head_dim)
    return np.float32(1.0) / (np.float64(theta) ** e.astype(np.float64)).astype(np.float32)


def pair_axes(sections: Sequence[int]) -> np.ndarray:
    """(head_dim / 2,) int: which position stream (0 t, 1 h, 2 w) drives each rotary pair."""
    n = int(sum(sections))
    sel = np.zeros(n, np.int32)
    for axis in (1, 2):
        sel[axis:3 * int(sections[axis]):3] = axis
    return sel


def video_positions(grid: Sequence[int], offset: jax.Array, *, fps, base_fps: float, tcf: int,
                    modulate: bool, reset_spatial: bool) -> jax.Array:
    """(3, B, N) float32 positions of the video tokens of grid (T, Hp, Wp) for per-row temporal ``offset`` (B,);
    ``fps`` a number, a (possibly traced) array whose first entry is the fps, or None (no modulation)."""
    t, h, w = (int(g) for g in grid)
    off = offset.astype(jnp.float32)[:, None]
    frames = jnp.arange(t, dtype=jnp.float32)
    if modulate and fps is not None and t > 1:
        tps = jnp.asarray(fps, jnp.float32).reshape(-1)[0] / np.float32(tcf)
        ft = frames / tps * np.float32(base_fps / tcf)
    else:
        ft = frames
    tt = jnp.repeat(ft, h * w)[None, :] + off
    hh = jnp.broadcast_to(jnp.arange(h, dtype=jnp.float32)[None, :, None], (t, h, w)).reshape(-1)[None, :]
    ww = jnp.broadcast_to(jnp.arange(w, dtype=jnp.float32)[None, None, :], (t, h, w)).reshape(-1)[None, :]
    if not reset_spatial:
        hh, ww = hh + off, ww + off
    b = offset.shape[0]
    return jnp.stack([tt, jnp.broadcast_to(hh, (b, t * h * w)), jnp.broadcast_to(ww, (b, t * h * w))])


def cos_sin(positions: jax.Array, freqs: np.ndarray, sections: Sequence[int]) -> tuple[jax.Array, jax.Array]:
    """(3, B, S) positions -> interleaved-mRoPE (cos, sin), each (B, S, len(freqs)) float32."""
    ang = positions.astype(jnp.float32)[..., None] * jnp.asarray(freqs, jnp.float32)  # (3, B, S, P)
    sel = jnp.asarray(pair_axes(sections))
    a = jnp.where(sel == 1, ang[1], jnp.where(sel == 2, ang[2], ang[0]))
    return jnp.cos(a), jnp.sin(a)


def rope_tables(cfg, n_txt: int, lengths: jax.Array, grid: Sequence[int], fps):
    """((text cos, sin) (B, L, P), (video cos, sin) (B, N, P)) for rows with ``lengths`` (B,) unpadded text tokens
    padded to ``n_txt``; ``cfg`` is a :class:`vidax_cosmos.cosmos3_dit.Cosmos3DiTConfig`."""
    freqs = inv_freq(cfg.head_dim, cfg.rope_theta)
    b = lengths.shape[0]
    txt_pos = jnp.broadcast_to(jnp.arange(n_txt, dtype=jnp.float32)[None, None, :], (3, b, n_txt))
    offset = lengths + cfg.unified_3d_mrope_temporal_modality_margin
    vid_pos = video_positions(grid, offset, fps=fps, base_fps=float(cfg.base_fps),
                              tcf=cfg.temporal_compression_factor, modulate=cfg.enable_fps_modulation,
                              reset_spatial=cfg.unified_3d_mrope_reset_spatial_ids)
    return cos_sin(txt_pos, freqs, cfg.rope_axes_dim), cos_sin(vid_pos, freqs, cfg.rope_axes_dim)
