"""Block offload: stream a model's stacked blocks from host memory, a chunk of ``chunk_size`` blocks at a time.

Every block group (Wan: ``blocks``; HunyuanVideo: double and single stream) gets one :class:`BlockPool`:

* the group's weights stay on the host, split at load into chunks of ``chunk_size`` layers in pinned host memory
  where the backend has it (:mod:`vidax_core.parallel.host_chunks`); a chunk is transferred with one sharded
  ``device_put`` per array (tensor-parallel layouts apply, so offload composes with TP, and the activations keep
  their dp/sp layouts, so it composes with SP);
* the chunk program (``run_block_group`` on one chunk) is jitted once and reused for every chunk and every step:
  all chunks have the same shapes and shardings;
* double buffering: chunk i+1's transfer is issued, from a transfer thread of the pool, before chunk i's compute is
  dispatched, so the copy runs under the compute (the next step's first chunk under this step's last one); before
  chunk i+2 is issued, chunk i's compute has finished and its weights are freed. At most two chunks are resident:
  peak weight bytes = non-block params + 2 chunks. On the CPU backend a pinned chunk is used where it lies;
* the activation buffer is donated to each chunk call (output aliases input). XLA cannot alias weight inputs to
  any output, so chunk weights are freed explicitly (``Array.delete``) as soon as their compute is done.

The pool also keeps the resident-bytes accounting that ``output.metrics.peak_resident_weight_bytes`` reports.
"""

from __future__ import annotations

