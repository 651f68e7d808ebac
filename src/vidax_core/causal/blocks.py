"""The stacked blocks of a causal model call: each block's self-attention reads its layer of the run's KV cache
(:mod:`.kv`) and, in a call that writes the cache, stores its new keys and values there.

The scan's carry is a :class:`Carry`: the hidden state, the index of the next layer (so that any slice of the
stacked blocks, the offload executor's chunks included, finds its own layers of the cache) and, in a writing call,
the cache itself (donated from chunk to chunk: written in place). A reading call passes its cache beside the
carry (the same for every layer, never copied). A block that takes the cache is called ``block(h, *inputs, kv=(cache,
layer))`` and returns ``(h, cache)``; :func:`attend` is what its self-attention does.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from .kv import KVCache


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class Carry:
    """What flows through a causal call's blocks: ``h``, the next ``layer`` (int32) and, when the call writes
    the cache, the ``cache``."""

    h: Any
    layer: Any
    cache: KVCache | None = None


def start(h: Any, cache: KVCache) -> Carry:
    """The carry entering the first block: the cache rides along only when the call writes it."""
    return Carry(h, jnp.zeros((), jnp.int32), cache if cache.view.write else None)


def pad_to_sp(x: jax.Array, rope: tuple[jax.Array, jax.Array], cache: KVCache
               ) -> tuple[jax.Array, tuple[jax.Array, jax.Array], KVCache]:
    """A call's new tokens (B, S, D) and their RoPE (S, d) padded to a multiple of the sequence-parallel degree
    (Ulysses splits the tokens evenly; a cache-writing call joins chunks of several resolutions whose sum need not
    divide), the padding a last chunk-causal block of its own: no real query sees its keys, it writes nothing."""
    from vidax_core.parallel import sharding

    ctx = sharding.active()
    sp = ctx.size("seq") if ctx is not None else 1
    n = x.shape[1]
    pad = (-n) % sp
    if not pad:
        return x, rope, cache
    x = jnp.concatenate([x, jnp.zeros((x.shape[0], pad) + x.shape[2:], x.dtype)], axis=1)
    rope = tuple(jnp.concatenate([r, jnp.zeros((pad,) + r.shape[1:], r.dtype)], axis=0) for r in rope)
    v = cache.view
    view = dataclasses.replace(v, blocks=(v.blocks if v.blocks is not None else (n,)) + (pad,))
    return x, rope, cache.with_view(view, cache.starts)


def attend(attn: Any, h: jax.Array, rope: Any, kv: tuple[KVCache, jax.Array]) -> tuple[jax.Array, KVCache]:
    """Self-attention of ``attn`` (:class:`vidax_core.nn.attention_block.Attention`) for the new tokens ``h``
    over the cache's past at this layer; the new keys and values written where the view says. Returns the
    attention output and the cache."""
    cache, layer = kv
    view = cache.view
    out, (k, v) = attn.cached(h, rope, cache.past(layer), limits=view.key_limits(h.shape[1]),
                              zero_keys=view.zero_keys)
    return out, (cache.write(layer, k, v) if view.write else cache)


def run_blocks(block_graphdef: nnx.GraphDef, stacked_state: nnx.State, carry: Carry, *inputs: Any,
               cache: KVCache | None = None) -> Carry:
    """Run any slice of the stacked blocks over ``carry``; ``cache``: the reading call's cache (a writing call's
    travels in the carry)."""

    def body(c: Carry, layer_state):
        kv_cache = c.cache if c.cache is not None else cache
        h, new = nnx.merge(block_graphdef, layer_state)(c.h, *inputs, kv=(kv_cache, c.layer))
        return Carry(h, c.layer + 1, new if c.cache is not None else None), None

    out, _ = jax.lax.scan(body, carry, stacked_state)
    return out


def result(carry: Carry) -> Any:
    """The hidden state leaving the last block."""
    return carry.h


__all__ = ["Carry", "start", "pad_to_sp", "attend", "run_blocks", "result"]
