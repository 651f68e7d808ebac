"""Adaptive LayerNorm (AdaLN): a parameter-free norm whose shift / scale (and residual gate) come from a
conditioning embedding.

The modulation can vary at three granularities, chosen by the conditioning's shape:

* per sample — (B, D): one modulation for every token (AdaLayerNormZero, Wan with a scalar timestep);
* per token — (B, S, D): PixArt's AdaLN-single with a (B, S) timestep, as LTX-Video image-to-video and Wan 2.2
  TI2V use;
* per frame — (B, F, D) with ``per_frame=True``: one modulation per latent frame, broadcast over that frame's
  ``S / F`` tokens (Cosmos with a (B, 1, T, 1, 1) timestep) without materialising a per-token copy.

Modules: :class:`AdaLayerNormZero` (Linear(silu(emb)) -> 6 chunks), :class:`Modulation` (its linear alone, its
chunks for a block that norms its streams itself, the width tensor-parallel: HunyuanVideo, Motif-Video),
:class:`AdaLayerNormSingle` (its own timestep
MLP; returns the modulation for the blocks' ``scale_shift_table``), :class:`AdaLayerNormContinuous` (output head,
``scale`` before ``shift``), :class:`AdaLNLoRA` (Cosmos: low-rank ``linear_2(linear_1(silu(e)))`` per block plus a
shared term from the time embedder). Norm, modulation and gates run in float32; the modulated activation is
returned in the input's dtype.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from vidax_core.nn.layers import Linear, param
from vidax_core.nn.norms import layer_norm, rms_norm
from vidax_core.nn.timestep import TimestepEmbedding, timestep_embedding


def _frames(x: jax.Array, m: jax.Array) -> tuple[jax.Array, jax.Array]:
    """x (B, S, D), m (B, F, D) -> x (B, F, S/F, D), m (B, F, 1, D)."""
    b, s, d = x.shape
    f = m.shape[1]
    if s % f:
        raise ValueError(f"per-frame modulation: {s} tokens do not split into {f} frames")
    return x.reshape(b, f, s // f, d), m[:, :, None, :]


def _bcast(m: jax.Array) -> jax.Array:
    """(B, D) -> (B, 1, D); (B, S, D) unchanged."""
    return m[:, None, :] if m.ndim == 2 else m


def modulate(x: jax.Array, shift: jax.Array, scale: jax.Array, *, per_frame: bool = False) -> jax.Array:
    """``x * (1 + scale) + shift`` in float32; x (B, S, D), shift/scale (B, D), (B, S, D) or per frame (B, F, D)."""
    xf = x.astype(jnp.float32)
    shift, scale = shift.astype(jnp.float32), scale.astype(jnp.float32)
    if per_frame:
        xr, sc = _frames(xf, scale)
        _, sh = _frames(xf, shift)
        return (xr * (1 + sc) + sh).reshape(xf.shape)
    return xf * (1 + _bcast(scale)) + _bcast(shift)


def gate(y: jax.Array, g: jax.Array, *, per_frame: bool = False) -> jax.Array:
    """``y * g`` in float32 with the same broadcasting rules as :func:`modulate` (the residual branch gate)."""
    yf, g = y.astype(jnp.float32), g.astype(jnp.float32)
    if per_frame:
        yr, gr = _frames(yf, g)
        return (yr * gr).reshape(yf.shape)
    return yf * _bcast(g)


def split_modulation(mod: jax.Array, n: int, table: jax.Array | None = None) -> list[jax.Array]:
    """Split a (..., n * D) modulation into n float32 (..., D) parts, adding a learned (n, D)
    ``scale_shift_table`` first when given (Wan, PixArt, LTX blocks)."""
    m = mod.astype(jnp.float32)
    m = m.reshape(*m.shape[:-1], n, m.shape[-1] // n)
    if table is not None:
        m = m + table.astype(jnp.float32)
    return [m[..., i, :] for i in range(n)]


def _norm(x: jax.Array, eps: float) -> jax.Array:
    return layer_norm(x, eps)


class AdaLayerNormZero(nnx.Module):
    """diffusers ``AdaLayerNormZero`` (emb given): ``linear(silu(emb))`` -> (shift_msa, scale_msa, gate_msa,
    shift_mlp, scale_mlp, gate_mlp); returns ``(norm(x) * (1 + scale_msa) + shift_msa, gate_msa, shift_mlp,
    scale_mlp, gate_mlp)``. ``emb`` (B, Dc) per sample, (B, S, Dc) per token or (B, F, Dc) with ``per_frame``."""

    def __init__(self, dim: int, cond_dim: int | None = None, *, eps: float = 1e-6, bias: bool = True,
                 dtype: Any = jnp.float32, rngs: nnx.Rngs):
        self.eps = eps
        self.linear = Linear(cond_dim or dim, 6 * dim, (None, "embed"), dtype=dtype, rngs=rngs, bias=bias,
                             fp32_out=True)

    def __call__(self, x: jax.Array, emb: jax.Array, *, per_frame: bool = False):
        mod = self.linear(jax.nn.silu(emb.astype(jnp.float32)))
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = jnp.split(mod, 6, axis=-1)
        y = modulate(_norm(x, self.eps), shift_msa, scale_msa, per_frame=per_frame).astype(x.dtype)
        return y, gate_msa, shift_mlp, scale_mlp, gate_mlp


class Modulation(nnx.Module):
    """``linear(silu(emb))`` split into ``n`` float32 (B, dim) chunks: the ``.linear`` of diffusers'
    ``AdaLayerNormZero`` / ``AdaLayerNormZeroSingle`` for a block that applies the chunks itself. The output width
    is named ``mod`` (a family splits it over tp with the rule ``("mod", "tp")``; the modulation is a large share of
    an MMDiT's weights)."""

    def __init__(self, dim: int, n: int, *, dtype: Any, rngs: nnx.Rngs):
        self.n = n
        self.linear = Linear(dim, n * dim, (None, "mod"), dtype=dtype, rngs=rngs, fp32_out=True)

    def __call__(self, emb: jax.Array) -> list[jax.Array]:
        return jnp.split(self.linear(jax.nn.silu(emb.astype(jnp.float32))), self.n, axis=-1)


class AdaLayerNormSingle(nnx.Module):
    """PixArt-alpha AdaLN-single (diffusers ``AdaLayerNormSingle`` without size conditions).

    ``timestep`` of any shape (B,), per token (B, S), per frame (B, F) -> sinusoid (``freq_dim``, cos first,
    shift 0) -> ``timestep_embedder`` MLP -> ``embedded`` (..., D); ``linear(silu(embedded))`` -> (..., n * D).
    Returns ``(modulation, embedded)``; blocks add their own ``scale_shift_table`` (:func:`split_modulation`)."""

    def __init__(self, dim: int, *, n: int = 6, freq_dim: int = 256, dtype: Any = jnp.float32, rngs: nnx.Rngs):
        self.freq_dim = freq_dim
        self.timestep_embedder = TimestepEmbedding(freq_dim, dim, dtype=dtype, rngs=rngs)
        self.linear = Linear(dim, n * dim, (None, "embed"), dtype=dtype, rngs=rngs, fp32_out=True)

    def __call__(self, timestep: jax.Array) -> tuple[jax.Array, jax.Array]:
        proj = timestep_embedding(timestep, self.freq_dim, flip_sin_to_cos=True, downscale_freq_shift=0)
        embedded = self.timestep_embedder(proj)
        return self.linear(jax.nn.silu(embedded)), embedded


class AdaLayerNormContinuous(nnx.Module):
    """diffusers ``AdaLayerNormContinuous``: ``linear(silu(cond))`` -> (scale, shift) — scale first — and
    ``norm(x) * (1 + scale) + shift``; ``norm`` is a LayerNorm (optional affine) or an RMSNorm."""

    def __init__(self, dim: int, cond_dim: int, *, eps: float = 1e-5, affine: bool = True, bias: bool = True,
                 norm: str = "layer_norm", dtype: Any = jnp.float32, rngs: nnx.Rngs):
        if norm not in ("layer_norm", "rms_norm"):
            raise ValueError(f"unknown norm {norm!r}: expected 'layer_norm' or 'rms_norm'")
        self.eps, self.kind = eps, norm
        self.linear = Linear(cond_dim, 2 * dim, (None, "embed"), dtype=dtype, rngs=rngs, bias=bias, fp32_out=True)
        self.norm_scale = param(jnp.ones((dim,), jnp.float32), ("embed",)) if affine else None
        with_bias = affine and bias and norm == "layer_norm"
        self.norm_bias = param(jnp.zeros((dim,), jnp.float32), ("embed",)) if with_bias else None

    def __call__(self, x: jax.Array, cond: jax.Array, *, per_frame: bool = False) -> jax.Array:
        scale, shift = jnp.split(self.linear(jax.nn.silu(cond.astype(jnp.float32))), 2, axis=-1)
        w = None if self.norm_scale is None else self.norm_scale[...]
        if self.kind == "layer_norm":
            h = layer_norm(x, self.eps, w, None if self.norm_bias is None else self.norm_bias[...])
        else:
            h = rms_norm(x, w, eps=self.eps, out_dtype=jnp.float32)
        return modulate(h, shift, scale, per_frame=per_frame).astype(x.dtype)


class AdaLNLoRA(nnx.Module):
    """Cosmos AdaLN-LoRA (diffusers ``CosmosAdaLayerNormZero`` / ``CosmosAdaLayerNorm``).

    Per block a low-rank map ``linear_2(linear_1(silu(e)))`` (``dim -> lora_dim -> n * dim``, no biases;
    ``lora_dim=None``: ``linear_2`` alone) plus an optional ``shared`` term (the time embedder's ``n' * dim``
    output, common to all blocks; its first ``n * dim`` features are used). Chunks are (shift, scale[, gate]):
    ``n=3`` returns ``(norm(x) * (1 + scale) + shift, gate)``, ``n=2`` the modulated x alone. ``e`` / ``shared``
    are (B, D) per sample, (B, S, D) per token or (B, F, D) per frame with ``per_frame``."""

    def __init__(self, dim: int, lora_dim: int | None = None, *, n: int = 3, eps: float = 1e-6,
                 dtype: Any = jnp.float32, rngs: nnx.Rngs):
        if n not in (2, 3):
            raise ValueError(f"AdaLN-LoRA has 2 (shift, scale) or 3 (+ gate) chunks, got {n}")
        self.n, self.dim, self.eps = n, dim, eps
        self.linear_1 = (Linear(dim, lora_dim, (None, None), dtype=dtype, rngs=rngs, bias=False, fp32_out=True)
                         if lora_dim is not None else None)
        self.linear_2 = Linear(lora_dim or dim, n * dim, (None, "embed"), dtype=dtype, rngs=rngs, bias=False,
                               fp32_out=True)

    def __call__(self, x: jax.Array, e: jax.Array, shared: jax.Array | None = None, *, per_frame: bool = False):
        h = jax.nn.silu(e.astype(jnp.float32))
        if self.linear_1 is not None:
            h = self.linear_1(h)
        mod = self.linear_2(h)
        if shared is not None:
            mod = mod + shared[..., : self.n * self.dim].astype(jnp.float32)
        chunks = jnp.split(mod, self.n, axis=-1)
        y = modulate(_norm(x, self.eps), chunks[0], chunks[1], per_frame=per_frame).astype(x.dtype)
        return (y, chunks[2]) if self.n == 3 else y