import time
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from vidax_core.parallel.host_chunks import HostChunks
from vidax_core.parallel.static_aux import jit_aux


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
    """One stacked block group streamed from the host (its :class:`HostChunks`) a chunk at a time.

    It also measures how much of the transfer the compute hides (:attr:`overlap`): on its second run (the first
    compiles) one chunk's transfer and one chunk's compute are timed alone, and every later run's time per chunk
    is compared with them."""

    def __init__(self, name: str, graphdef: Any, host: HostChunks, run_group: Callable[..., Any],
                 tracker: ResidentTracker | None = None) -> None:
        self.name, self.host = name, host
        self.num_blocks, self.chunk_size, self.num_chunks = host.num_blocks, host.chunk_size, len(host)
        self.tracker = tracker or ResidentTracker()

        def shard_bytes(a, s):
            shape = s.shard_shape((host.chunk_size,) + tuple(a.shape[1:]))
            return int(np.prod(shape, dtype=np.int64)) * np.dtype(a.dtype).itemsize

        self.chunk_bytes = sum(jax.tree.leaves(jax.tree.map(shard_bytes, host.abstract, host.shardings)))

        def run_chunk(chunk_state, x, aux):
            return run_group(name, graphdef, chunk_state, x, aux)

        self._fn = jit_aux(run_chunk, 2, donate_argnums=(1,))  # aux leaves that are no arrays stay static
        self._thread = None if host.direct else ThreadPoolExecutor(1, thread_name_prefix=f"vidax-offload-{name}")
        self._next: tuple[int, Any] | None = None
        self._resident: Any = None  # a group that is one chunk is transferred once and kept
        self._runs = 0
        self._alone: tuple[float, float] | None = None  # (transfer, compute) seconds of one chunk, timed apart
        self._streamed: list[float] = []  # seconds per chunk of each measured run

    # -- transfers ----------------------------------------------------------------------------------------------

    def _put(self, i: int) -> "_Transfer":
        """Chunk ``i`` on its way to the devices: issued from the transfer thread, which waits for the copy, so
        the copy runs while the dispatching thread's programs compute (a ``device_put`` issued from the thread
        that dispatches the compute hid 2-4% of it on a TPU v5e, the thread 76-100%: docs/benchmarks.md)."""
        if self._thread is None:  # a direct chunk: nothing to copy
            t = _Transfer(value=self.host.put(i))
        else:
            t = _Transfer(future=self._thread.submit(lambda: jax.block_until_ready(self.host.put(i))))
        self.tracker.add(id(t), self.chunk_bytes)
        return t

    def _free(self, t: "_Transfer") -> None:
        if not self.host.direct:  # a direct chunk is the host's own copy
            for a in jax.tree.leaves(t.get()):
                a.delete()
        self.tracker.remove(id(t))

    def prefetch(self) -> None:
        """Issue chunk 0's transfer now (e.g. while the previous group or the embedding computes)."""
        if self.num_chunks == 1:
            if self._resident is None:
                self._resident = self._put(0)
        elif self._next is None:
            self._next = (0, self._put(0))

    def first_chunk(self) -> Any:
        """Chunk 0 on the devices without consuming it: the one already prefetched (or kept, for a group of one
        chunk), else issued now. The next :meth:`run` starts from it, so reading it costs no second transfer."""
        self.prefetch()
        return (self._resident if self.num_chunks == 1 else self._next[1]).get()

    def _run_chunk(self, chunk: Any, x: jax.Array, aux: Any) -> jax.Array:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Some donated buffers were not usable")
            return self._fn(chunk, x, aux)

    def _time_alone(self, x: Any, aux: Any) -> None:
        """One chunk's transfer with nothing else running, then its compute with the chunk already there."""
        jax.block_until_ready(x)
        t0 = time.perf_counter()
        dev = self._put(self.num_chunks - 1)
        jax.block_until_ready(dev.get())
        t1 = time.perf_counter()
        jax.block_until_ready(self._run_chunk(dev.get(), jax.tree.map(jnp.copy, x), aux))
        t2 = time.perf_counter()
        self._free(dev)
        self._alone = (t1 - t0, t2 - t1)

    @property
    def overlap(self) -> dict[str, Any] | None:
        """Seconds per chunk of the transfer alone, the compute alone and the two streamed together, and the share
        of the transfer hidden behind compute (1: fully hidden); None before a measured run."""
        if self.num_chunks == 1 or self._alone is None or not self._streamed:
            return None
        h2d, compute = self._alone
        streamed = float(np.median(self._streamed))
        hidden = 1.0 - max(streamed - compute, 0.0) / h2d if h2d > 0 else 1.0
        return {"h2d_s_per_chunk": h2d, "compute_s_per_chunk": compute, "streamed_s_per_chunk": streamed,
                "hidden_fraction": min(max(hidden, 0.0), 1.0)}

    def run(self, x: jax.Array, aux: Any, *, prefetch_after: "BlockPool | None" = None) -> jax.Array:
        """All chunks of this group over ``x``; ``prefetch_after`` (the next group, or this one for the next step)
        gets its first chunk issued while this group's last chunk computes."""
        self._runs += 1
        if self.num_chunks == 1:  # all blocks fit in one chunk: keep them, re-sending them every step is waste
            self.prefetch()
            if prefetch_after is not None and prefetch_after is not self:
                prefetch_after.prefetch()
            return self._run_chunk(self._resident.get(), x, aux)
        if self._runs == 2:
            self._time_alone(x, aux)
        self.prefetch()
        t0 = time.perf_counter()
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
            x = self._run_chunk(cur.get(), x, aux)
            prev = cur
        jax.block_until_ready(x)
        if self._runs > 2:
            self._streamed.append((time.perf_counter() - t0) / self.num_chunks)
        self._free(prev)
        return x

    def release(self) -> None:
        if self._next is not None:
            self._free(self._next[1])
            self._next = None
        if self._resident is not None:
            self._free(self._resident)
            self._resident = None

    def drop(self) -> None:
        """Free the group's weights on the devices and in host storage; its sizes and overlap stay for the metrics."""
        self.release()
        self.host.drop()


class _Transfer:
    """A chunk's device arrays, or the future of the thread copying them."""

    __slots__ = ("value", "future")

    def __init__(self, value: Any = None, future: Future | None = None) -> None:
        self.value, self.future = value, future

    def get(self) -> Any:
        if self.future is not None:
            self.value, self.future = self.future.result(), None
        return self.value
