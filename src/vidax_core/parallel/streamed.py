"""Stacked layers of a model that does not fit the device, streamed to it a chunk at a time while it runs.

The denoiser's offload (:mod:`vidax_core.parallel.offload`) splits a step into ``pre`` / block groups / ``post``
programs. A prompt encoder (UMT5-XXL, Gemma-3 12B, Qwen2.5-VL 7B) is used once per call, so its layers need not
wait in host memory: :class:`FileChunks` reads each chunk from the checkpoint (the page cache) when the executor
asks for it, converts it and transfers it, and the executor (the same :class:`~vidax_core.parallel.offload.BlockPool`
the denoiser streams with) overlaps the next chunk's read and transfer with this chunk's compute. The host holds
the chunks in flight, never the model.

A model opts in by running its stacked layers through :func:`run_stack` (the encoders of :mod:`vidax_core.encoders`
do): with resident weights that is one ``lax.scan`` inside whatever program calls it; with a stack registered by
:func:`stream_stacks` it is a Python loop of one jitted program per chunk, so the model's call must then run
outside ``jax.jit`` (:func:`is_streamed` tells its entry points; :func:`jit_unless_streamed` wraps one).
"""

from __future__ import annotations

import functools
import gc
import weakref
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.io.lazy import read_layers
from vidax_core.parallel import sharding as shd

FILE = "checkpoint file (read per chunk)"

#: id(stacked module) -> (a weak reference to it, its stream): a dropped model drops its stream
_STREAMS: dict[int, tuple[Any, "StackStream"]] = {}


def _stream_of(module: Any) -> "StackStream | None":
    found = _STREAMS.get(id(module)) if _STREAMS else None
    return found[1] if found is not None and found[0]() is module else None


def _register(module: Any, stream: "StackStream") -> None:
    key = id(module)
    _STREAMS[key] = (weakref.ref(module, lambda _r, k=key: _STREAMS.pop(k, None)), stream)


class FileChunks:
    """A stacked group's layers read from the checkpoint a chunk at a time, when transferred: the interface of
    :class:`vidax_core.parallel.host_chunks.HostChunks` with nothing kept on the host (each tensor's file map goes
    with the array read from it, :class:`vidax_core.io.safetensors.SafetensorsFile`)."""

    def __init__(self, state: Any, chunk_size: int, shardings: Any) -> None:
        state = jax.tree.map(lambda a: a, state)  # detached: the module's variables become shapes after this
        leaves, self._treedef = jax.tree.flatten(state)
        self._leaves = leaves
        self.num_blocks = int(leaves[0].shape[0])
        if self.num_blocks % chunk_size:
            raise ValueError(f"chunk size {chunk_size} does not divide the {self.num_blocks} layers")
        self.chunk_size, self.shardings = chunk_size, shardings
        self.memory, self.direct = FILE, False
        self.abstract = jax.tree.map(lambda a: jax.ShapeDtypeStruct(tuple(a.shape), np.dtype(a.dtype)), state)
        self._targets = jax.tree.leaves(shardings)

    def __len__(self) -> int:
        return self.num_blocks // self.chunk_size

    def put(self, i: int) -> Any:
        lo = i * self.chunk_size
        parts = []
        for leaf, sh in zip(self._leaves, self._targets):
            parts.append(shd.put(read_layers(leaf, lo, lo + self.chunk_size), sh))
        gc.collect(0)  # transfer handles can hold their host staging in reference cycles
        return self._treedef.unflatten(parts)

    def host_bytes(self) -> int:
        return 0


class StackStream:
    """The chunks of one streamed stack and the executors that run them, one per body (a body is a pure function:
    what a call varies arrives in ``aux``)."""

    def __init__(self, name: str, graphdef: Any, chunks: Any) -> None:
        self.name, self.graphdef, self.chunks = name, graphdef, chunks
        self._pools: dict[Any, Any] = {}

    def pool(self, key: Any, run_group: Callable[..., Any]):
        from vidax_core.parallel.offload import BlockPool

        if key not in self._pools:
            self._pools[key] = BlockPool(self.name, self.graphdef, self.chunks, run_group)
        return self._pools[key]

    def release(self) -> None:
        for p in self._pools.values():
            p.release()


