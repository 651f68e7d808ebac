"""Attention under the (dp, sp, tp) mesh: Ulysses sequence parallelism, plain and joint.

Tokens stay split over ``sp`` for the whole block; only attention needs every token. Around self-attention an
all-to-all swaps "my tokens, all my heads" for "all tokens, 1/sp of my heads", attention runs locally, and a second
all-to-all swaps back (DeepSpeed-Ulysses). Cross-attention needs no exchange: each device's query tokens attend
to the replicated text.

Every variant runs the attention backend (:func:`vidax_core.attention.attention`) inside ``shard_map`` on local
shapes, so a backend never sees a global sharded array (kernels such as Pallas/cuDNN cannot be auto-partitioned).
Without an active multi-device mesh (:func:`vidax_core.parallel.sharding.activate`) each function is the plain computation.

Layouts are (batch, seq, heads, head_dim); logical names: batch -> dp, seq -> sp, heads -> tp.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from vidax_core.parallel import sharding
from vidax_core.attention import attention


def _specs(ctx: sharding.ShardingContext, seq_sharded: bool) -> P:
    return P(ctx.axis("batch"), ctx.axis("seq") if seq_sharded else None, ctx.axis("heads"), None)


def _seq_to_heads(x: jax.Array, axis: str) -> jax.Array:
    """(B, S/sp, h, D) -> (B, S, h/sp, D): split heads into sp parts, gather the sequence (device order)."""
    return jax.lax.all_to_all(x, axis, split_axis=2, concat_axis=1, tiled=True)


def _heads_to_seq(x: jax.Array, axis: str) -> jax.Array:
    return jax.lax.all_to_all(x, axis, split_axis=1, concat_axis=2, tiled=True)


def self_attention(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
    """Attention where q, k and v are all sequence-sharded (video self-attention): Ulysses when sp > 1."""
    ctx = sharding.active()
    if ctx is None:
        return attention(q, k, v)
    sp = ctx.axis("seq")
    spec = _specs(ctx, True)

    def local(q, k, v):
        if sp is None:
            return attention(q, k, v)
        q, k, v = (_seq_to_heads(t, sp) for t in (q, k, v))
        return _heads_to_seq(attention(q, k, v), sp)

    return jax.shard_map(local, mesh=ctx.mesh, in_specs=(spec, spec, spec), out_specs=spec, check_vma=False)(q, k, v)


def cross_attention(q: jax.Array, k: jax.Array, v: jax.Array, *, kv_mask: jax.Array | None = None) -> jax.Array:
    """Sequence-sharded queries against replicated keys/values (text): no exchange needed."""
    ctx = sharding.active()
    if ctx is None:
        return attention(q, k, v, kv_mask=kv_mask)
    q_spec, kv_spec = _specs(ctx, True), _specs(ctx, False)
    if kv_mask is None:
        f = lambda q, k, v: attention(q, k, v)  # noqa: E731
        return jax.shard_map(f, mesh=ctx.mesh, in_specs=(q_spec, kv_spec, kv_spec), out_specs=q_spec,
                             check_vma=False)(q, k, v)
    m_spec = P(ctx.axis("batch"), None)
    f = lambda q, k, v, m: attention(q, k, v, kv_mask=m)  # noqa: E731
    return jax.shard_map(f, mesh=ctx.mesh, in_specs=(q_spec, kv_spec, kv_spec, m_spec), out_specs=q_spec,
                         check_vma=False)(q, k, v, kv_mask)


def joint_attention(
    txt: tuple[jax.Array, jax.Array, jax.Array],
    vid: tuple[jax.Array, jax.Array, jax.Array],
) -> tuple[jax.Array, jax.Array]:
    """One self-attention over the joint sequence ``[text; video]`` (CogVideoX, HunyuanVideo).

    ``txt`` = (q, k, v) of the text tokens, replicated over sp; ``vid`` = (q, k, v) of the video tokens, sharded
    over sp. Only the video part goes through the all-to-all; each device slices the replicated text q/k/v down to
    its local head range, runs ONE attention over [text; video] for those heads, gathers the text output's heads
    back and returns ``(text_out replicated over sp, video_out sharded over sp)``.
    """
    ctx = sharding.active()
    if ctx is None:
        n_txt = txt[0].shape[1]
        q, k, v = (jnp.concatenate([t, x], axis=1) for t, x in zip(txt, vid))
        o = attention(q, k, v)
        return o[:, :n_txt], o[:, n_txt:]
    sp = ctx.axis("seq")
    t_spec, v_spec = _specs(ctx, False), _specs(ctx, True)

    def local(tq, tk, tv, vq, vk, vv):
        n_txt = tq.shape[1]
        if sp is not None:
            vq, vk, vv = (_seq_to_heads(t, sp) for t in (vq, vk, vv))
            h = vq.shape[2]  # local heads after the exchange
            start = jax.lax.axis_index(sp) * h
            tq, tk, tv = (jax.lax.dynamic_slice_in_dim(t, start, h, axis=2) for t in (tq, tk, tv))
        q, k, v = (jnp.concatenate([t, x], axis=1) for t, x in zip((tq, tk, tv), (vq, vk, vv)))
        o = attention(q, k, v)
        ot, ov = o[:, :n_txt], o[:, n_txt:]
        if sp is not None:
            ov = _heads_to_seq(ov, sp)
            ot = jax.lax.all_gather(ot, sp, axis=2, tiled=True)
        return ot, ov

    return jax.shard_map(
        local, mesh=ctx.mesh, in_specs=(t_spec,) * 3 + (v_spec,) * 3, out_specs=(t_spec, v_spec), check_vma=False
    )(*txt, *vid)
