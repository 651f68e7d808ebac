"""The DiT attention block (diffusers ``Attention``): q/k/v projections, q/k norm, RoPE, attention, ``to_out``.

One module serves self-attention over the (sequence-sharded) video tokens (softmax, or linear as SANA's:
:meth:`Attention.linear`), cross-attention to a replicated text sequence, a second key/value set the same queries
also attend to (``added_kv_dim``: Wan's image tokens), and the projections of one stream of a joint (dual-stream)
attention (:meth:`Attention.qkv` + :meth:`Attention.out`, the joint attention itself being
:func:`vidax_core.attention.ulysses.joint_attention`).

Tensor parallelism: q/k/v are column-parallel (outputs sharded over ``heads``), ``to_out`` is row-parallel (one
all-reduce, then its bias). A q/k norm over the full width (``rms_norm_across_heads``) runs before the head split
and reduces across the tp shards (partial sum + all-reduce), so it stays exact; per-head norms run after it.

The q/k norm is named as diffusers' ``qk_norm``: ``rms_norm_across_heads``, ``layer_norm_across_heads`` (affine),
``l2`` (``x / max(|x|, eps)``, no parameter), all three over the full width; ``rms_norm`` (per head),
``layer_norm`` (per head, affine) or None. RoPE tables are ``(cos, sin)`` of shape (S, head_dim / 2) shared by all
heads, or anything broadcastable to (B, S, H, head_dim / 2); ``rope`` picks the pair convention (``interleaved``
pairs ``(x[2i], x[2i+1])`` or ``rotate_half``).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from vidax_core.attention import linear as linear_attention
from vidax_core.attention import ulysses
from vidax_core.nn import rope as rope_lib
from vidax_core.nn.layers import Linear
from vidax_core.nn.norms import LayerNorm, RMSNorm
from vidax_core.parallel.sharding import constrain

EMBED, HEADS, BATCH, SEQ = "embed", "heads", "batch", "seq"

QK_NORMS = ("rms_norm_across_heads", "layer_norm_across_heads", "l2", "rms_norm", "layer_norm", None)
ACROSS_HEADS = ("rms_norm_across_heads", "layer_norm_across_heads", "l2")  # normed over the full width
ROPE_STYLES = ("interleaved", "rotate_half")

Rope = tuple[jax.Array, jax.Array]

#: feature maps of linear attention's queries and keys (:meth:`Attention.linear`)
LINEAR_FEATURES = {"relu": jax.nn.relu}


def qk_norm_layer(kind: str | None, dim: int, heads: int, eps: float) -> nnx.Module | None:
    """The norm diffusers builds for ``qk_norm=kind`` on a projection of width ``dim`` split into ``heads``."""
    if kind not in QK_NORMS:
        raise ValueError(f"qk_norm={kind!r}: expected one of {QK_NORMS}")
    if kind is None:
        return None
    if kind == "rms_norm_across_heads":
        return RMSNorm(dim, (HEADS,), eps=eps)
    if kind == "layer_norm_across_heads":
        return LayerNorm(dim, (HEADS,), eps=eps, out_dtype=None)
    if kind == "l2":
        return L2Norm(eps)
    if kind == "rms_norm":
        return RMSNorm(dim // heads, (None,), eps=eps)
    return LayerNorm(dim // heads, eps=eps)


class L2Norm(nnx.Module):
    """diffusers' ``LpNorm(p=2)``: ``x / max(|x|_2, eps)`` over the last axis, in float32; no parameter."""

    def __init__(self, eps: float):
        self.eps = eps

    def __call__(self, x: jax.Array) -> jax.Array:
        xf = x.astype(jnp.float32)
        norm = jnp.sqrt(jnp.sum(xf * xf, axis=-1, keepdims=True))
        return (xf / jnp.maximum(norm, self.eps)).astype(x.dtype)


def split_heads(x: jax.Array, heads: int) -> jax.Array:
    """(B, S, H * D) -> (B, S, H, D)."""
    return x.reshape(*x.shape[:2], heads, -1)


def merge_heads(x: jax.Array) -> jax.Array:
    """(B, S, H, D) -> (B, S, H * D)."""
    return x.reshape(*x.shape[:2], -1)


def project_heads(proj: Linear, norm: nnx.Module | None, x: jax.Array, names: tuple, heads: int, *,
                  across_heads: bool = False) -> jax.Array:
    """``proj(x)`` pinned to ``names``, normed (over the full width before the split when ``across_heads``, else
    per head after it), split into heads; the result keeps the projection's dtype."""
    y = constrain(proj(x), names)
    if norm is not None and across_heads:
        return split_heads(constrain(norm(y), names), heads)
    y = split_heads(y, heads)
    return y if norm is None else norm(y).astype(y.dtype)


