"""GPU backend: cuDNN fused (flash) attention through ``jax.nn.dot_product_attention(implementation="cudnn")``.

cuDNN takes bf16/fp16 (not fp32) inputs and head_dim a multiple of 8 up to 128 (256 on Hopper and later);
:func:`unsupported` says when a call falls outside that so the dispatcher can refuse (explicit backend) or
use ``xla`` for that call and log it (``auto``). ``kv_mask`` becomes cuDNN's padding mask: keys are
reordered so the valid ones come first (softmax attention does not depend on key order; for the usual
right-padded text mask the order does not change) and their count is passed as ``key_value_seq_lengths``,
so no (Sq, Sk) bias is ever built. Segment ids need a dense (B, 1, Sq, Sk) mask: fine for short key
sequences, costly for long self-attention.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from vidax_core.attention.kernels._common import fill_rows_without_keys

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


def attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    *,
    kv_mask: jax.Array | None = None,
    q_segment_ids: jax.Array | None = None,
    kv_segment_ids: jax.Array | None = None,
) -> jax.Array:
    b, sq, _, d = q.shape
    kk, vv, mask, kv_len = k, v, None, None
    if q_segment_ids is not None:
        mask = (q_segment_ids[:, :, None] == kv_segment_ids[:, None, :])[:, None]  # (B, 1, Sq, Sk)
        if kv_mask is not None:
            mask = jnp.logical_and(mask, kv_mask.astype(bool)[:, None, None, :])
    elif kv_mask is not None:
        ok = kv_mask.astype(bool)
        order = jnp.argsort(jnp.logical_not(ok), axis=1, stable=True)  # valid keys first, in order
        kk = jnp.take_along_axis(k, order[:, :, None, None], axis=1)
        vv = jnp.take_along_axis(v, order[:, :, None, None], axis=1)
        kv_len = jnp.sum(ok, axis=1).astype(jnp.int32)
    out = jax.nn.dot_product_attention(
        q, kk, vv, mask=mask, key_value_seq_lengths=kv_len, scale=1.0 / math.sqrt(d), implementation="cudnn"
    )
    return fill_rows_without_keys(out.astype(v.dtype), v, kv_mask, q_segment_ids, kv_segment_ids)
