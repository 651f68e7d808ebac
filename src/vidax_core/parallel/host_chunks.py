"""A streamed block group's weights on the host, split once into the chunks the offload executor transfers.

A device copies pinned (page-locked) host memory by DMA while it computes; pageable memory needs a staging copy
first, which the host does on the critical path. When the backend offers ``pinned_host`` memory (the GPU, TPU and
CPU clients do) the chunks live there, else they stay numpy arrays (and under ``jax.distributed``, where each
process feeds only its own devices' shards). Splitting at load makes a transfer one ``device_put`` per leaf with no
host-side slicing, and the group is held once: the model's numpy copy is dropped as each group is pinned.
"""

from __future__ import annotations

import gc
import os
from typing import Any, Mapping

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from vidax_core.io.lazy import read_layers
from vidax_core.parallel import sharding as shd
from vidax_core.quant.cpu_bits import platform

PINNED, PAGEABLE = "pinned_host", "numpy"
IN_PLACE = "device (cpu: used in place)"
COPY_ENV = "VIDAX_OFFLOAD_COPY"  # set: the CPU backend takes the accelerators' pinned-copy path too (tests)


def key_path(path) -> tuple:
    """A pytree key path as the tuple of names and indices the sharding specs use (nnx ``value`` keys dropped)."""
    out = []
    for k in path:
        if isinstance(k, jax.tree_util.DictKey):
            out.append(k.key)
        elif isinstance(k, jax.tree_util.SequenceKey):
            out.append(k.idx)
        elif isinstance(k, jax.tree_util.GetAttrKey):
            if k.name != "value":
                out.append(k.name)
    return tuple(out)


def host_memory_kind(mesh) -> str:
    """``pinned_host`` when every device of ``mesh`` has that memory and one process drives them all."""
    if jax.process_count() > 1:
        return PAGEABLE
    for d in mesh.devices.flat:
        if PINNED not in {m.kind for m in d.addressable_memories()}:
            return PAGEABLE
    return PINNED


def chunk_shardings(state: Any, specs: Mapping[tuple, Any] | None, mesh, path_prefix: tuple = ()) -> Any:
    """The device sharding of each leaf of a group's state (its parameter's spec, replicated where none)."""
    def one(path, _leaf):
        spec = (specs or {}).get(path_prefix + key_path(path))
        return NamedSharding(mesh, spec if spec is not None else PartitionSpec())

    return jax.tree_util.tree_map_with_path(one, state)


class HostChunks:
    """``state`` (leaves stacked on a leading layer axis) as ``len(self)`` chunks of ``chunk_size`` layers.

    Each chunk is read leaf by leaf (a lazy checkpoint leaf a layer range at a time, :mod:`vidax_core.io.lazy`) and
    moved into pinned host memory as it is read, so the host holds the group once plus one leaf's chunk of
    staging. On the CPU backend the devices' memory is host memory: a chunk is stored as device arrays and handed
    to its program as it is (``direct``, the default there), so no second copy of a streamed chunk exists;
    ``direct=False`` (or the environment variable ``VIDAX_OFFLOAD_COPY=1``) keeps the copying path there."""

    def __init__(self, state: Any, chunk_size: int, shardings: Any, memory: str = PAGEABLE,
                 direct: bool | None = None) -> None:
        leaves, treedef = jax.tree.flatten(state)
        self.num_blocks = int(leaves[0].shape[0])
        if self.num_blocks % chunk_size:
            raise ValueError(f"offload chunk_size {chunk_size} does not divide the {self.num_blocks} blocks")
        self.chunk_size, self.memory, self.shardings = chunk_size, memory, shardings
        self.abstract = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), state)
        if direct is None:
            direct = _platform(shardings) == "cpu" and jax.process_count() == 1 and not os.environ.get(COPY_ENV)
        self.direct = direct
        if direct:
            self.memory = IN_PLACE
        targets = jax.tree.leaves(shardings)
        self.chunks = []
        for lo in range(0, self.num_blocks, chunk_size):
            parts = []
            for leaf, sh in zip(leaves, targets):
                host = read_layers(leaf, lo, lo + chunk_size)
                if self.direct:  # (shd.put holds float8 as its bits on the CPU backend, as every placement does)
                    host = jax.block_until_ready(shd.put(host, sh))
                elif memory == PINNED:
                    host = jax.block_until_ready(jax.device_put(host, sh.with_memory_kind(PINNED)))
                parts.append(host)
            self.chunks.append(treedef.unflatten(parts))
            gc.collect(0)  # transfer handles can hold their host staging in reference cycles

    def __len__(self) -> int:
        return len(self.chunks)

    def put(self, i: int) -> Any:
        """Issue chunk ``i``'s transfer to the devices (asynchronous); the stored chunk itself when ``direct``."""
        if self.direct:
            return self.chunks[i]
        if self.memory == PINNED:
            return jax.device_put(self.chunks[i], self.shardings)
        return jax.tree.map(shd.put, self.chunks[i], self.shardings)

    def host_bytes(self) -> int:
        return sum(int(np.prod(a.shape, dtype=np.int64)) * np.dtype(a.dtype).itemsize
                   for a in jax.tree.leaves(self.abstract))

    def drop(self) -> None:
        """Free the stored chunks (their sizes stay known); a later :meth:`put` is a bug."""
        self.chunks = []


def _platform(shardings: Any) -> str:
    leaves = jax.tree.leaves(shardings)
    return platform(leaves[0]) if leaves else "cpu"


def pin_groups(model: Any, groups: tuple[str, ...], chunk_size_of, specs, mesh, *, storage: str = "host",
               files: tuple[str, ...] = (), extra: Mapping[str, Any] | None = None, log: Any = None) -> dict[str, Any]:
    """Split each streamed group of ``model`` into its chunks (``storage`` ``host``: :class:`HostChunks`, pinned
    where the backend has it; ``disk``: :class:`vidax_core.parallel.disk_chunks.DiskChunks` over a file cache
    keyed by the checkpoint ``files`` and ``extra``) and replace the group's arrays in the module by shapes, so
    the host holds its weights once (or not at all)."""
    from flax import nnx

    memory = host_memory_kind(mesh)
    out = {}
    for name in groups:
        group = getattr(model, name)
        state = nnx.state(group)
        shardings = chunk_shardings(state, specs, mesh, (name,))
        if storage == "disk":
            from vidax_core.parallel.disk_chunks import DiskChunks

            host = DiskChunks(state, chunk_size_of(name), shardings, name=name, files=files, extra=extra, log=log)
        else:
            host = HostChunks(state, chunk_size_of(name), shardings, memory)
        nnx.update(group, host.abstract)
        out[name] = host
    return out