def is_streamed(model: Any) -> bool:
    """Whether any stacked module inside ``model`` (an nnx module) streams its layers."""
    if not _STREAMS:
        return False
    return any(_stream_of(m) is not None for _, m in nnx.iter_graph(model))


def release(model: Any) -> None:
    """Free the chunks a streamed ``model`` still holds on the devices (the prefetched first chunk)."""
    for _, m in nnx.iter_graph(model):
        stream = _stream_of(m)
        if stream is not None:
            stream.release()


def detach(model: Any) -> dict[tuple, "StackStream"]:
    """The streams of ``model``'s stacked modules by path, for :func:`attach` to a copy of it (an encoder parked on
    the host is split and merged again: its modules are new objects)."""
    return {tuple(path): _stream_of(m) for path, m in nnx.iter_graph(model) if _stream_of(m) is not None}


def attach(model: Any, streams: dict[tuple, "StackStream"]) -> None:
    """Register ``streams`` (from :func:`detach`) for the modules at the same paths of ``model``."""
    for path, m in nnx.iter_graph(model):
        if tuple(path) in streams:
            _register(m, streams[tuple(path)])


def jit_unless_streamed(fn: Callable[..., Any], **jit_kwargs: Any) -> Callable[..., Any]:
    """``jax.jit(fn)`` for a model (the first argument) with resident weights; ``fn`` itself, run eagerly with
    one jitted program per chunk inside, for a streamed one."""
    jitted = jax.jit(fn, **jit_kwargs)

    @functools.wraps(fn)
    def call(model, *args, **kwargs):
        if is_streamed(model):
            try:
                return fn(model, *args, **kwargs)
            finally:
                release(model)
        return jitted(model, *args, **kwargs)

    call.jitted = jitted
    return call


def _plain_body(graphdef, h, layer_state, _x, aux):
    return nnx.merge(graphdef, layer_state)(h, *aux), None


def run_stack(stack: nnx.Module, x: Any, *aux: Any, body: Callable[..., Any] | None = None, xs: Any = None
              ) -> Any:
    """Run the layers of ``stack`` (a module whose parameters are stacked on a leading layer axis) over ``x``.

    Without ``body`` each layer is called as ``layer(h, *aux)`` and the result is the last ``h``. With ``body``
    (a module-level pure function ``body(graphdef, h, layer_state, x_i, aux) -> (h, y_i)``; ``xs``: per-layer
    inputs stacked on axis 0) the result is ``(h, ys)``, ``ys`` stacked on axis 0 as ``lax.scan`` gives them."""
    stream = _stream_of(stack)
    fn = body or _plain_body
    xs = jnp.zeros((stack_depth(stack),), jnp.int32) if xs is None else xs
    if stream is None:
        graphdef, state = nnx.split(stack)
        h, ys = jax.lax.scan(lambda c, s: fn(graphdef, c, s[0], s[1], aux), x, (state, xs))
        return h if body is None else (h, ys)
    # streamed: the carry holds the layer counter and the outputs so far (donated chunk to chunk)
    n = stream.chunks.num_blocks
    one = jax.eval_shape(lambda h, s, x_i: fn(stream.graphdef, h, s, x_i, aux), x, _layer_shapes(stream.chunks),
                         jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape[1:], a.dtype), xs))[1]
    ys0 = jax.tree.map(lambda a: jnp.zeros((n,) + tuple(a.shape), a.dtype), one)
    pool = stream.pool(fn, functools.partial(_run_chunk, fn))
    h, _, ys = pool.run((x, jnp.int32(0), ys0), (xs, aux))
    return h if body is None else (h, ys)


