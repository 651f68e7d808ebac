"""TPU backend: the Pallas TPU flash attention kernel (``jax.experimental.pallas.ops.tpu.flash_attention``).

The kernel wants (B, H, S, D), sequence lengths that are multiples of its blocks and a head_dim it can tile.
This wrapper transposes, pads head_dim to a multiple of 128 (zero columns change no dot product; the softmax
scale uses the true head_dim) and both sequences to multiples of the block sizes, expresses padded and
masked keys (and the caller's segment ids) as the kernel's segment ids, then slices the padding off. Rows
that see no key are filled in afterwards (see ``_common``), because the kernel would average over the padded
keys too. A causal mask is the kernel's own ``causal`` flag (it skips the blocks above the diagonal); the
mixture-of-transformers ``causal_prefix`` mask runs the kernel twice, on the causal prefix rows and on the
rest (``_common.split_at_causal_limit``). No (Sq, Sk) array exists outside the kernel's tiles.

``interpret=True`` runs the kernel in Pallas' TPU interpret mode (any platform, slow; for tests).
"""

from __future__ import annotations

import contextlib
import math

import jax
import jax.numpy as jnp

from vidax_core.attention.kernels._common import (causal_limit, fill_rows_without_keys, pad_axis, round_up,
                                                  split_at_causal_limit)

LANES = 128
DEFAULT_BLOCK_Q = 512
DEFAULT_BLOCK_K = 512


def import_error() -> str | None:
    """None when the kernel can be imported in this JAX, else why not (one line)."""
    try:
        from jax.experimental.pallas.ops.tpu import flash_attention  # noqa: F401
    except Exception as e:  # ImportError, or anything a moved/renamed module raises on import
        return f"jax.experimental.pallas.ops.tpu.flash_attention is not importable in jax {jax.__version__}: {e}"
    return None


def _interpret_context():
    """Context manager that makes Pallas TPU kernels run interpreted (API differs across JAX versions)."""
    from jax.experimental.pallas import tpu as pltpu

    force = getattr(pltpu, "force_tpu_interpret_mode", None)
    if force is not None:
        return force()
    raise RuntimeError(
        f"jax {jax.__version__} has no jax.experimental.pallas.tpu.force_tpu_interpret_mode; "
        "cannot run the Pallas TPU kernel interpreted"
    )


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
    interpret: bool = False,
    causal: bool = False,
    causal_prefix: int | None = None,
) -> jax.Array:
    if block_q % LANES or block_k % LANES or block_q < LANES or block_k < LANES:
        raise ValueError(f"pallas_tpu block sizes must be multiples of {LANES}; got {block_q}, {block_k}")
    limit = causal_limit(q.shape[1], k.shape[1], causal, causal_prefix)

    def run(q, k, v, kv_mask, q_seg, kv_seg, is_causal):
        return _flash(q, k, v, kv_mask, q_seg, kv_seg, is_causal, block_q, block_k, interpret)

    out = split_at_causal_limit(run, q, k, v, kv_mask, q_segment_ids, kv_segment_ids, limit)
    return fill_rows_without_keys(out.astype(v.dtype), v, kv_mask, q_segment_ids, kv_segment_ids, limit)


def _flash(q, k, v, kv_mask, q_segment_ids, kv_segment_ids, causal, block_q, block_k, interpret):
    """One kernel call; rows that see no key are left as the kernel made them (the caller fills them)."""
    from jax.experimental.pallas.ops.tpu import flash_attention as fa

    b, sq, h, d = q.shape
    sk = k.shape[1]
    bq = min(block_q, round_up(sq, LANES))
    bk = min(block_k, round_up(sk, LANES))
    sq_pad, sk_pad, d_pad = round_up(sq, bq), round_up(sk, bk), round_up(d, LANES)

    def prep(x, s_pad):  # (B, S, H, D) -> padded (B, H, S_pad, D_pad)
        return jnp.transpose(pad_axis(pad_axis(x, 1, s_pad), 3, d_pad), (0, 2, 1, 3))

    qt, kt, vt = prep(q, sq_pad), prep(k, sk_pad), prep(v, sk_pad)

    segment_ids = None
    if kv_mask is not None or q_segment_ids is not None or sk_pad != sk:
        key_ok = jnp.ones((b, sk), bool) if kv_mask is None else kv_mask.astype(bool)
        key_ok = pad_axis(key_ok, 1, sk_pad, False)
        if q_segment_ids is None:
            q_seg = jnp.ones((b, sq_pad), jnp.int32)
            kv_seg = key_ok.astype(jnp.int32)  # 0 never matches a query's 1
        else:
            q_seg = pad_axis(q_segment_ids.astype(jnp.int32), 1, sq_pad)
            hidden = jnp.min(q_seg) - 1  # matches no query
            kv_seg = jnp.where(key_ok, pad_axis(kv_segment_ids.astype(jnp.int32), 1, sk_pad), hidden)
        segment_ids = fa.SegmentIds(q=q_seg, kv=kv_seg)

    sizes = fa.BlockSizes(
        block_q=bq, block_k_major=bk, block_k=bk, block_b=1,
        block_q_major_dkv=bq, block_k_major_dkv=bk, block_k_dkv=bk, block_q_dkv=bq,
        block_k_major_dq=bk, block_k_dq=bk, block_q_dq=bq,
    )  # fmt: skip
    ctx = _interpret_context() if interpret else contextlib.nullcontext()
    with ctx:
        out = fa.flash_attention(qt, kt, vt, segment_ids=segment_ids, causal=causal, sm_scale=1.0 / math.sqrt(d),
                                 block_sizes=sizes)
    return jnp.transpose(out, (0, 2, 1, 3))[:, :sq, :, :d]
