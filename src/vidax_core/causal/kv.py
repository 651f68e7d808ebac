"""The KV cache of a causal run: what a family declares it caches, how one model call reads and writes it.

A causal (chunk-by-chunk) model attends from the chunk it makes to the keys and values of the chunks before it,
kept instead of recomputed. The family declares the cache (:class:`CacheSpec`): per layer, named *segments* of
a fixed capacity in tokens (AnyFlow-FAR keeps a ring of compressed older frames and the recent full-resolution
chunks), so its memory is fixed by the model's attention window, not by the video's length. The core allocates it
once per call (or keeps it for a continuation), places it like any other tensor (heads over ``tp`` and ``sp``, as
Ulysses leaves them around attention; the model batch over ``dp``) and sizes it in the dry run.

A model call sees the cache through a :class:`KVCache`: the arrays plus a static :class:`View` saying which
tokens of which segments its queries read (every query sees them: the past), how its new tokens attend among
themselves (one block, or chunk-causal blocks), where it writes its new tokens' keys and values (the segment and
length are static; the start is a traced value, so a ring written at a moving position compiles once), and how
many all-zero keys the reference appends (a padding quirk some references have). Keys are cached after RoPE.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

__all__ = ["Segment", "CacheSpec", "View", "KVCache", "cache_spec", "allocate"]


@dataclass(frozen=True)
class Segment:
    """A named part of every layer's cache holding at most ``tokens`` keys and values."""

    name: str
    tokens: int


