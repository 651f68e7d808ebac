"""Block offload: stream a model's stacked blocks from host memory, a chunk of ``chunk_size`` blocks at a time.

Every block group (Wan: ``blocks``; HunyuanVideo: double and single stream) gets one :class:`BlockPool`:

* the group's weights stay on the host as stacked numpy arrays (layer axis first); a chunk is the view
  ``[i : i + chunk_size]``, transferred with one sharded ``device_put`` per array (tensor-parallel layouts apply,
  so offload composes with TP, and the activations keep their dp/sp layouts, so it composes with SP);
* the chunk program (``run_block_group`` on one chunk) is jitted once and reused for every chunk and every step:
  all chunks have the same shapes and shardings;
* double buffering: chunk i+1's transfer is issued before chunk i's compute is dispatched, so the copy overlaps
  the compute; before chunk i+2 is issued, chunk i's compute has finished and its weights are freed. At most two
  chunks are resident: peak weight bytes = non-block params + 2 chunks;
* the activation buffer is donated to each chunk call (output aliases input). XLA cannot alias weight inputs to
  any output, so chunk weights are freed explicitly (``Array.delete``) as soon as their compute is done.

The pool also keeps the resident-bytes accounting that ``output.metrics.peak_resident_weight_bytes`` reports.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Mapping

import jax
import numpy as np
from jax.sharding import NamedSharding

from vidax_core.parallel import sharding as shd


def _key_path(path) -> tuple:
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


class ResidentTracker:
    """Peak per-device bytes of weights resident on devices (non-block params + live chunks)."""

    def __init__(self, base_bytes: int = 0) -> None:
        self.base = base_bytes
        self.live: dict[int, int] = {}
        self.peak = base_bytes

    def add(self, key: int, nbytes: int) -> None:
        self.live[key] = nbytes
        self.peak = max(self.peak, self.base + sum(self.live.values()))

    def remove(self, key: int) -> None:
        self.live.pop(key, None)


class BlockPool:
    """One stacked block group streamed from the host in chunks of ``chunk_size`` blocks."""

    def __init__(
        self,
        name: str,
        graphdef: Any,
        host_state: Any,
        chunk_size: int,
        run_group: Callable[..., Any],
        specs: Mapping[tuple, Any] | None = None,
        mesh=None,
        path_prefix: tuple = (),
        tracker: ResidentTracker | None = None,
    ) -> None:
        leaves = jax.tree.leaves(host_state)
        self.name = name
        self.num_blocks = int(leaves[0].shape[0])
        if self.num_blocks % chunk_size:
            raise ValueError(f"offload chunk_size {chunk_size} does not divide the {self.num_blocks} blocks of {name}")
        self.chunk_size = chunk_size
        self.num_chunks = self.num_blocks // chunk_size
        self.host = jax.tree.map(np.asarray, host_state)
        self.tracker = tracker or ResidentTracker()

        if mesh is None:
            mesh = jax.sharding.Mesh(np.asarray(jax.devices()[:1]), ("_",))

        def chunk_sharding(path, leaf):
            spec = (specs or {}).get(path_prefix + _key_path(path))
            return NamedSharding(mesh, spec if spec is not None else jax.sharding.PartitionSpec())

        self.shardings = jax.tree_util.tree_map_with_path(chunk_sharding, self.host)

        def shard_bytes(a, s):
            shape = s.shard_shape((chunk_size,) + a.shape[1:])
            return int(np.prod(shape, dtype=np.int64)) * a.dtype.itemsize

        self.chunk_bytes = sum(jax.tree.leaves(jax.tree.map(shard_bytes, self.host, self.shardings)))

        def run_chunk(chunk_state, x, aux):
            return run_group(name, graphdef, chunk_state, x, aux)

        self._fn = jax.jit(run_chunk, donate_argnums=(1,))
        self._next: tuple[int, Any] | None = None
        self._resident: Any = None  # a group that is one chunk is transferred once and kept

    # -- transfers ----------------------------------------------------------------------------------------------

    def _put(self, i: int) -> Any:
        lo = i * self.chunk_size
        chunk = jax.tree.map(lambda a: a[lo : lo + self.chunk_size], self.host)
        dev = jax.tree.map(shd.put, chunk, self.shardings)
        self.tracker.add(id(dev), self.chunk_bytes)
        return dev

    def _free(self, dev: Any) -> None:
        for a in jax.tree.leaves(dev):
            a.delete()
        self.tracker.remove(id(dev))

    def prefetch(self) -> None:
        """Issue chunk 0's transfer now (e.g. while the previous group or the embedding computes)."""
        if self.num_chunks == 1:
            if self._resident is None:
                self._resident = self._put(0)
        elif self._next is None:
            self._next = (0, self._put(0))

    def _run_chunk(self, chunk: Any, x: jax.Array, aux: Any) -> jax.Array:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Some donated buffers were not usable")
            return self._fn(chunk, x, aux)

    def run(self, x: jax.Array, aux: Any, *, prefetch_after: "BlockPool | None" = None) -> jax.Array:
        """All chunks of this group over ``x``; ``prefetch_after`` (the next group, or this one for the next step)
        gets its first chunk issued while this group's last chunk computes."""
        self.prefetch()
        if self.num_chunks == 1:  # all blocks fit in one chunk: keep them, re-sending them every step is waste
            if prefetch_after is not None and prefetch_after is not self:
                prefetch_after.prefetch()
            return self._run_chunk(self._resident, x, aux)
        prev = None
        for i in range(self.num_chunks):
            _, cur = self._next
            if prev is not None:
                jax.block_until_ready(x)  # chunk i-1 has finished: its weights can go before chunk i+1 arrives
                self._free(prev)
            self._next = None
            if i + 1 < self.num_chunks:
                self._next = (i + 1, self._put(i + 1))
            elif prefetch_after is not None:
                prefetch_after.prefetch()  # overlaps this last chunk's compute
            x = self._run_chunk(cur, x, aux)
            prev = cur
        jax.block_until_ready(x)
        self._free(prev)
        return x

    def release(self) -> None:
        if self._next is not None:
            self._free(self._next[1])
            self._next = None
        if self._resident is not None:
            self._free(self._resident)
            self._resident = None
