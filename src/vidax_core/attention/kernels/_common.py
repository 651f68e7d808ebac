"""Helpers shared by the attention backends: masks, padding, and the rows-with-no-valid-key convention.

Semantics every backend implements (the original einsum implementation defines them):

* logits = (q . k) / sqrt(D) accumulated in fp32, softmax in fp32, probabilities cast to ``v.dtype``;
* key j is visible to query i iff ``kv_mask[b, j]`` (when given) and ``q_segment_ids[b, i] ==
  kv_segment_ids[b, j]`` (when given);
* segment ids are int32 values below int32 max;
* a query row that sees no key at all gets the uniform average of ``v`` over all Sk keys (what a softmax
  over logits that are all ``finfo(float32).min`` gives).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

MASKED_LOGIT = float(jnp.finfo(jnp.float32).min)


def round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def pad_axis(x: jax.Array, axis: int, size: int, value=0) -> jax.Array:
    """Pad ``x`` at the end of ``axis`` up to ``size`` (no-op if already that long)."""
    extra = size - x.shape[axis]
    if extra == 0:
        return x
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, extra)
    return jnp.pad(x, widths, constant_values=value)


def check_inputs(q, k, v, kv_mask, q_segment_ids, kv_segment_ids) -> None:
    """Shape checks with messages that name the offending argument (programming errors: ValueError)."""
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError(f"attention wants (B, S, H, D) arrays; got q{q.shape} k{k.shape} v{v.shape}")
    b, _, h, d = q.shape
    if k.shape[0] != b or k.shape[2] != h or k.shape[3] != d:
        raise ValueError(f"k{k.shape} does not match q{q.shape} in batch, heads or head_dim")
    if v.shape[:3] != k.shape[:3]:
        raise ValueError(f"v{v.shape} does not match k{k.shape} in batch, length or heads")
    if kv_mask is not None and tuple(kv_mask.shape) != (b, k.shape[1]):
        raise ValueError(f"kv_mask must be (B, Sk) = {(b, k.shape[1])}; got {tuple(kv_mask.shape)}")
    if (q_segment_ids is None) != (kv_segment_ids is None):
        raise ValueError("pass both q_segment_ids and kv_segment_ids, or neither")
    if q_segment_ids is not None:
        if tuple(q_segment_ids.shape) != (b, q.shape[1]):
            raise ValueError(f"q_segment_ids must be (B, Sq) = {(b, q.shape[1])}; got {tuple(q_segment_ids.shape)}")
        if tuple(kv_segment_ids.shape) != (b, k.shape[1]):
            raise ValueError(
                f"kv_segment_ids must be (B, Sk) = {(b, k.shape[1])}; got {tuple(kv_segment_ids.shape)}"
            )


def visible(kv_mask, q_segment_ids, kv_segment_ids, b: int, sq: int, sk: int) -> jax.Array | None:
    """Boolean visibility broadcastable to (B, 1, Sq, Sk), or None when every key is visible."""
    mask = None
    if kv_mask is not None:
        mask = kv_mask.astype(bool)[:, None, None, :]
    if q_segment_ids is not None:
        seg = q_segment_ids[:, None, :, None] == kv_segment_ids[:, None, None, :]
        mask = seg if mask is None else jnp.logical_and(mask, seg)
    return mask


def rows_without_keys(kv_mask, q_segment_ids, kv_segment_ids, sq: int) -> jax.Array | None:
    """(B, Sq) bool, True where a query row sees no key; None when that cannot happen.

    Costs O((Sq + Sk) log Sk) (a sort and a binary search per batch row), never O(Sq * Sk).
    """
    if q_segment_ids is None:
        if kv_mask is None:
            return None
        empty = jnp.logical_not(jnp.any(kv_mask.astype(bool), axis=1))  # (B,)
        return jnp.broadcast_to(empty[:, None], (kv_mask.shape[0], sq))
    kv_seg = kv_segment_ids.astype(jnp.int32)
    q_seg = q_segment_ids.astype(jnp.int32)
    valid = jnp.ones(kv_seg.shape, bool) if kv_mask is None else kv_mask.astype(bool)
    # Sort the valid keys' ids first (invalid keys -> int32 max, sorted last), then binary-search each query id
    # and require an exact hit among the valid slots.
    big = jnp.iinfo(jnp.int32).max
    keys = jnp.sort(jnp.where(valid, kv_seg, big), axis=1)  # valid ids first, ascending
    n_valid = jnp.sum(valid, axis=1)

    def one(keys_b, q_b, n_b):
        pos = jnp.clip(jnp.searchsorted(keys_b, q_b), 0, keys_b.shape[0] - 1)
        return jnp.logical_not(jnp.logical_and(keys_b[pos] == q_b, pos < n_b))

    return jax.vmap(one)(keys, q_seg, n_valid)


def fill_rows_without_keys(out, v, kv_mask, q_segment_ids, kv_segment_ids) -> jax.Array:
    """Give rows that see no key the mean of ``v`` over all keys (the einsum backend's result for them)."""
    empty = rows_without_keys(kv_mask, q_segment_ids, kv_segment_ids, out.shape[1])
    if empty is None:
        return out
    mean_v = jnp.mean(v.astype(jnp.float32), axis=1).astype(out.dtype)  # (B, H, D)
    return jnp.where(empty[:, :, None, None], mean_v[:, None, :, :], out)
