"""Helpers shared by the attention backends: masks, padding, and the rows-with-no-valid-key convention.

Semantics every backend implements (the original einsum implementation defines them):

* logits = (q . k) / sqrt(D) accumulated in fp32, softmax in fp32, probabilities cast to ``v.dtype``;
* key j is visible to query i iff ``kv_mask[b, j]`` (when given) and ``q_segment_ids[b, i] ==
  kv_segment_ids[b, j]`` (when given) and, for a query row ``i < causal_limit``, ``j <= i``;
* ``causal_limit`` (a static int, see :func:`causal_limit`) is how causal masks travel: ``causal=True`` is
  ``causal_limit = S`` (every row causal), ``causal_prefix=P`` is ``causal_limit = P`` (the mixture-of-transformers
  mask of Cosmos3: the first P tokens attend causally among themselves, every later token sees all keys), 0 is
  no causal mask. Masks are always these O(S) pieces; a backend that needs a mask tile builds it per tile;
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


def causal_limit(sq: int, sk: int, causal: bool = False, causal_prefix: int | None = None) -> int:
    """The static number of leading query rows that are causal (see the module docstring); 0 for none.

    Causal masks compare query and key positions, so they need ``Sq == Sk`` (self-attention).
    """
    if causal and causal_prefix is not None:
        raise ValueError("pass causal=True or causal_prefix=P, not both (causal=True is causal_prefix=S)")
    if not causal and causal_prefix is None:
        return 0
    if sq != sk:
        raise ValueError(f"causal masks need Sq == Sk (self-attention); got Sq={sq}, Sk={sk}")
    if causal:
        return sq
    p = int(causal_prefix)
    if not 0 <= p <= sq:
        raise ValueError(f"causal_prefix must be in [0, S={sq}]; got {p}")
    return p


def lengths_to_mask(kv_lengths: jax.Array, sk: int, kv_mask: jax.Array | None = None) -> jax.Array:
    """(B,) valid-key counts -> (B, Sk) bool right-padding mask, and-ed with ``kv_mask`` when given."""
    mask = jnp.arange(sk, dtype=jnp.int32)[None, :] < jnp.asarray(kv_lengths, jnp.int32)[:, None]
    return mask if kv_mask is None else jnp.logical_and(mask, kv_mask.astype(bool))


def causal_visible(q_pos: jax.Array, k_pos: jax.Array, limit: int) -> jax.Array:
    """(len(q_pos), len(k_pos)) bool tile of the causal rule for absolute positions ``q_pos``/``k_pos``."""
    return jnp.logical_or(q_pos[:, None] >= limit, k_pos[None, :] <= q_pos[:, None])


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


def visible(kv_mask, q_segment_ids, kv_segment_ids, b: int, sq: int, sk: int, limit: int = 0) -> jax.Array | None:
    """Dense boolean visibility broadcastable to (B, 1, Sq, Sk), or None when every key is visible.

    Only for backends that hold (Sq, Sk) logits anyway (einsum, per-head).
    """
    mask = None
    if limit:
        pos_q, pos_k = jnp.arange(sq, dtype=jnp.int32), jnp.arange(sk, dtype=jnp.int32)
        mask = causal_visible(pos_q, pos_k, limit)[None, None]
    if kv_mask is not None:
        km = kv_mask.astype(bool)[:, None, None, :]
        mask = km if mask is None else jnp.logical_and(mask, km)
    if q_segment_ids is not None:
        seg = q_segment_ids[:, None, :, None] == kv_segment_ids[:, None, None, :]
        mask = seg if mask is None else jnp.logical_and(mask, seg)
    return mask


def rows_without_keys(kv_mask, q_segment_ids, kv_segment_ids, sq: int, limit: int = 0) -> jax.Array | None:
    """(B, Sq) bool, True where a query row sees no key; None when that cannot happen.

    Costs O((Sq + Sk) log Sk) (a stable sort and a binary search per batch row), never O(Sq * Sk): the valid keys
    are sorted by segment id (position order kept within an id), so a binary search finds, for each query, the
    first valid key of its segment; a causal row ``i`` is empty when that key comes after ``i``.
    """
    if kv_mask is None and q_segment_ids is None:
        return None  # every non-causal row sees every key; causal row i sees key i (Sq == Sk)
    b = (kv_mask if kv_mask is not None else q_segment_ids).shape[0]
    if q_segment_ids is None:
        q_seg = jnp.zeros((b, sq), jnp.int32)
        kv_seg = jnp.zeros(kv_mask.shape, jnp.int32)
    else:
        q_seg, kv_seg = q_segment_ids.astype(jnp.int32), kv_segment_ids.astype(jnp.int32)
    valid = jnp.ones(kv_seg.shape, bool) if kv_mask is None else kv_mask.astype(bool)
    big = jnp.iinfo(jnp.int32).max
    order = jnp.argsort(jnp.where(valid, kv_seg, big), axis=1, stable=True)  # valid ids first, ascending
    ids = jnp.take_along_axis(jnp.where(valid, kv_seg, big), order, axis=1)
    n_valid = jnp.sum(valid, axis=1)
    q_pos = jnp.arange(sq, dtype=jnp.int32)

    def one(ids_b, order_b, q_b, n_b):
        slot = jnp.clip(jnp.searchsorted(ids_b, q_b, side="left"), 0, ids_b.shape[0] - 1)
        hit = jnp.logical_and(ids_b[slot] == q_b, slot < n_b)
        too_late = jnp.logical_and(q_pos < limit, order_b[slot] > q_pos)  # causal row: first own key after it
        return jnp.logical_not(jnp.logical_and(hit, jnp.logical_not(too_late)))

    return jax.vmap(one)(ids, order, q_seg, n_valid)


def fill_rows_without_keys(out, v, kv_mask, q_segment_ids, kv_segment_ids, limit: int = 0) -> jax.Array:
    """Give rows that see no key the mean of ``v`` over all keys (the einsum backend's result for them)."""
    empty = rows_without_keys(kv_mask, q_segment_ids, kv_segment_ids, out.shape[1], limit)
    if empty is None:
        return out
    mean_v = jnp.mean(v.astype(jnp.float32), axis=1).astype(out.dtype)  # (B, H, D)
    return jnp.where(empty[:, :, None, None], mean_v[:, None, :, :], out)


def split_at_causal_limit(fn, q, k, v, kv_mask, q_segment_ids, kv_segment_ids, limit: int) -> jax.Array:
    """Run a kernel that knows only plain causal masks on a ``causal_limit`` mask by splitting the query rows.

    Rows ``< limit`` attend causally to keys ``< limit`` (keys past the limit are never visible to them), rows
    ``>= limit`` attend to every key without a causal mask; the two row sets are disjoint, so their outputs are
    concatenated. ``fn(q, k, v, kv_mask, q_segment_ids, kv_segment_ids, causal)`` returns (B, Sq', H, D).
    """
    sq = q.shape[1]
    sl = lambda x, a, b: None if x is None else x[:, a:b]  # noqa: E731
    parts = []
    if limit:
        parts.append(fn(q[:, :limit], k[:, :limit], v[:, :limit], sl(kv_mask, 0, limit),
                        sl(q_segment_ids, 0, limit), sl(kv_segment_ids, 0, limit), True))
    if limit < sq:
        parts.append(fn(q[:, limit:], k, v, kv_mask, sl(q_segment_ids, limit, sq), kv_segment_ids, False))
    return parts[0] if len(parts) == 1 else jnp.concatenate(parts, axis=1)
