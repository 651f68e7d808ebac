"""A streamed block group's weights on the host, split once into the chunks the offload executor transfers.

A device copies pinned (page-locked) host memory by DMA while it computes; pageable memory needs a staging copy
first, which the host does on the critical path. When the backend offers ``pinned_host`` memory (the GPU, TPU and
CPU clients do) the chunks live there, else they stay numpy arrays (and under ``jax.distributed``, where each
process feeds only its own devices' shards). Splitting at load makes a transfer one ``device_put`` per leaf with no
host-side slicing, and the group is held once: the model's numpy copy is dropped as each group is pinned.
"""

from __future__ import annotations

from typing import Any, Mapping

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from vidax_core.parallel import sharding as shd

PINNED, PAGEABLE = "pinned_host", "numpy"


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
    """``state`` (leaves stacked on a leading layer axis) as ``len(self)`` chunks of ``chunk_size`` layers."""

    def __init__(self, state: Any, chunk_size: int, shardings: Any, memory: str = PAGEABLE) -> None:
        leaves = jax.tree.leaves(state)
        self.num_blocks = int(leaves[0].shape[0])
        if self.num_blocks % chunk_size:
            raise ValueError(f"offload chunk_size {chunk_size} does not divide the {self.num_blocks} blocks")
        self.chunk_size, self.memory, self.shardings = chunk_size, memory, shardings
        self.abstract = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), state)
        pinned = jax.tree.map(lambda s: s.with_memory_kind(PINNED), shardings) if memory == PINNED else None
        self.chunks = []
        for lo in range(0, self.num_blocks, chunk_size):
            chunk = jax.tree.map(lambda a: np.asarray(a)[lo:lo + chunk_size], state)
            if pinned is not None:
                chunk = jax.block_until_ready(jax.device_put(chunk, pinned))
            self.chunks.append(chunk)

    def __len__(self) -> int:
        return len(self.chunks)

    def put(self, i: int) -> Any:
        """Issue chunk ``i``'s transfer to the devices (asynchronous)."""
        if self.memory == PINNED:
            return jax.device_put(self.chunks[i], self.shardings)
        return jax.tree.map(shd.put, self.chunks[i], self.shardings)


def pin_groups(model: Any, groups: tuple[str, ...], chunk_size_of, specs, mesh) -> dict[str, HostChunks]:
    """Split each streamed group of ``model`` into :class:`HostChunks` (pinned where the backend has it) and
    replace the group's host arrays in the module by shapes, so the host holds its weights once."""
    from flax import nnx

    memory = host_memory_kind(mesh)
    out = {}
    for name in groups:
        group = getattr(model, name)
        state = nnx.state(group)
        host = HostChunks(state, chunk_size_of(name), chunk_shardings(state, specs, mesh, (name,)), memory)
        nnx.update(group, host.abstract)
        out[name] = host
    return out
