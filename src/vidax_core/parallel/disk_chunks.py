"""``offload.storage: disk``: a streamed block group read from a file cache each time a chunk is needed.

The checkpoint's tensors rarely have the layout a chunk needs (a Linear weight is transposed, the layers of a
chunk are stacked, a bf16 file may run 8-bit), so the group is converted once, a layer range at a time, into one
raw file per stacked parameter under the cache folder (``~/.cache/vidax/offload``, or ``VIDAX_OFFLOAD_CACHE``),
keyed by the checkpoint files' sizes and times, the parameters' shapes and dtypes and the fused LoRA adapters.
Building it holds one leaf's chunk in memory at a time, and the written pages are the page cache's, not the
process's. A run then memory-maps those files: a chunk's transfer reads its layers through the OS page cache
(from RAM when it has room, else from the disk), issued by the offload pool's transfer thread while the previous
chunk computes, so the process itself holds only the chunks on their way to or on the devices.

A file that changes size during the run, and a checkpoint that cannot be memory-mapped (a pickle ``.pth``), are
one ``error:`` line each.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import tempfile
import uuid
from typing import Any, Iterable, Mapping

import jax
import numpy as np

from vidax_core.errors import UserError
from vidax_core.parallel import sharding as shd
from vidax_core.io.lazy import read_layers

DISK = "disk"
CACHE_ENV = "VIDAX_OFFLOAD_CACHE"
FORMAT = 1
_UNSTREAMABLE = (".pth", ".pt", ".ckpt", ".bin", ".pkl")


def cache_root() -> str:
    return os.path.expanduser(os.environ.get(CACHE_ENV) or "~/.cache/vidax/offload")


def backing_files(tensors: Any) -> list[str]:
    """The files a tensor source reads (through its wrappers: renamed, quantized, progress, fused views)."""
    found: list[str] = []
    seen: set[int] = set()

    def walk(obj: Any) -> None:
        if obj is None or id(obj) in seen:
            return
        seen.add(id(obj))
        path = getattr(obj, "path", None)
        if isinstance(path, str):
            found.append(path)
        for attr in ("files", "sources"):
            many = getattr(obj, attr, None)
            if isinstance(many, (list, tuple)):
                for item in many:
                    walk(item) if not isinstance(item, str) else found.append(item)
        for attr in ("source", "_source", "base", "_base"):
            walk(getattr(obj, attr, None))

    walk(tensors)
    return sorted(set(found))


def check_streamable(tensors: Any, where: str) -> list[str]:
    """The checkpoint files behind ``tensors``, refusing a format that cannot be memory-mapped."""
    files = backing_files(tensors)
    bad = [f for f in files if f.lower().endswith(_UNSTREAMABLE)]
    if bad:
        raise UserError(f"offload.storage=disk streams memory-mapped safetensors files; {where} is read from "
                        f"{os.path.basename(bad[0])}, a pickle file that cannot be streamed: set offload.storage=host "
                        "(or convert the checkpoint to safetensors)")
    return files


def _stamp(path: str) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


class DiskChunks:
    """A group's ``state`` as ``len(self)`` chunks of ``chunk_size`` layers, each read from the cache files when
    :meth:`put` is called; the same interface as :class:`vidax_core.parallel.host_chunks.HostChunks`."""

    memory = DISK
    direct = False

    def __init__(self, state: Any, chunk_size: int, shardings: Any, *, name: str, files: Iterable[str],
                 extra: Mapping[str, Any] | None = None, log: Any = None) -> None:
        leaves, self._treedef = jax.tree.flatten(state)
        self.num_blocks = int(leaves[0].shape[0])
        if self.num_blocks % chunk_size:
            raise ValueError(f"offload chunk_size {chunk_size} does not divide the {self.num_blocks} blocks")
        self.chunk_size, self.shardings = chunk_size, shardings
        self._targets = jax.tree.leaves(shardings)
        self.abstract = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), state)
        self.files = list(files)
        self._sources = {f: _stamp(f) for f in self.files}
        shapes = [(tuple(int(d) for d in a.shape), np.dtype(a.dtype).name) for a in leaves]
        key = {"format": FORMAT, "group": name, "leaves": shapes, "extra": dict(extra or {}),
               "sources": [(os.path.abspath(f), *self._sources[f]) for f in self.files]}
        digest = hashlib.sha1(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:20]
        if not self.files:  # in-memory tensors (tests): nothing to key a reusable cache on; removed at exit
            digest += "-" + uuid.uuid4().hex[:8]
        self.dir = os.path.join(cache_root(), f"{name}-{digest}")
        if not self.files:
            atexit.register(shutil.rmtree, self.dir, True)
        if not os.path.exists(os.path.join(self.dir, "layout.json")):
            self._build(leaves, shapes, log)
        elif log is not None:
            log(f"offload.storage=disk: reusing the {name} cache {self.dir}")
        self._maps = [np.memmap(self._file(i), dtype=_dtype(dt), mode="r", shape=shape)
                      for i, (shape, dt) in enumerate(shapes)]
        self._stamps = {self._file(i): _stamp(self._file(i)) for i in range(len(shapes))}

    def _file(self, i: int, root: str | None = None) -> str:
        return os.path.join(root or self.dir, f"{i:04d}.bin")

    def _build(self, leaves: list, shapes: list, log: Any) -> None:
        """Convert the group into the cache, one leaf's chunk at a time, and publish it by renaming the folder."""
        os.makedirs(cache_root(), exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=os.path.basename(self.dir) + ".tmp-", dir=cache_root())
        total = sum(int(np.prod(s, dtype=np.int64)) * _dtype(d).itemsize for s, d in shapes)
        if log is not None:
            log(f"offload.storage=disk: writing the {total / 2**30:.2f} GiB cache {self.dir} (once per checkpoint)")
        try:
            for i, (leaf, (shape, dt)) in enumerate(zip(leaves, shapes)):
                out = np.memmap(self._file(i, tmp), dtype=_dtype(dt), mode="w+", shape=shape)
                for lo in range(0, self.num_blocks, self.chunk_size):
                    out[lo:lo + self.chunk_size] = read_layers(leaf, lo, lo + self.chunk_size)
                out.flush()
                del out
            with open(os.path.join(tmp, "layout.json"), "w") as f:
                json.dump({"leaves": shapes}, f)
            try:
                os.rename(tmp, self.dir)
            except OSError:  # another process published the same cache first
                shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def __len__(self) -> int:
        return self.num_blocks // self.chunk_size

    def check_files(self) -> None:
        """One ``error:`` line when a checkpoint file or a cache file changed since the run opened it."""
        for path, was in [*self._sources.items(), *self._stamps.items()]:
            try:
                now = _stamp(path)
            except OSError:
                now = None
            if now is None or now[0] != was[0]:
                what = "checkpoint file" if path in self._sources else "offload cache file"
                raise UserError(f"offload.storage=disk: the {what} {path} changed during the run (was {was[0]} "
                                f"bytes, now {'gone' if now is None else f'{now[0]} bytes'}): leave it alone while "
                                "vidax runs, or set offload.storage=host")

    def put(self, i: int) -> Any:
        """Chunk ``i`` read from the cache files and sent to the devices (one transfer per parameter)."""
        lo, hi = i * self.chunk_size, (i + 1) * self.chunk_size
        if i == 0:
            self.check_files()
        parts = [shd.put(np.asarray(m[lo:hi]), s) for m, s in zip(self._maps, self._targets)]
        return self._treedef.unflatten(parts)

    def host_bytes(self) -> int:
        return 0

    def disk_bytes(self) -> int:
        return sum(m.nbytes for m in self._maps)


def _dtype(name: str) -> np.dtype:
    import ml_dtypes

    return np.dtype(getattr(ml_dtypes, name, None) or name)
