"""Linear attention over the whole sequence (SANA / SANA-Video's ReLU kernel), cost linear in the tokens.

With feature-mapped queries and keys (``q = relu(W_q x)``, ``k = relu(W_k x)``) the output of token i is ::

    out_i = (q'_i . S) / (q_i . z + eps),   S = sum_j k'_j^T v_j  (head_dim x head_dim),   z = sum_j k_j

per head, where ``q'``, ``k'`` are the numerator's features (SANA-Video rotates them by RoPE, the normaliser's
stay unrotated; by default the same as ``q``, ``k``). The keys and values enter only through the per-head summaries
``S`` and ``z``: no (S, S) array exists, and under sequence parallelism each sp shard sums its own tokens' part and
one all-reduce over ``sp`` adds them (:func:`self_attention`), with no head exchange (attention kind ``linear``,
:mod:`vidax_core.attention.kinds`: only the tokens must split over sp). Heads stay split over tp.

Everything runs in float32 (summaries, numerator and normaliser), output in ``v``'s dtype. diffusers'
``SanaLinearAttnProcessor3_0`` forms the numerator in float32 and the normaliser in the input dtype; in a float32
run the two agree. The computation is two batched matmuls per head that XLA already fuses on every platform
(the summaries are O(S * D^2) FLOPs and O(D^2) memory), so one kernel serves every ``attention.backend``; a call
records itself as ``linear`` in the run's ``attention_calls``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

EPS = 1e-15  # SANA's normaliser offset


def summaries(k: jax.Array, v: jax.Array, k_num: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
    """The per-head key/value summaries of (B, S, H, D) inputs: ``S`` (B, H, D, Dv) = sum_j k'_j^T v_j and ``z``
    (B, H, D) = sum_j k_j, float32."""
    k_num = k if k_num is None else k_num
    s = jnp.einsum("bshd,bshe->bhde", k_num.astype(jnp.float32), v.astype(jnp.float32),
                   preferred_element_type=jnp.float32)
    return s, jnp.sum(k.astype(jnp.float32), axis=1)


def apply(q: jax.Array, s: jax.Array, z: jax.Array, q_num: jax.Array | None = None, *, eps: float = EPS) -> jax.Array:
    """The outputs of (B, S, H, D) queries from the summaries: ``(q' . S) / (q . z + eps)``, float32 (B, S, H, Dv)."""
    q_num = q if q_num is None else q_num
    num = jnp.einsum("bshd,bhde->bshe", q_num.astype(jnp.float32), s, preferred_element_type=jnp.float32)
    den = jnp.einsum("bshd,bhd->bsh", q.astype(jnp.float32), z, preferred_element_type=jnp.float32) + eps
    return num / den[..., None]


def linear_attention(q: jax.Array, k: jax.Array, v: jax.Array, *, q_num: jax.Array | None = None,
                     k_num: jax.Array | None = None, eps: float = EPS) -> jax.Array:
    """Linear attention over one device's whole sequence: (B, S, H, D) in, (B, S, H, Dv) out in ``v.dtype``."""
    s, z = summaries(k, v, k_num)
    return apply(q, s, z, q_num, eps=eps).astype(v.dtype)


def _record(q: jax.Array) -> None:
    from vidax_core.attention import _record as record

    record("linear", q, q)


def self_attention(q: jax.Array, k: jax.Array, v: jax.Array, *, q_num: jax.Array | None = None,
                   k_num: jax.Array | None = None, eps: float = EPS) -> jax.Array:
    """:func:`linear_attention` of sequence-sharded (B, S, H, D) tensors under the active mesh: each device forms
    the summaries of its tokens and heads, an all-reduce over ``sp`` completes them, and its queries read them.
    Without an active multi-device mesh it is the plain computation."""
    from jax.sharding import PartitionSpec as P

    from vidax_core.parallel import sharding

    ctx = sharding.active()
    _record(q)
    if ctx is None:
        return linear_attention(q, k, v, q_num=q_num, k_num=k_num, eps=eps)
    sp = ctx.axis("seq")
    spec = P(ctx.axis("batch"), sp, ctx.axis("heads"), None)
    given = tuple(t for t in (q_num, k_num) if t is not None)

    def local(q, k, v, *extra):
        qn, kn = (extra if extra else (None, None))
        s, z = summaries(k, v, kn)
        if sp is not None:
            s, z = jax.lax.psum((s, z), sp)
        return apply(q, s, z, qn, eps=eps).astype(v.dtype)

    if len(given) == 1:
        raise ValueError("linear self_attention: give both q_num and k_num, or neither")
    return jax.shard_map(local, mesh=ctx.mesh, in_specs=(spec,) * (3 + len(given)), out_specs=spec,
                         check_vma=False)(q, k, v, *given)


__all__ = ["EPS", "apply", "linear_attention", "self_attention", "summaries"]