@dataclass(frozen=True)
class CacheSpec:
    """What a causal model caches: keys and values of ``layers`` layers, ``heads`` x ``head_dim`` wide, in
    ``segments``, stored in ``dtype`` (a numpy dtype name: the model's compute dtype)."""

    layers: int
    heads: int
    head_dim: int
    segments: tuple[Segment, ...]
    dtype: str = "float32"

    def shape(self, segment: Segment, batch: int) -> tuple[int, ...]:
        return (self.layers, batch, segment.tokens, self.heads, self.head_dim)

    def capacity(self, name: str) -> int:
        return next(s.tokens for s in self.segments if s.name == name)

    def bytes(self, batch: int) -> int:
        """Bytes of the whole cache (keys and values of every segment) for a model batch of ``batch``."""
        item = np.dtype(self.dtype).itemsize
        return int(sum(2 * np.prod(self.shape(s, batch), dtype=np.int64) * item for s in self.segments))

    def per_device_bytes(self, batch: int, dp: int = 1, tp: int = 1, sp: int = 1) -> int:
        """Bytes one device holds: the batch split over ``dp``, the heads over ``tp`` and ``sp``."""
        return int(self.bytes(batch) // (max(dp, 1) if batch % max(dp, 1) == 0 else 1) // (tp * sp))


@dataclass(frozen=True)
class View:
    """How one model call uses the cache (static: it is part of the compiled program).

    * ``read``: ``(segment, tokens)`` pairs: the first ``tokens`` of each segment, in this order, are keys every
      new query sees;
    * ``blocks``: the new tokens as consecutive chunk-causal blocks of these sizes (block b sees blocks 0..b and
      the past); None: one block;
    * ``write``: ``(segment, tokens, offset)``: the new tokens ``[offset, offset + tokens)`` are written into the
      segment at the call's traced start (:attr:`KVCache.starts`, one per write, in this order);
    * ``zero_keys``: all-zero keys (and values) every query also sees.
    """

    read: tuple[tuple[str, int], ...] = ()
    blocks: tuple[int, ...] | None = None
    write: tuple[tuple[str, int, int], ...] = ()
    zero_keys: int = 0

    @property
    def past(self) -> int:
        return int(sum(n for _, n in self.read))

    def key_limits(self, new: int) -> tuple[tuple[int, int], ...]:
        """The :func:`vidax_core.attention.attention` ``key_limits`` of ``new`` queries over the keys
        ``[zero keys; past; new]``."""
        before = self.zero_keys + self.past
        blocks = self.blocks if self.blocks is not None else (new,)
        if sum(blocks) != new:
            raise ValueError(f"cache view blocks {blocks} do not add up to the call's {new} new tokens")
        ends = np.cumsum(blocks)
        return tuple((int(b), int(before + e)) for b, e in zip(blocks, ends))


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class KVCache:
    """The cache as one model call sees it: ``arrays`` {segment: {"k", "v"}} of shape (layers, batch, tokens,
    heads, head_dim), the traced write ``starts`` (int32, one per :attr:`View.write`; None without writes) and the
    static ``view``."""

    arrays: dict
    starts: Any = None
    view: View = dataclasses.field(default=View(), metadata=dict(static=True))

    def with_view(self, view: View, starts: Any = None) -> "KVCache":
        return KVCache(self.arrays, starts, view)

    @property
    def batch(self) -> int:
        return int(next(iter(self.arrays.values()))["k"].shape[1])

    def past(self, layer: jax.Array) -> tuple[jax.Array, jax.Array] | None:
        """Layer ``layer``'s past keys and values (B, past, H, D), None when the view reads none."""
        if not self.view.read:
            return None
        parts = {"k": [], "v": []}
        for name, n in self.view.read:
            for kv in ("k", "v"):
                at = jax.lax.dynamic_index_in_dim(self.arrays[name][kv], layer, 0, keepdims=False)
                parts[kv].append(at[:, :n])
        join = lambda xs: xs[0] if len(xs) == 1 else jnp.concatenate(xs, axis=1)  # noqa: E731
        return join(parts["k"]), join(parts["v"])

    def write(self, layer: jax.Array, k: jax.Array, v: jax.Array) -> "KVCache":
        """The cache with the new tokens' keys and values (B, new, H, D) written where the view says."""
        arrays = {name: dict(a) for name, a in self.arrays.items()}
        zero = jnp.zeros((), jnp.int32)
        for j, (name, n, offset) in enumerate(self.view.write):
            start = self.starts[j].astype(jnp.int32)
            for kv, new in (("k", k), ("v", v)):
                buf = arrays[name][kv]
                upd = new[:, offset:offset + n].astype(buf.dtype)[None]
                arrays[name][kv] = jax.lax.dynamic_update_slice(buf, upd, (layer.astype(jnp.int32), zero, start,
                                                                           zero, zero))
        return KVCache(arrays, self.starts, self.view)

    def rows(self, index: Sequence[int]) -> "KVCache":
        """The cache of the model-batch rows ``index`` (a call of some of the guidance branches)."""
        index = tuple(int(i) for i in index)
        if index == tuple(range(self.batch)):
            return self
        idx = jnp.asarray(index, jnp.int32)
        arrays = jax.tree.map(lambda a: jnp.take(a, idx, axis=1), self.arrays)
        return KVCache(arrays, self.starts, self.view)

    def put_rows(self, index: Sequence[int], part: "KVCache") -> "KVCache":
        """This cache with rows ``index`` replaced by ``part``'s."""
        index = tuple(int(i) for i in index)
        if index == tuple(range(self.batch)):
            return KVCache(part.arrays, self.starts, self.view)
        idx = jnp.asarray(index, jnp.int32)
        arrays = jax.tree.map(lambda a, b: a.at[:, idx].set(b), self.arrays, part.arrays)
        return KVCache(arrays, self.starts, self.view)


def cache_spec(ctx: Any, layers: bool = True) -> P:
    """The PartitionSpec of cache arrays under the sharding context ``ctx`` (None: replicated): the batch over
    ``dp``, the heads over ``tp`` then ``sp`` (the layout of keys after Ulysses' all-to-all), nothing else split;
    ``layers=False`` for one layer's (B, tokens, H, D)."""
    if ctx is None:
        return P()
    heads = tuple(a for a in (ctx.axis("heads"), ctx.axis("seq")) if a)
    spec = (ctx.axis("batch"), None, heads if len(heads) > 1 else (heads[0] if heads else None), None)
    return P(*(((None,) if layers else ()) + spec))


def allocate(spec: CacheSpec, batch: int, mesh: Any = None, rules: Any = None) -> KVCache:
    """A zeroed cache for a model batch of ``batch``, placed on ``mesh`` (None: the default device)."""
    from vidax_core.parallel import sharding

    ctx = sharding.ShardingContext(mesh, dict(rules or sharding.DEFAULT_RULES)) \
        if mesh is not None and mesh.size > 1 else None
    out = NamedSharding(mesh, cache_spec(ctx)) if ctx is not None else None
    arrays = {}
    for seg in spec.segments:
        shape, dtype = spec.shape(seg, batch), jnp.dtype(spec.dtype)
        make = jax.jit(lambda s=shape, d=dtype: jnp.zeros(s, d), out_shardings=out)
        arrays[seg.name] = {"k": make(), "v": make()}
    return KVCache(arrays)
