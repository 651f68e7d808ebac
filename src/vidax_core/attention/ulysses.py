"""Attention under the (dp, sp, tp) mesh: Ulysses sequence parallelism, plain and joint.

Tokens stay split over ``sp`` for the whole block; only attention needs every token. Around self-attention an
all-to-all swaps "my tokens, all my heads" for "all tokens, 1/sp of my heads", attention runs locally, and a second
all-to-all swaps back (DeepSpeed-Ulysses). Cross-attention needs no exchange: each device's query tokens attend
to the replicated text.

Every variant runs the attention backend (:func:`vidax_core.attention.attention`) inside ``shard_map`` on local
shapes, so a backend never sees a global sharded array (kernels such as Pallas/cuDNN cannot be auto-partitioned).
Without an active multi-device mesh (:func:`vidax_core.parallel.sharding.activate`)
each function is the plain computation.

Layouts are (batch, seq, heads, head_dim); logical names: batch -> dp, seq -> sp, heads -> tp. Heads are split by
tp first (the shard_map's local heads), then by sp inside the all-to-all.

Masks (see :func:`vidax_core.attention.attention`) are passed as global (B, S) arrays and enter every device
whole (they are O(S)): after the all-to-all a device holds the full sequence for its heads, in global order, so
key masks, segment ids and causal positions mean the same there as on one device. The one exception is
``q_segment_ids`` of cross-attention, whose queries stay sequence-sharded.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from vidax_core.parallel import sharding
from vidax_core.attention import attention
from vidax_core.attention.kernels import _common


def _specs(ctx: sharding.ShardingContext, seq_sharded: bool) -> P:
    return P(ctx.axis("batch"), ctx.axis("seq") if seq_sharded else None, ctx.axis("heads"), None)


def _seq_to_heads(x: jax.Array, axis: str) -> jax.Array:
    """(B, S/sp, h, D) -> (B, S, h/sp, D): split heads into sp parts, gather the sequence (device order)."""
    return jax.lax.all_to_all(x, axis, split_axis=2, concat_axis=1, tiled=True)


def _heads_to_seq(x: jax.Array, axis: str) -> jax.Array:
    return jax.lax.all_to_all(x, axis, split_axis=1, concat_axis=2, tiled=True)


def _mask_spec(ctx: sharding.ShardingContext, seq_sharded: bool = False) -> P:
    return P(ctx.axis("batch"), ctx.axis("seq") if seq_sharded else None)


def _split_masks(masks: dict, specs: dict):
    """The given (not None) mask arrays and their specs, in a fixed order, plus their names."""
    names = tuple(n for n in sorted(masks) if masks[n] is not None)
    return names, tuple(masks[n] for n in names), tuple(specs[n] for n in names)


def self_attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    *,
    kv_mask: jax.Array | None = None,
    q_segment_ids: jax.Array | None = None,
    kv_segment_ids: jax.Array | None = None,
    kv_lengths: jax.Array | None = None,
    causal: bool = False,
    causal_prefix: int | None = None,
    causal_block: int | None = None,
    fn=None,
) -> jax.Array:
    """Attention where q, k and v are all sequence-sharded (video self-attention): Ulysses when sp > 1.

    Mask keywords as in :func:`vidax_core.attention.attention`, as global (B, S) / (B,) arrays. ``fn(q, k, v)``
    replaces the backend call (no mask keywords then): an attention that needs the whole sequence of its heads,
    such as NABLA's block-sparse one (:mod:`vidax_core.attention.nabla`), runs there after the all-to-all.
    """
    if kv_lengths is not None:
        kv_mask = _common.lengths_to_mask(kv_lengths, k.shape[1], kv_mask)
    masks = dict(kv_mask=kv_mask, q_segment_ids=q_segment_ids, kv_segment_ids=kv_segment_ids)
    flags = dict(causal=causal, causal_prefix=causal_prefix)
    if causal_block is not None:  # only then, so that a call without it reads as before
        flags["causal_block"] = causal_block
    if fn is not None and (any(m is not None for m in masks.values()) or causal or causal_prefix or causal_block):
        raise ValueError("self_attention: an fn takes no mask keywords")
    run = attention if fn is None else (lambda q, k, v, **_: fn(q, k, v))
    ctx = sharding.active()
    if ctx is None:
        return run(q, k, v, **masks, **flags)
    sp = ctx.axis("seq")
    spec = _specs(ctx, True)
    names, arrays, m_specs = _split_masks(masks, {n: _mask_spec(ctx) for n in masks})

    def local(q, k, v, *ms):
        kw = dict(zip(names, ms), **flags)
        if sp is None:
            return run(q, k, v, **kw)
        q, k, v = (_seq_to_heads(t, sp) for t in (q, k, v))
        return _heads_to_seq(run(q, k, v, **kw), sp)

    return jax.shard_map(local, mesh=ctx.mesh, in_specs=(spec, spec, spec) + m_specs, out_specs=spec,
                         check_vma=False)(q, k, v, *arrays)


def cross_attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    *,
    kv_mask: jax.Array | None = None,
    q_segment_ids: jax.Array | None = None,
    kv_segment_ids: jax.Array | None = None,
    kv_lengths: jax.Array | None = None,
) -> jax.Array:
    """Sequence-sharded queries against replicated keys/values (text): no exchange needed.

    ``q_segment_ids`` (B, Sq) is sharded like the queries; the key-side masks are replicated.
    """
    if kv_lengths is not None:
        kv_mask = _common.lengths_to_mask(kv_lengths, k.shape[1], kv_mask)
    masks = dict(kv_mask=kv_mask, q_segment_ids=q_segment_ids, kv_segment_ids=kv_segment_ids)
    ctx = sharding.active()
    if ctx is None:
        return attention(q, k, v, **masks)
    q_spec, kv_spec = _specs(ctx, True), _specs(ctx, False)
    specs = dict(kv_mask=_mask_spec(ctx), q_segment_ids=_mask_spec(ctx, True), kv_segment_ids=_mask_spec(ctx))
    names, arrays, m_specs = _split_masks(masks, specs)

    def local(q, k, v, *ms):
        return attention(q, k, v, **dict(zip(names, ms)))

    return jax.shard_map(local, mesh=ctx.mesh, in_specs=(q_spec, kv_spec, kv_spec) + m_specs, out_specs=q_spec,
                         check_vma=False)(q, k, v, *arrays)


def joint_attention(
    txt: tuple[jax.Array, jax.Array, jax.Array],
    vid: tuple[jax.Array, jax.Array, jax.Array],
    *,
    txt_mask: jax.Array | None = None,
    causal: bool = False,
    text_causal: bool = False,
) -> tuple[jax.Array, jax.Array]:
    """One self-attention over the joint sequence ``[text; video]`` (CogVideoX, HunyuanVideo, Cosmos3).

    ``txt`` = (q, k, v) of the text tokens, replicated over sp; ``vid`` = (q, k, v) of the video tokens, sharded
    over sp. Only the video part goes through the all-to-all; each device slices the replicated text q/k/v down to
    its local head range, runs ONE attention over [text; video] for those heads, gathers the text output's heads
    back and returns ``(text_out replicated over sp, video_out sharded over sp)``.

    ``txt_mask``: optional (B, S_txt) bool, False on padded text tokens: no query (text or video) sees them.
    ``causal``: causal over the whole joint sequence. ``text_causal``: the mixture-of-transformers mask of
    Cosmos3: text attends causally to text only, video attends to all text and all video
    (``causal_prefix=S_txt``).
    """
    if causal and text_causal:
        raise ValueError("joint_attention: pass causal=True (whole sequence) or text_causal=True (MoT), not both")
    n_txt = txt[0].shape[1]
    flags = dict(causal=causal, causal_prefix=n_txt if text_causal else None)

    def joint_mask(m, n_vid):
        if m is None:
            return None
        return jnp.concatenate([m.astype(bool), jnp.ones((m.shape[0], n_vid), bool)], axis=1)

    ctx = sharding.active()
    if ctx is None:
        q, k, v = (jnp.concatenate([t, x], axis=1) for t, x in zip(txt, vid))
        o = attention(q, k, v, kv_mask=joint_mask(txt_mask, vid[0].shape[1]), **flags)
        return o[:, :n_txt], o[:, n_txt:]
    sp = ctx.axis("seq")
    t_spec, v_spec = _specs(ctx, False), _specs(ctx, True)
    m_specs = () if txt_mask is None else (_mask_spec(ctx),)

    def local(tq, tk, tv, vq, vk, vv, *m):
        if sp is not None:
            vq, vk, vv = (_seq_to_heads(t, sp) for t in (vq, vk, vv))
            h = vq.shape[2]  # local heads after the exchange
            start = jax.lax.axis_index(sp) * h
            tq, tk, tv = (jax.lax.dynamic_slice_in_dim(t, start, h, axis=2) for t in (tq, tk, tv))
        q, k, v = (jnp.concatenate([t, x], axis=1) for t, x in zip((tq, tk, tv), (vq, vk, vv)))
        o = attention(q, k, v, kv_mask=joint_mask(m[0] if m else None, vq.shape[1]), **flags)
        ot, ov = o[:, :n_txt], o[:, n_txt:]
        if sp is not None:
            ov = _heads_to_seq(ov, sp)
            ot = jax.lax.all_gather(ot, sp, axis=2, tiled=True)
        return ot, ov

    args = (*txt, *vid) + (() if txt_mask is None else (txt_mask,))
    return jax.shard_map(
        local, mesh=ctx.mesh, in_specs=(t_spec,) * 3 + (v_spec,) * 3 + m_specs, out_specs=(t_spec, v_spec),
        check_vma=False,
    )(*args)


def replicated_attention(q: jax.Array, k: jax.Array, v: jax.Array, *, kv_mask: jax.Array | None = None,
                         causal: bool = False) -> jax.Array:
    """Attention over a short sequence held whole on every sp rank (text refiners, text encoders inside the DiT's
    program, the causal text stream of a mixture-of-transformers DiT): heads stay split over tp, every sp rank
    computes its copy. Runs the backend inside ``shard_map`` on local shapes, like the functions above, so kernels
    that cannot be auto-partitioned still run under TP. ``causal``: query i sees keys j <= i."""
    flags = dict(causal=True) if causal else {}
    ctx = sharding.active()
    if ctx is None:
        return attention(q, k, v, kv_mask=kv_mask, **flags)
    spec = _specs(ctx, False)
    m_specs = () if kv_mask is None else (_mask_spec(ctx),)

    def local(q, k, v, *m):
        return attention(q, k, v, kv_mask=m[0] if m else None, **flags)

    args = (q, k, v) + (() if kv_mask is None else (kv_mask,))
    return jax.shard_map(local, mesh=ctx.mesh, in_specs=(spec,) * 3 + m_specs, out_specs=spec, check_vma=False)(*args)


def gathered_kv_attention(q: jax.Array, k: jax.Array, v: jax.Array, *, kv_mask: jax.Array | None = None
                          ) -> jax.Array:
    """Replicated queries against sequence-sharded keys/values (LTX-2's video-to-audio attention: the short
    audio stream, held whole on every sp rank, attends to the sp-sharded video tokens).

    Each device gathers the key/value shards over ``sp`` (an all-gather of K and V only, the queries never move),
    then runs the backend on its tp heads; the output is replicated over sp like the queries. ``kv_mask`` (B, Sk)
    is global, as everywhere in this module."""
    ctx = sharding.active()
    if ctx is None:
        return attention(q, k, v, kv_mask=kv_mask)
    sp = ctx.axis("seq")
    q_spec, kv_spec = _specs(ctx, False), _specs(ctx, True)
    m_specs = () if kv_mask is None else (_mask_spec(ctx),)

    def local(q, k, v, *m):
        if sp is not None:
            k, v = (jax.lax.all_gather(t, sp, axis=1, tiled=True) for t in (k, v))
        return attention(q, k, v, kv_mask=m[0] if m else None)

    args = (q, k, v) + (() if kv_mask is None else (kv_mask,))
    return jax.shard_map(local, mesh=ctx.mesh, in_specs=(q_spec, kv_spec, kv_spec) + m_specs, out_specs=q_spec,
                         check_vma=False)(*args)


def prefix_attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    past: tuple[jax.Array, jax.Array] | None = None,
    *,
    limits: tuple[tuple[int, int], ...],
    zero_keys: int = 0,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """New sequence-sharded tokens attending to a cached prefix and to themselves (a causal run's chunk,
    :mod:`vidax_core.causal`): keys are ``[zero_keys all-zero keys; past; the new keys]`` and the query rows see
    them by ``limits`` (:func:`vidax_core.attention.attention`'s ``key_limits``, over that key order).

    ``past`` (k, v) are (B, P, H, D) in the cache layout (every token, heads split over tp then sp,
    :func:`vidax_core.causal.kv.cache_spec`). Returns the attention output, sequence-sharded like ``q``, and the
    new tokens' keys and values in the cache layout (what a cache write stores)."""
    from vidax_core.causal.kv import cache_spec

    def core(q, k, v, *pst):
        keys, vals = [k], [v]
        if pst:
            keys.insert(0, pst[0].astype(k.dtype))
            vals.insert(0, pst[1].astype(v.dtype))
        if zero_keys:
            zeros = jnp.zeros(k.shape[:1] + (zero_keys,) + k.shape[2:], k.dtype)
            keys.insert(0, zeros)
            vals.insert(0, zeros.astype(v.dtype))
        cat = lambda xs: xs[0] if len(xs) == 1 else jnp.concatenate(xs, axis=1)  # noqa: E731
        return attention(q, cat(keys), cat(vals), key_limits=limits)

    past = tuple(past) if past is not None else ()
    ctx = sharding.active()
    if ctx is None:
        return core(q, k, v, *past), k, v
    sp = ctx.axis("seq")
    spec, kv_spec = _specs(ctx, True), cache_spec(ctx, layers=False)

    def local(q, k, v, *pst):
        if sp is not None:
            q, k, v = (_seq_to_heads(t, sp) for t in (q, k, v))
        o = core(q, k, v, *pst)
        return (_heads_to_seq(o, sp) if sp is not None else o), k, v

    return jax.shard_map(local, mesh=ctx.mesh, in_specs=(spec,) * 3 + (kv_spec,) * len(past),
                         out_specs=(spec, kv_spec, kv_spec), check_vma=False)(q, k, v, *past)


def attend(q: jax.Array, k: jax.Array, v: jax.Array, *, q_sharded: bool, kv_sharded: bool,
           kv_mask: jax.Array | None = None) -> jax.Array:
    """The attention of one stream against another by where their tokens live over ``sp``: both sequence-sharded
    (self-attention), sharded queries against whole keys (cross-attention), whole queries against sharded keys
    (:func:`gathered_kv_attention`), or both whole (:func:`replicated_attention`)."""
    if q_sharded and kv_sharded:
        return self_attention(q, k, v, kv_mask=kv_mask)
    if q_sharded:
        return cross_attention(q, k, v, kv_mask=kv_mask)
    if kv_sharded:
        return gathered_kv_attention(q, k, v, kv_mask=kv_mask)
    return replicated_attention(q, k, v, kv_mask=kv_mask)
