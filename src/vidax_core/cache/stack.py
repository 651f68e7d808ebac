"""The block stack of one model call with step caching, traced inside the jitted step.

A call batches one or more cache contexts (row ranges of its batch: one per guidance branch, or the whole call;
see :mod:`.layout`). Each context has its own cached residuals and its own decision; the stack runs (under a
``lax.cond``, so a step where every context skips costs no block) when any context computes, and each context's
rows take either the computed output or their cached one, as diffusers' hooks give per cache context:

* ``residual`` (MagCache, TeaCache): the decision is data (the host's schedule for this step). A skipped
  context's output is its stack input plus the residual ``output - input`` of its last computed step, on the
  hidden states; the rest of the carry passes through (the head block is skipped too).
* ``teacache`` (TeaCache4LTX-Video): as ``residual``, the flags decided on the device from the first block's
  modulated input (:func:`teacache_decide`).
* ``first_block`` (FirstBlockCache): the head block always runs; a context computes when
  ``mean|r - r_prev| / mean|r_prev| > threshold`` for the head block's residual ``r`` on the hidden states
  (``r_prev`` from its last computed step), else its output is the head output plus the cached
  ``output - head output`` of every carry part. A computing step runs the whole stack from its input (the head
  block twice: one block's cost, cheaper than copying the other blocks' weights out of the stack).
  The statistic is a mean over the sharded sequence: under sequence
  parallelism it is all-reduced, so the predicate is one replicated scalar.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from vidax_core.cache.layout import CacheLayout


@dataclass(frozen=True)
class CallCache:
    """Static: the method kind, each context's rows ``(start, stop)`` in the call and its column in the run's
    per-step tables, the first-block threshold, and whether MagCache calibrates."""

    kind: str  # "residual" | "first_block" | "teacache" (decided on the device)
    rows: tuple[tuple[int, int], ...]
    columns: tuple[int, ...]
    threshold: float = 0.0
    calibrate: bool = False
    coefficients: tuple[float, ...] = ()  # "teacache": the rescale polynomial, highest power first
    num_steps: int = 0  # "teacache": the pass's steps (its first and last always compute)


def _groups(model: Any) -> tuple[str, ...]:
    return tuple(model.block_groups)


def run_groups(model: Any, carry: Any, aux: Any, *, skip_first: int = 0) -> Any:
    """Every block group in order on the resident model (``between_groups`` between two), the first
    ``skip_first`` blocks of the first group left out."""
    prev = None
    for k, name in enumerate(_groups(model)):
        if prev is not None and hasattr(model, "between_groups"):
            carry = model.between_groups(prev, name, carry, aux)
        gdef, st = nnx.split(getattr(model, name))
        if k == 0 and skip_first:
            st = jax.tree.map(lambda a: a[skip_first:], st)
        if jax.tree.leaves(st)[0].shape[0]:
            carry = type(model).run_block_group(name, gdef, st, carry, aux)
        prev = name
    return carry


def run_head(model: Any, carry: Any, aux: Any) -> Any:
    """The first block of the first group."""
    name = _groups(model)[0]
    gdef, st = nnx.split(getattr(model, name))
    return type(model).run_block_group(name, gdef, jax.tree.map(lambda a: a[:1], st), carry, aux)


def row_mask(cc: CallCache, flags: jax.Array, batch: int) -> jax.Array:
    """(batch,) bool: each row takes its context's flag."""
    parts, at = [], 0
    for (a, b), f in zip(cc.rows, [flags[k] for k in range(len(cc.rows))]):
        if a > at:
            parts.append(jnp.zeros((a - at,), bool))
        parts.append(jnp.broadcast_to(f, (b - a,)))
        at = b
    if batch > at:
        parts.append(jnp.zeros((batch - at,), bool))
    return jnp.concatenate(parts)


def select(mask: jax.Array, yes: Any, no: Any) -> Any:
    def one(y, n):
        if jnp.ndim(y) == 0:
            return y
        return jnp.where(mask.reshape((-1,) + (1,) * (y.ndim - 1)), y, n)

    return jax.tree.map(one, yes, no)


def _batch(carry: Any) -> int:
    return next(a.shape[0] for a in jax.tree.leaves(carry) if jnp.ndim(a))


def init_state(cc: CallCache, layout: CacheLayout, carry_shape: Any) -> dict[str, Any]:
    """Zeros shaped like the call's carry (from ``jax.eval_shape``) and no context holding a residual yet."""
    zeros = lambda s: jnp.zeros(s.shape, s.dtype)  # noqa: E731
    st = {"has": jnp.zeros((len(cc.rows),), bool)}
    if cc.kind in ("residual", "teacache"):
        st["res"] = zeros(layout.get(carry_shape))
    if cc.kind == "teacache":
        st["prev"] = jnp.zeros(layout.get(carry_shape).shape, jnp.float32)
        st["acc"] = jnp.zeros((len(cc.rows),), jnp.float32)
    else:
        st["head"] = zeros(layout.get(carry_shape))
        st["tail"] = jax.tree.map(lambda s: zeros(s) if len(s.shape) else jnp.zeros((), s.dtype), carry_shape)
    return st


def _ctx_mean(cc: CallCache, x: jax.Array) -> jax.Array:
    return jnp.stack([jnp.mean(x[a:b]) for a, b in cc.rows])