def rotate(x: jax.Array, rope: Rope, style: str = "interleaved") -> jax.Array:
    """Apply RoPE ``(cos, sin)`` to (B, S, H, D); (S, D/2) tables are shared by every head."""
    cos, sin = rope
    if cos.ndim == 2:
        cos, sin = cos[:, None, :], sin[:, None, :]
    return rope_lib.apply(x, cos, sin, interleaved=style == "interleaved")


class Attention(nnx.Module):
    """``to_q`` / ``to_k`` / ``to_v`` / ``to_out`` (+ ``norm_q`` / ``norm_k``; with ``added_kv_dim`` also
    ``add_k_proj`` / ``add_v_proj`` / ``norm_added_k``), parameters in ``dtype``.

    ``kv_dim``: width of the key/value input (the text width for cross-attention; default ``dim``). ``bias``:
    q/k/v (and added k/v) biases; ``out_bias``: ``to_out``'s (default ``bias``).
    """

    def __init__(self, dim: int, heads: int, *, dtype: Any, rngs: nnx.Rngs, kv_dim: int | None = None,
                 bias: bool = True, out_bias: bool | None = None, qk_norm: str | None = "rms_norm",
                 qk_eps: float = 1e-6, added_kv_dim: int | None = None, rope: str = "interleaved"):
        if dim % heads:
            raise ValueError(f"attention width {dim} does not split into {heads} heads")
        if rope not in ROPE_STYLES:
            raise ValueError(f"rope={rope!r}: expected one of {ROPE_STYLES}")
        kv_dim = dim if kv_dim is None else kv_dim
        out_bias = bias if out_bias is None else out_bias
        self.heads = heads
        self.across_heads = qk_norm in ACROSS_HEADS
        self.rope_style = rope
        self.to_q = Linear(dim, dim, (EMBED, HEADS), dtype=dtype, rngs=rngs, bias=bias)
        self.to_k = Linear(kv_dim, dim, (EMBED, HEADS), dtype=dtype, rngs=rngs, bias=bias)
        self.to_v = Linear(kv_dim, dim, (EMBED, HEADS), dtype=dtype, rngs=rngs, bias=bias)
        self.to_out = Linear(dim, dim, (HEADS, EMBED), dtype=dtype, rngs=rngs, bias=out_bias)
        self.norm_q = qk_norm_layer(qk_norm, dim, heads, qk_eps)
        self.norm_k = qk_norm_layer(qk_norm, dim, heads, qk_eps)
        if added_kv_dim is not None:
            self.add_k_proj = Linear(added_kv_dim, dim, (EMBED, HEADS), dtype=dtype, rngs=rngs, bias=bias)
            self.add_v_proj = Linear(added_kv_dim, dim, (EMBED, HEADS), dtype=dtype, rngs=rngs, bias=bias)
            self.norm_added_k = qk_norm_layer(qk_norm, dim, heads, qk_eps)
        else:
            self.add_k_proj = self.add_v_proj = self.norm_added_k = None

    def _q(self, x: jax.Array, seq: str | None) -> jax.Array:
        return project_heads(self.to_q, self.norm_q, x, (BATCH, seq, HEADS), self.heads,
                             across_heads=self.across_heads)

    def _kv(self, kv: jax.Array, seq: str | None) -> tuple[jax.Array, jax.Array]:
        names = (BATCH, seq, HEADS)
        return (project_heads(self.to_k, self.norm_k, kv, names, self.heads, across_heads=self.across_heads),
                project_heads(self.to_v, None, kv, names, self.heads))

    def qkv(self, x: jax.Array, seq: str | None = SEQ, rope: Rope | None = None
            ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """One stream's (q, k, v), each (B, S, H, D), RoPE applied to q and k when given; ``seq`` names the token
        axis (None: a replicated stream such as the text of a joint attention)."""
        q = self._q(x, seq)
        k, v = self._kv(x, seq)
        if rope is not None:
            q, k = rotate(q, rope, self.rope_style), rotate(k, rope, self.rope_style)
        return q, k, v

    def cached(self, x: jax.Array, rope: Rope | None, past: tuple[jax.Array, jax.Array] | None, *,
               limits: tuple[tuple[int, int], ...], zero_keys: int = 0) -> tuple[jax.Array, tuple]:
        """Self-attention of new tokens ``x`` (B, S, dim) over a cached prefix ``past`` (keys after RoPE, in the
        cache layout) and themselves, by ``limits`` (:func:`vidax_core.attention.ulysses.prefix_attention`).
        Returns ``to_out``'s output and the new tokens' (k, v) (after RoPE) in the cache layout."""
        q, k, v = self.qkv(x, SEQ, rope)
        o, k_all, v_all = ulysses.prefix_attention(q, k, v, past, limits=limits, zero_keys=zero_keys)
        return self.out(o), (k_all, v_all)

    def linear(self, x: jax.Array, rope: Rope | None = None, *, feature: str = "relu",
               eps: float = linear_attention.EPS) -> jax.Array:
        """Linear self-attention over ``x`` (B, S, dim), SANA's: q and k (normed) through ``feature`` (ReLU), the
        numerator's q and k rotated by ``rope`` when given (the normaliser's not), the per-head key/value summaries
        summed over sp (:func:`vidax_core.attention.linear.self_attention`: no head exchange), ``to_out``."""
        if feature not in LINEAR_FEATURES:
            raise ValueError(f"linear attention feature {feature!r}: expected one of {sorted(LINEAR_FEATURES)}")
        q, (k, v) = self._q(x, SEQ), self._kv(x, SEQ)
        q, k = LINEAR_FEATURES[feature](q), LINEAR_FEATURES[feature](k)
        qn, kn = (rotate(q, rope, self.rope_style), rotate(k, rope, self.rope_style)) if rope is not None else (q, k)
        return self.out(linear_attention.self_attention(q, k, v, q_num=qn, k_num=kn, eps=eps))

    def out(self, o: jax.Array, seq: str | None = SEQ) -> jax.Array:
        """Attention output (B, S, H, D) -> ``to_out`` (B, S, dim), row-parallel."""
        o = constrain(merge_heads(o), (BATCH, seq, HEADS))
        return constrain(self.to_out(o), (BATCH, seq, EMBED))

    def attend(self, x: jax.Array, kv: jax.Array | None = None, *, q_seq: str | None = SEQ,
               kv_seq: str | None = SEQ, q_rope: Rope | None = None, k_rope: Rope | None = None,
               kv_mask: jax.Array | None = None) -> jax.Array:
        """Attention between two streams of any placement: queries ``x`` (B, S, dim) whose token axis is named
        ``q_seq`` (``seq``: sequence-sharded, None: held whole on every rank), keys/values from ``kv`` (None:
        ``x``) named ``kv_seq``; RoPE on the queries (``q_rope``) and keys (``k_rope``, default ``q_rope``) when
        given. Sharded against sharded is the Ulysses self-attention, sharded queries against whole keys a
        cross-attention, whole queries against sharded keys gather the keys
        (:func:`vidax_core.attention.ulysses.gathered_kv_attention`), whole against whole run locally."""
        kv = x if kv is None else kv
        q = self._q(x, q_seq)
        k, v = self._kv(kv, kv_seq)
        if q_rope is not None:
            q = rotate(q, q_rope, self.rope_style)
        k_rope = q_rope if k_rope is None else k_rope
        if k_rope is not None:
            k = rotate(k, k_rope, self.rope_style)
        o = ulysses.attend(q, k, v, q_sharded=q_seq == SEQ, kv_sharded=kv_seq == SEQ, kv_mask=kv_mask)
        return self.out(o, q_seq)

    def __call__(self, x: jax.Array, kv: jax.Array | None = None, rope: Rope | None = None, *,
                 kv_mask: jax.Array | None = None, added_kv: jax.Array | None = None,
                 skip: jax.Array | None = None, causal_block: int | None = None) -> jax.Array:
        """Self-attention over ``x`` (B, S, dim) when ``kv`` is None (Ulysses all-to-all around the attention under
        sequence parallelism), else cross-attention of the sequence-sharded queries to the replicated ``kv``
        (B, L, kv_dim) under ``kv_mask`` (B, L) bool.

        ``rope``: self-attention only. ``added_kv`` (B, Li, added_kv_dim), cross-attention only: a second
        key/value set (own projections, normed keys) the same queries attend to; the two outputs are summed
        before ``to_out``. ``skip`` (B,) float: where 1, the attention is skipped and the values pass straight to
        ``to_out`` (spatio-temporal guidance's perturbed pass). ``causal_block`` (static int), self-attention only:
        block-causal attention over blocks of that many tokens (:func:`vidax_core.attention.attention`)."""
        if kv is not None and (rope is not None or causal_block is not None):
            raise ValueError("RoPE and causal blocks apply to self-attention only")
        if added_kv is not None and (kv is None or self.add_k_proj is None):
            raise ValueError("added key/values go to a cross-attention built with added_kv_dim")
        if kv is None:
            q, k, v = self.qkv(x, SEQ, rope)
            o = ulysses.self_attention(q, k, v, kv_mask=kv_mask, causal_block=causal_block)
        else:
            q = self._q(x, SEQ)
            k, v = self._kv(kv, None)
            o = ulysses.cross_attention(q, k, v, kv_mask=kv_mask)
        if skip is not None:
            o = jnp.where(skip[:, None, None, None] > 0, v.astype(o.dtype), o)
        o = constrain(merge_heads(o), (BATCH, SEQ, HEADS))
        if added_kv is not None:
            names = (BATCH, None, HEADS)
            k2 = project_heads(self.add_k_proj, self.norm_added_k, added_kv, names, self.heads,
                               across_heads=self.across_heads)
            v2 = project_heads(self.add_v_proj, None, added_kv, names, self.heads)
            o = o + constrain(merge_heads(ulysses.cross_attention(q, k2, v2)), (BATCH, SEQ, HEADS))
        return constrain(self.to_out(o), (BATCH, SEQ, EMBED))
