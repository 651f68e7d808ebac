"""GPU backend: cuDNN fused (flash) attention through ``jax.nn.dot_product_attention(implementation="cudnn")``.

cuDNN takes bf16/fp16 (not fp32) inputs and head_dim a multiple of 8 up to 128 (256 on Hopper and later);
:func:`unsupported` says when a call falls outside that so the dispatcher can refuse (explicit backend) or
use ``xla`` for that call and log it (``auto``). ``kv_mask`` becomes cuDNN's padding mask: keys are
reordered so the valid ones come first (softmax attention does not depend on key order; for the usual
right-padded text mask the order does not change) and their count is passed as ``key_value_seq_lengths``,
so no (Sq, Sk) bias is ever built. A causal mask without ``kv_mask`` is cuDNN's own causal mask; the
mixture-of-transformers ``causal_prefix`` mask runs cuDNN twice, on the causal prefix rows and on the rest
(``_common.split_at_causal_limit``), so the video rows keep the padding-mask path. Segment ids, and a causal
mask together with ``kv_mask`` (key reordering would break causality), need a dense (B, 1, Sq', Sk') mask over
the rows concerned: fine for text-length parts (the causal text prefix). Where that mask would be long
(:func:`dense_mask_reason`, more than ``DENSE_MASK_LIMIT`` elements) the dispatcher runs the call on the
memory-linear ``blockwise`` backend under ``auto`` (logged once) and refuses it under ``attention.backend=cudnn``,
so a video-length sequence never gets an O(S^2) mask.
"""

from __future__ import annotations

import logging
import math

import jax
import jax.numpy as jnp

from vidax_core.attention.kernels._common import (
    causal_limit,
    fill_rows_without_keys,
    split_at_causal_limit,
    visible,
)

log = logging.getLogger("vidax.attention")

SUPPORTED_DTYPES = (jnp.bfloat16, jnp.float16)


def usable() -> str | None:
    """None when this process can run cuDNN fused attention, else why not (one line)."""
    try:
        devices = jax.devices("gpu")
    except Exception:  # RuntimeError today; any failure to list GPUs means there is none to use
        return f"no GPU (this process runs on {jax.default_backend()})"
    dev = devices[0]
    cc = getattr(dev, "compute_capability", None)
    if cc is None:
        return f"{dev.device_kind} is not a CUDA device"
    try:
        major, minor = (int(x) for x in str(cc).split(".")[:2])
    except ValueError:
        return f"cannot read the compute capability of {dev.device_kind} ({cc!r})"
    if (major, minor) < (8, 0):
        return f"{dev.device_kind} has compute capability {cc}; cuDNN flash attention needs 8.0 or newer"
    try:  # private helper; its absence in some JAX version is not a reason to refuse
        from jax._src.cudnn.fused_attention_stablehlo import check_cudnn_version
    except Exception:
        return None
    try:
        version = check_cudnn_version()
    except Exception as e:
        return f"cuDNN not found ({e})"
    if version < 8904:
        return f"cuDNN {version} is too old; fused attention needs 8.9.4 or newer"
    return None


def unsupported(q: jax.Array) -> str | None:
    """None when cuDNN takes these inputs, else why not."""
    d = q.shape[-1]
    if q.dtype not in SUPPORTED_DTYPES:
        return f"cuDNN attention takes bfloat16/float16 inputs, got {q.dtype}"
    if d % 8 or d > 256:
        return f"cuDNN attention needs head_dim a multiple of 8 and <= 256 (128 before Hopper), got {d}"
    return None


# Largest dense cuDNN mask (elements of B x Sq x Sk) the dispatcher lets through: text-length masks pass, a
# video-length one (a 720p Wan sequence is ~75k tokens) goes to the memory-linear blockwise backend instead.
DENSE_MASK_LIMIT = 1 << 24


def dense_mask_reason(q, k, kv_mask, q_segment_ids, causal: bool, causal_prefix: int | None) -> str | None:
    """Why this call would need a dense mask over long rows on cuDNN (None when it would not): segment ids, or a
    full causal mask together with a key mask. The causal prefix of a mixture-of-transformers call is short and
    stays on cuDNN."""
    b, sq, sk = q.shape[0], q.shape[1], k.shape[1]
    dense = q_segment_ids is not None or (causal and causal_prefix is None and kv_mask is not None)
    if dense and b * sq * sk > DENSE_MASK_LIMIT:
        what = "segment ids" if q_segment_ids is not None else "a causal mask with a key mask"
        return f"{what} would need a dense ({b}, 1, {sq}, {sk}) cuDNN mask"
    return None


def attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    *,
    kv_mask: jax.Array | None = None,
    q_segment_ids: jax.Array | None = None,
    kv_segment_ids: jax.Array | None = None,
    causal: bool = False,
    causal_prefix: int | None = None,
) -> jax.Array:
    limit = causal_limit(q.shape[1], k.shape[1], causal, causal_prefix)
    out = split_at_causal_limit(_fused, q, k, v, kv_mask, q_segment_ids, kv_segment_ids, limit)
    return fill_rows_without_keys(out.astype(v.dtype), v, kv_mask, q_segment_ids, kv_segment_ids, limit)


def _fused(q, k, v, kv_mask, q_segment_ids, kv_segment_ids, causal):
    """One cuDNN call; rows that see no key are left as cuDNN made them (the caller fills them)."""
    sq, d = q.shape[1], q.shape[-1]
    sk = k.shape[1]
    kk, vv, mask, kv_len = k, v, None, None
    if q_segment_ids is not None or (causal and kv_mask is not None):
        log.info("cudnn attention: dense (B, 1, %d, %d) mask for %s", sq, sk,
                 "segment ids" if q_segment_ids is not None else "a causal mask with kv_mask")
        mask = visible(kv_mask, q_segment_ids, kv_segment_ids, q.shape[0], sq, sk, sq if causal else 0)
        mask = jnp.broadcast_to(mask, (q.shape[0], 1, sq, sk))
        causal = False  # folded into the mask
    elif kv_mask is not None:
        ok = kv_mask.astype(bool)
        order = jnp.argsort(jnp.logical_not(ok), axis=1, stable=True)  # valid keys first, in order
        kk = jnp.take_along_axis(k, order[:, :, None, None], axis=1)
        vv = jnp.take_along_axis(v, order[:, :, None, None], axis=1)
        kv_len = jnp.sum(ok, axis=1).astype(jnp.int32)
    return jax.nn.dot_product_attention(
        q, kk, vv, mask=mask, key_value_seq_lengths=kv_len, scale=1.0 / math.sqrt(d), is_causal=causal,
        implementation="cudnn",
    )
