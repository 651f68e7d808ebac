"""Pure-JAX flash-style attention: online softmax over key blocks, one query block at a time.

Two nested ``lax.scan`` loops (query blocks outside, key/value blocks inside) keep the largest intermediate
at (B, H, block_q, block_k) fp32 logits plus an fp32 (B, H, block_q, D) accumulator, so memory grows
linearly with the sequence length instead of with Sq * Sk. Lengths that are not multiples of the block sizes
are padded; padded keys get a logit of -inf (they never count, even for rows that see no real key) while
keys hidden by ``kv_mask``/segment ids get ``finfo(float32).min`` exactly like the einsum backend, so rows
that see no key come out as the mean of ``v`` with no special casing. Causal masks (``causal`` /
``causal_prefix``) are built per (block_q, block_k) tile from the block indices, like the padding.
Runs on any platform (it is what
the backend to pick on CPU for sequences of tens of thousands of tokens; see :mod:`vidax_core.attention`).

A **block mask** (``block_mask`` (B, H, Sq / g, Sk / g) bool at a granularity ``g`` = ``mask_block`` tokens, a
block-sparse attention such as NABLA's, :mod:`vidax_core.attention.nabla`) is expanded per tile from its slice, so
no (Sq, Sk) array ever exists, and a tile whose slice is all False is skipped (``lax.cond``: on an accelerator its
two matmuls do not run). The tiles are then multiples of ``g``.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

from vidax_core.attention.kernels._common import MASKED_LOGIT, causal_limit, causal_visible, pad_axis, round_up

DEFAULT_BLOCK_Q = 512
DEFAULT_BLOCK_K = 1024


def attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    *,
    kv_mask: jax.Array | None = None,
    q_segment_ids: jax.Array | None = None,
    kv_segment_ids: jax.Array | None = None,
    block_q: int = DEFAULT_BLOCK_Q,
    block_k: int = DEFAULT_BLOCK_K,
    causal: bool = False,
    causal_prefix: int | None = None,
    block_mask: jax.Array | None = None,
    mask_block: int = 64,
) -> jax.Array:
    b, sq, h, d = q.shape
    sk = k.shape[1]
    limit = causal_limit(sq, sk, causal, causal_prefix)
    if block_q < 1 or block_k < 1:
        raise ValueError(f"block sizes must be positive; got block_q={block_q}, block_k={block_k}")
    bq = min(block_q, sq)
    bk = min(block_k, sk)
    if block_mask is not None:
        g = mask_block
        if sq % g or sk % g or tuple(block_mask.shape) != (b, h, sq // g, sk // g):
            raise ValueError(f"block_mask {tuple(block_mask.shape)} does not cover ({b}, {h}, {sq}/{g}, {sk}/{g})")
        bq, bk = round_up(min(bq, sq), g), round_up(min(bk, sk), g)
    sq_pad, sk_pad = round_up(sq, bq), round_up(sk, bk)
    nq, nk = sq_pad // bq, sk_pad // bk
    scale = 1.0 / math.sqrt(d)

    # Block-major layouts for scan: (n_blocks, B, block, H, D) and (n_blocks, B, block).
    def blocks(x, n, blk, s_pad):
        x = pad_axis(x, 1, s_pad)
        return jnp.moveaxis(x.reshape((b, n, blk) + x.shape[2:]), 1, 0)

    qb = blocks(q, nq, bq, sq_pad)
    kb = blocks(k, nk, bk, sk_pad)
    vb = blocks(v, nk, bk, sk_pad)
    key_real = blocks(jnp.ones((b, sk), bool), nk, bk, sk_pad)  # False on padding
    key_ok = key_real if kv_mask is None else blocks(kv_mask.astype(bool), nk, bk, sk_pad)
    use_seg = q_segment_ids is not None
    if use_seg:
        qsb = blocks(q_segment_ids.astype(jnp.int32), nq, bq, sq_pad)
        ksb = blocks(kv_segment_ids.astype(jnp.int32), nk, bk, sk_pad)
    else:  # dummies so that the scan structure is the same
        qsb = jnp.zeros((nq, b, 1), jnp.int32)
        ksb = jnp.zeros((nk, b, 1), jnp.int32)

    if block_mask is not None:  # (nq, B, H, bq / g, Sk_pad / g), the padding masked
        bm = jnp.pad(block_mask.astype(bool), ((0, 0), (0, 0), (0, (sq_pad - sq) // g), (0, (sk_pad - sk) // g)))
        bmb = jnp.moveaxis(bm.reshape(b, h, nq, bq // g, sk_pad // g), 2, 0)
    else:
        bmb = jnp.zeros((nq, 1, 1, 1, 1), bool)

    def q_step(_, q_in):
        q_blk, q_seg, qi, q_mask = q_in  # (B, bq, H, D), (B, bq), block index, (B, H, bq / g, Sk_pad / g)

        def kv_step(carry, kv_in):
            k_blk, v_blk, real, ok, k_seg, ki = kv_in
            if block_mask is None:
                return tile(carry, kv_in, None), None
            tile_mask = lax.dynamic_slice_in_dim(q_mask, ki * (bk // g), bk // g, axis=3)
            return lax.cond(jnp.any(tile_mask), lambda c: tile(c, kv_in, tile_mask), lambda c: c, carry), None

        def tile(carry, kv_in, tile_mask):
            m, row_sum, acc = carry  # (B, H, bq), (B, H, bq), (B, H, bq, D) fp32
            k_blk, v_blk, real, ok, k_seg, ki = kv_in
            s = jnp.einsum("bqhd,bkhd->bhqk", q_blk, k_blk, preferred_element_type=jnp.float32) * scale
            vis = ok[:, None, None, :]
            if tile_mask is not None:
                vis = jnp.logical_and(vis, jnp.repeat(jnp.repeat(tile_mask, g, axis=2), g, axis=3))
            if use_seg:
                vis = jnp.logical_and(vis, (q_seg[:, :, None] == k_seg[:, None, :])[:, None])
            if limit:
                pos_q = qi * bq + jnp.arange(bq, dtype=jnp.int32)
                pos_k = ki * bk + jnp.arange(bk, dtype=jnp.int32)
                vis = jnp.logical_and(vis, causal_visible(pos_q, pos_k, limit)[None, None])
            s = jnp.where(vis, s, MASKED_LOGIT)
            s = jnp.where(real[:, None, None, :], s, -jnp.inf)
            m_new = jnp.maximum(m, jnp.max(s, axis=-1))  # finite: the first block always has a real key
            p = jnp.exp(s - m_new[..., None])
            alpha = jnp.exp(m - m_new)
            row_sum = alpha * row_sum + jnp.sum(p, axis=-1)
            pv = jnp.einsum("bhqk,bkhd->bhqd", p.astype(v_blk.dtype), v_blk, preferred_element_type=jnp.float32)
            acc = alpha[..., None] * acc + pv
            return m_new, row_sum, acc

        init = (
            jnp.full((b, h, bq), -jnp.inf, jnp.float32),
            jnp.zeros((b, h, bq), jnp.float32),
            jnp.zeros((b, h, bq, d), jnp.float32),
        )
        (_, row_sum, acc), _ = lax.scan(kv_step, init,
                                        (kb, vb, key_real, key_ok, ksb, jnp.arange(nk, dtype=jnp.int32)))
        out = (acc / row_sum[..., None]).astype(v.dtype)  # (B, H, bq, D)
        return None, jnp.transpose(out, (0, 2, 1, 3))  # (B, bq, H, D)

    _, out = lax.scan(q_step, None, (qb, qsb, jnp.arange(nq, dtype=jnp.int32), bmb))  # (nq, B, bq, H, D)
    out = jnp.moveaxis(out, 0, 1).reshape(b, sq_pad, h, d)
    return out[:, :sq]