def residual_combine(layout: CacheLayout, cc: CallCache, carry: Any, out_full: Any, st: dict[str, Any],
                     compute: jax.Array) -> tuple[Any, dict[str, Any], jax.Array, jax.Array]:
    """MagCache / TeaCache after the stack ran (or not, when no context computes: ``out_full`` is then unused):
    each context's rows take the computed output or input + cached residual; the residuals of the computing
    contexts are renewed (and, calibrating, their magnitude ratio to the previous one measured)."""
    h_in = layout.get(carry)
    res_new = layout.get(out_full) - h_in
    ratio = jnp.ones((len(cc.rows),), jnp.float32)
    if cc.calibrate:
        cur = jnp.linalg.norm(res_new.astype(jnp.float32), axis=-1)
        prev = jnp.linalg.norm(st["res"].astype(jnp.float32), axis=-1)
        ratio = jnp.where(st["has"], _ctx_mean(cc, cur / (prev + 1e-8)), 1.0)
    rows = row_mask(cc, compute, _batch(carry))
    out = select(rows, out_full, layout.put(carry, h_in + st["res"]))
    new = {"has": st["has"] | compute, "res": select(rows, res_new, st["res"])}
    return out, new, compute, ratio


def teacache_decide(model: Any, layout: CacheLayout, cc: CallCache, carry: Any, aux: Any, st: dict[str, Any],
                    step: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
    """TeaCache with a data-dependent signal (TeaCache4LTX-Video): the model's ``teacache_modulated`` input of
    its first block, its relative L1 change since the previous step (``mean|m - m_prev| / mean|m_prev|`` per
    context, all-reduced over sequence shards) rescaled by the polynomial, accumulated until it reaches the
    threshold; the first and last steps compute. Returns the (contexts,) compute flags and the new signal state
    (``prev`` renewed every step, as the reference does)."""
    m = model.teacache_modulated(layout.get(carry), aux).astype(jnp.float32)
    prev = st["prev"]
    dist = _ctx_mean(cc, jnp.abs(m - prev)) / _ctx_mean(cc, jnp.abs(prev))
    acc = st["acc"] + jnp.polyval(jnp.asarray(cc.coefficients, jnp.float32), dist)
    edge = (step == 0) | (step == cc.num_steps - 1)
    compute = edge | ~(acc < cc.threshold)
    return compute, {"prev": m, "acc": jnp.where(compute, 0.0, acc)}


def cached_blocks(model: Any, layout: CacheLayout, cc: CallCache, carry: Any, aux: Any, st: dict[str, Any],
                  flags: jax.Array | None, step: Any = None) -> tuple[Any, dict[str, Any], jax.Array, jax.Array]:
    """The stack with caching: (output carry, new state, (contexts,) computed, (contexts,) MagCache ratio).

    ``flags`` (contexts,) bool says which contexts compute (``residual``; None otherwise); ``step`` is the pass's
    step index (``teacache``)."""
    if cc.kind == "teacache":
        flags, tea = teacache_decide(model, layout, cc, carry, aux, st, step)
        st = dict(st, **tea)
    if cc.kind in ("residual", "teacache"):
        compute = flags | ~st["has"]
        out_full = jax.lax.cond(jnp.any(compute), lambda c: run_groups(model, c, aux), lambda c: c, carry)
        out, new, did, ratio = residual_combine(layout, cc, carry, out_full, st, compute)
        if cc.kind == "teacache":
            new.update(prev=st["prev"], acc=st["acc"])
        return out, new, did, ratio
    head_out = run_head(model, carry, aux)
    r, compute = first_block_decide(layout, cc, carry, head_out, st)
    # the full stack from the stack input (the head block runs again: slicing the other blocks out of the stacked
    # weights would copy them every step, which costs more than one block)
    out_full = jax.lax.cond(jnp.any(compute), lambda c: run_groups(model, c, aux), lambda c: head_out, carry)
    return first_block_combine(cc, head_out, out_full, st, r, compute)


def first_block_decide(layout: CacheLayout, cc: CallCache, carry: Any, head_out: Any,
                       st: dict[str, Any]) -> tuple[jax.Array, jax.Array]:
    """FirstBlockCache's test after the head block: (the head residual on the hidden states, (contexts,) bool
    computing). The means span each context's rows and, under sequence parallelism, every shard."""
    r = layout.get(head_out) - layout.get(carry)
    prev = st["head"]
    diff = _ctx_mean(cc, jnp.abs(r - prev)) / _ctx_mean(cc, jnp.abs(prev))
    return r, ~st["has"] | (diff > cc.threshold)


def first_block_combine(cc: CallCache, head_out: Any, out_full: Any, st: dict[str, Any], r: jax.Array,
                        compute: jax.Array) -> tuple[Any, dict[str, Any], jax.Array, jax.Array]:
    """Each context's rows take the full stack's output (``out_full``, unused when no context computes) or the
    head output plus the cached tail; the computing contexts renew their head residual and tail."""
    rows = row_mask(cc, compute, _batch(head_out))
    cached = jax.tree.map(lambda h, t: h + t if jnp.ndim(h) else h, head_out, st["tail"])
    out = select(rows, out_full, cached)
    tail = jax.tree.map(lambda o, h: o - h if jnp.ndim(o) else o, out_full, head_out)
    new = {"has": st["has"] | compute, "head": select(rows, r, st["head"]), "tail": select(rows, tail, st["tail"])}
    return out, new, compute, jnp.ones((len(cc.rows),), jnp.float32)