def _run_chunk(fn, _name, graphdef, chunk_state, carry, xs_aux):
    """One chunk of a streamed stack: ``lax.scan`` over its layers, the per-layer inputs and outputs at the
    chunk's offset in the whole stack."""
    h, lo, ys = carry
    xs, aux = xs_aux
    k = jax.tree.leaves(chunk_state)[0].shape[0]
    xs_k = jax.tree.map(lambda a: jax.lax.dynamic_slice_in_dim(a, lo, k, 0), xs)
    h, ys_k = jax.lax.scan(lambda c, s: fn(graphdef, c, s[0], s[1], aux), h, (chunk_state, xs_k))
    ys = jax.tree.map(lambda a, b: jax.lax.dynamic_update_slice_in_dim(a, b.astype(a.dtype), lo, 0), ys, ys_k)
    return h, lo + k, ys


def stack_depth(stack: nnx.Module) -> int:
    """Layers of a stacked module (streamed or resident)."""
    stream = _stream_of(stack)
    if stream is not None:
        return stream.chunks.num_blocks
    return int(jax.tree.leaves(nnx.state(stack))[0].shape[0])


def _layer_shapes(chunks: Any) -> Any:
    return jax.tree.map(lambda a: jax.ShapeDtypeStruct(tuple(a.shape[1:]), a.dtype), chunks.abstract)


def stacked_modules(model: nnx.Module) -> list[tuple[tuple, nnx.Module]]:
    """``(path, module)`` of every module of ``model`` whose parameters all carry the leading ``layers`` axis
    (the outermost such module on each path)."""
    from vidax_core.nn.layers import LAYERS

    containers = tuple(getattr(nnx, n) for n in ("List", "Dict", "Sequential") if hasattr(nnx, n))
    found: list[tuple[tuple, nnx.Module]] = []
    for path, m in nnx.iter_graph(model):
        if not isinstance(m, nnx.Module) or m is model or isinstance(m, containers):
            continue
        names = shd.param_names(nnx.state(m))
        if names and all(n and n[0] == LAYERS for n in names.values()):
            found.append((tuple(path), m))
    return [(p, m) for p, m in found if not any(q != p and p[:len(q)] == q for q, _ in found)]


def layer_bytes(model: nnx.Module) -> tuple[int, int, int]:
    """(bytes outside the stacked layers, bytes of the largest layer, layers of the deepest stack) of ``model``
    (its arrays or shapes)."""
    total = sum(int(np.prod(a.shape, dtype=np.int64)) * np.dtype(a.dtype).itemsize
                for a in jax.tree.leaves(nnx.state(model)))
    stacked, largest, depth = 0, 0, 0
    for _, m in stacked_modules(model):
        leaves = jax.tree.leaves(nnx.state(m))
        n = int(leaves[0].shape[0])
        b = sum(int(np.prod(a.shape, dtype=np.int64)) * np.dtype(a.dtype).itemsize for a in leaves)
        stacked += b
        largest, depth = max(largest, b // n), max(depth, n)
    return total - stacked, largest, depth


def chunk_for(depth: int, wanted: int) -> int:
    """The largest divisor of ``depth`` not above ``wanted`` (at least 1)."""
    wanted = max(1, min(wanted, depth))
    return max(d for d in range(1, wanted + 1) if depth % d == 0)


def stream_stacks(model: nnx.Module, chunk_layers: int, shardings_of: Callable[[tuple, Any], Any]) -> list[str]:
    """Stream every stacked module of ``model`` (whose stacked parameters are still lazy checkpoint leaves or
    host arrays): each gets :class:`FileChunks` of at most ``chunk_layers`` layers and holds shapes from now on.
    ``shardings_of(path, state)`` gives the device sharding of each leaf of the stack at ``path``. Returns the
    streamed paths."""
    names = []
    for path, m in stacked_modules(model):
        state = nnx.state(m)
        depth = int(jax.tree.leaves(state)[0].shape[0])
        chunks = FileChunks(state, chunk_for(depth, chunk_layers), shardings_of(path, state))
        graphdef, _ = nnx.split(m)
        nnx.update(m, chunks.abstract)
        name = "/".join(map(str, path))
        _register(m, StackStream(name, graphdef, chunks))
        names.append(name)
    return names


__all__ = ["FILE", "FileChunks", "StackStream", "attach", "chunk_for", "detach", "is_streamed", "jit_unless_streamed",
           "layer_bytes", "release", "run_stack", "stack_depth", "stacked_modules", "stream_stacks"]
