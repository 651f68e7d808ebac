"""``offload.storage: disk``: a streamed block group read from a file cache each time a chunk is needed.

The checkpoint's tensors rarely have the layout a chunk needs (a Linear weight is transposed, the layers of a
chunk are stacked, a bf16 file may run 8-bit), so the group is converted once, a layer range at a time, into one
raw file per stacked parameter under the cache folder (:func:`cache_root`: ``VIDAX_OFFLOAD_CACHE``, else
``~/.cache/vidax/offload``), keyed by the checkpoint files' sizes and times, the parameters' shapes and dtypes and
the fused LoRA adapters. Building it holds one leaf's chunk in memory at a time; the written pages are the page
cache's, not the process's.

The cache is checked before use at every open (:meth:`DiskChunks._damage`): each file a regular file (never a
folder, FIFO, device or symlink: opened ``O_NOFOLLOW | O_NONBLOCK`` and checked again through its descriptor) of
the size its manifest states, and every layer of every file matching the CRC-32 the manifest holds for it (read
once, a block at a time: one pass over the cache, which also warms the page cache the first step reads; a file of
the right size holding NaNs or random bytes does not match). A damaged cache is rebuilt; one that cannot be
replaced, and an unusable cache folder (:func:`check_cache_root`: a file, a dangling symlink, a loop, a device,
under a file, unwritable, ``VIDAX_OFFLOAD_CACHE=""``), is one ``error:`` line.

A chunk's transfer reads its layers with ``pread`` into a fresh buffer (issued by the offload pool's transfer
thread while the previous chunk computes) and checks there each layer's fingerprint (a hash of its first, middle
and last page: a change made during the run is caught at no real cost), so the process holds only the chunks on
their way to or on the devices. The files are never memory-mapped: a file shortened while the run reads
it is a short read and one ``error:`` line, not SIGBUS. The descriptors stay open for the run, so a cache removed
under a running process (another run rebuilding it) does not disturb it. A checkpoint that cannot be
memory-mapped (a pickle ``.pth``) is refused before any weight is read.
"""

from __future__ import annotations

import atexit
import errno
import hashlib
import json
import mmap
import os
import shutil
import stat
import tempfile
import uuid
import zlib
from typing import Any, Iterable, Mapping

import jax
import numpy as np

from vidax_core.errors import UserError
from vidax_core.io import stale
from vidax_core.io.lazy import read_layers
from vidax_core.parallel import sharding as shd

DISK = "disk"
CACHE_ENV = "VIDAX_OFFLOAD_CACHE"
DEFAULT_ROOT = "~/.cache/vidax/offload"
FORMAT = 2
MANIFEST = "manifest.json"
_UNSTREAMABLE = (".pth", ".pt", ".ckpt", ".bin", ".pkl")
PAGE = 4096  # bytes per fingerprint sample
SAMPLES = 3  # pages sampled per layer of a file: its first, middle and last
_READ_MAX = 1 << 30  # bytes per pread call (Linux returns at most 2 GiB - 4 KiB per call)
_CHECK_BLOCK = 1 << 26  # bytes read at a time when a file's checksums are verified


# ---- the cache folder ------------------------------------------------------------------------------------------

def cache_root() -> str:
    """The cache folder: ``VIDAX_OFFLOAD_CACHE`` (set but empty is refused: it would silently mean the default),
    else ``~/.cache/vidax/offload``."""
    value = os.environ.get(CACHE_ENV)
    if value is None:
        return os.path.expanduser(DEFAULT_ROOT)
    if not value.strip():
        raise UserError(f"{CACHE_ENV} is set but empty: set it to a writable folder for the offload.storage=disk "
                        f"cache, or unset it to use {DEFAULT_ROOT}")
    return os.path.abspath(os.path.expanduser(value))


def _named(root: str) -> str:
    return f"{CACHE_ENV}={root}" if os.environ.get(CACHE_ENV) is not None else \
        f"the offload cache folder {root} ({CACHE_ENV} unset)"


def _unusable(root: str, why: str) -> UserError:
    return UserError(f"offload.storage=disk cannot use {_named(root)}: {why}; set {CACHE_ENV} to a writable "
                     "folder, or set offload.storage=host")


def check_cache_root(*, create: bool = False) -> str:
    """The cache folder, checked usable: a folder this process may write (or, when it does not exist yet, one it
    can create under a writable folder). ``create``: make it and write a probe file in it (a run); without, nothing
    is written (the dry run, the pre-load checks). One :class:`UserError` naming ``VIDAX_OFFLOAD_CACHE`` otherwise."""
    root = cache_root()
    try:
        st = os.stat(root)
    except FileNotFoundError:
        if os.path.islink(root):
            raise _unusable(root, f"it is a symlink to {os.readlink(root)!r}, which does not exist") from None
        _check_creatable(root)
        st = None
    except OSError as exc:  # a symlink loop, a path under a file, no permission to look
        raise _unusable(root, _why(exc)) from None
    if st is not None:
        if not stat.S_ISDIR(st.st_mode):
            raise _unusable(root, f"it is {_kind(st.st_mode)}, not a folder")
        if not os.access(root, os.W_OK | os.X_OK):
            raise _unusable(root, "this user cannot write there")
    if create:
        try:
            os.makedirs(root, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=root, prefix=".vidax-probe-"):
                pass
        except OSError as exc:
            raise _unusable(root, _why(exc)) from None
    return root


def _check_creatable(root: str) -> None:
    """A missing cache folder: its nearest existing ancestor must be a folder this user may write."""
    parent = os.path.dirname(root)
    while True:
        try:
            st = os.stat(parent)
            break
        except FileNotFoundError:
            if os.path.islink(parent):
                raise _unusable(root, f"{parent} is a symlink to a path that does not exist") from None
            up = os.path.dirname(parent)
            if up == parent:
                raise _unusable(root, "no part of its path exists") from None
            parent = up
        except OSError as exc:
            raise _unusable(root, _why(exc)) from None
    if not stat.S_ISDIR(st.st_mode):
        raise _unusable(root, f"{parent} is {_kind(st.st_mode)}, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise _unusable(root, f"it does not exist and this user cannot create it in {parent}")


def _why(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "its path is a symlink loop"
    if exc.errno == errno.ENOTDIR:
        return "part of its path is a file, not a folder"
    return (exc.strerror or str(exc)).lower()


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "a file"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISLNK(mode):
        return "a symlink"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


# ---- what a disk-streamed group reads ------------------------------------------------------------------------

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


# ---- fingerprints ----------------------------------------------------------------------------------------------

def sample_offsets(layer_bytes: int) -> list[tuple[int, int]]:
    """(offset, length) of the pages a layer's fingerprint hashes, relative to the layer's first byte: the whole
    layer when it is small, else its first, middle and last page."""
    if layer_bytes <= SAMPLES * PAGE:
        return [(0, layer_bytes)]
    mid = (layer_bytes // 2) // PAGE * PAGE
    return [(0, PAGE), (mid, PAGE), (layer_bytes - PAGE, PAGE)]


def fingerprint(pages: Iterable[bytes]) -> str:
    h = hashlib.blake2b(digest_size=8)
    for p in pages:
        h.update(p)
    return h.hexdigest()


def _layer_prints(data: np.ndarray) -> list[str]:
    """The fingerprint of each layer (leading index) of a C-contiguous host array."""
    raw = np.ascontiguousarray(data).reshape(data.shape[0], -1).view(np.uint8)
    spots = sample_offsets(raw.shape[1])
    return [fingerprint(row[o:o + n].tobytes() for o, n in spots) for row in raw]


def _layer_sums(data: np.ndarray) -> list[int]:
    """The CRC-32 of each layer (leading index) of a C-contiguous host array."""
    raw = np.ascontiguousarray(data).reshape(data.shape[0], -1).view(np.uint8)
    return [zlib.crc32(row) for row in raw]


def _pread(fd: int, out: memoryview, offset: int) -> int:
    """Fill ``out`` from ``fd`` at ``offset``; the bytes read (fewer only at the end of the file)."""
    done = 0
    while done < len(out):
        n = os.preadv(fd, [out[done:done + _READ_MAX]], offset + done)
        if n <= 0:
            break
        done += n
    return done


# ---- the cache of one group ------------------------------------------------------------------------------------

class DiskChunks:
    """A group's ``state`` as ``len(self)`` chunks of ``chunk_size`` layers, each read from the cache files when
    :meth:`put` is called; the same interface as :class:`vidax_core.parallel.host_chunks.HostChunks`."""

    memory = DISK
    direct = False

    def __init__(self, state: Any, chunk_size: int, shardings: Any, *, name: str, files: Iterable[str],
                 extra: Mapping[str, Any] | None = None, log: Any = None) -> None:
        self._fds: list[int] = []
        leaves, self._treedef = jax.tree.flatten(state)
        self.num_blocks = int(leaves[0].shape[0])
        if self.num_blocks % chunk_size:
            raise ValueError(f"offload chunk_size {chunk_size} does not divide the {self.num_blocks} blocks")
        self.chunk_size, self.shardings = chunk_size, shardings
        self._targets = jax.tree.leaves(shardings)
        self.abstract = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), state)
        self.files = list(files)
        self._sources = {f: _stamp(f) for f in self.files}
        self._shapes = [(tuple(int(d) for d in a.shape), np.dtype(a.dtype).name) for a in leaves]
        key = {"format": FORMAT, "group": name, "leaves": self._shapes, "extra": dict(extra or {}),
               "sources": [(os.path.abspath(f), *self._sources[f]) for f in self.files]}
        digest = hashlib.sha1(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:20]
        if not self.files:  # in-memory tensors (tests): nothing to key a reusable cache on; removed at exit
            digest += "-" + uuid.uuid4().hex[:8]
        self.root = check_cache_root(create=True)
        self.name = f"{name}-{digest}"
        self.dir = os.path.join(self.root, self.name)
        if not self.files:
            atexit.register(shutil.rmtree, self.dir, True)
        self._prints: list[list[str]] = []
        self._open(leaves, name, log)

    # -- opening: check, rebuild, open --------------------------------------------------------------------------

    def _open(self, leaves: list, group: str, log: Any) -> None:
        damage = self._damage() if os.path.lexists(self.dir) else None
        if os.path.lexists(self.dir) and damage is None:
            if log is not None:
                log(f"offload.storage=disk: reusing the {group} cache {self.dir}")
        else:
            if damage is not None:
                if log is not None:
                    log(f"offload.storage=disk: the {group} cache {self.dir} is damaged ({damage}): rebuilding it")
                self._discard(damage)
            self._build(leaves, log)
            damage = self._damage()
            if damage is not None:  # written just now and already wrong: the folder is not ours to use
                raise UserError(f"offload.storage=disk: the cache {self.dir} was rebuilt and is still damaged "
                                f"({damage}): set {CACHE_ENV} to another folder, or set offload.storage=host")
        self._fds = self._descriptors()

    def _file(self, i: int, root: str | None = None) -> str:
        return os.path.join(root or self.dir, f"{i:04d}.bin")

    def _leaf_bytes(self, i: int) -> tuple[int, int]:
        """(bytes of leaf ``i``'s file, bytes of one of its layers)."""
        shape, dt = self._shapes[i]
        layer = int(np.prod(shape[1:], dtype=np.int64)) * _dtype(dt).itemsize
        return layer * shape[0], layer

    def _damage(self) -> str | None:
        """Why the cache folder cannot be used as it is (None: it can): read from its manifest and files, each
        file opened without following links and without blocking."""
        try:
            st = os.lstat(self.dir)
        except OSError as exc:
            return f"its folder cannot be read: {_why(exc)}"
        if not stat.S_ISDIR(st.st_mode):
            return f"its folder is {_kind(st.st_mode)}"
        manifest = self._read_manifest()
        if isinstance(manifest, str):
            return manifest
        self._prints, sums = manifest
        for i in range(len(self._shapes)):
            try:
                fd = _open_regular(self._file(i))
            except _NotRegular as exc:
                return f"{os.path.basename(self._file(i))} {exc}"
            try:
                why = self._check_file(i, fd, sums[i])
            finally:
                os.close(fd)
            if why is not None:
                return f"{os.path.basename(self._file(i))} {why}"
        return None

    def _read_manifest(self) -> tuple[list[list[str]], list[list[int]]] | str:
        path = os.path.join(self.dir, MANIFEST)
        try:
            fd = _open_regular(path)
        except _NotRegular as exc:
            return f"{MANIFEST} {exc}"
        try:
            with os.fdopen(fd, "rb") as f:
                data = json.loads(f.read(1 << 24).decode("utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            return f"{MANIFEST} is not readable JSON"
        want = [[list(s), d] for s, d in self._shapes]
        if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("leaves") != want:
            return f"{MANIFEST} does not describe this group"
        prints, sums = data.get("prints"), data.get("sums")
        for table, kind in ((prints, str), (sums, int)):
            if (not isinstance(table, list) or len(table) != len(self._shapes)
                    or any(not isinstance(p, list) or len(p) != s[0] or not all(type(x) is kind for x in p)
                           for p, (s, _) in zip(table, self._shapes))):
                return f"{MANIFEST} holds no fingerprint and checksum of every layer"
        return prints, sums

    def _check_file(self, i: int, fd: int, sums: list[int]) -> str | None:
        """Leaf ``i``'s open file against the manifest: its size, then every layer's CRC-32, read a block at a
        time."""
        size, layer = self._leaf_bytes(i)
        have = os.fstat(fd).st_size
        if have != size:
            return f"holds {have} bytes, {size} expected"
        block = bytearray(min(max(layer, 1), _CHECK_BLOCK))
        view = memoryview(block)
        for k, want in enumerate(sums):
            crc, done = 0, 0
            while done < layer:
                n = min(len(block), layer - done)
                if _pread(fd, view[:n], k * layer + done) != n:
                    return "is shorter than its manifest says"
                crc, done = zlib.crc32(view[:n], crc), done + n
            if crc != want:
                return f"layer {k} does not match its checksum (its contents changed)"
        return None

    def _discard(self, damage: str) -> None:
        """Move the damaged cache out of the way (renamed first, so a concurrent run never sees half of it)."""
        trash = os.path.join(self.root, f".{self.name}{stale.stamp()}{uuid.uuid4().hex[:8]}.trash")
        try:
            os.rename(self.dir, trash)
        except FileNotFoundError:
            return  # another run moved it first
        except OSError as exc:
            raise UserError(f"offload.storage=disk: the cache {self.dir} is damaged ({damage}) and cannot be "
                            f"replaced ({_why(exc)}): delete it, set {CACHE_ENV} to another folder, or set "
                            "offload.storage=host") from None
        if os.path.isdir(trash) and not os.path.islink(trash):
            shutil.rmtree(trash, ignore_errors=True)
        else:
            try:
                os.unlink(trash)
            except OSError:
                pass

    def _build(self, leaves: list, log: Any) -> None:
        """Convert the group into the cache, one leaf's chunk at a time, with the fingerprint of every layer, and
        publish it by renaming the folder."""
        stale.sweep(self.root, f".{self.name}.", ".tmp")  # builds and trash that killed runs left
        stale.sweep(self.root, f".{self.name}.", ".trash")
        total = sum(self._leaf_bytes(i)[0] for i in range(len(self._shapes)))
        free = shutil.disk_usage(self.root).free
        if free < total:
            raise UserError(f"offload.storage=disk: the cache needs {total / 2**30:.2f} GiB and {self.root} has "
                            f"{free / 2**30:.2f} GiB free: free space there, set {CACHE_ENV} to another folder, or "
                            "set offload.storage=host")
        tmp = os.path.join(self.root, f".{self.name}{stale.stamp()}{uuid.uuid4().hex[:8]}.tmp")
        if log is not None:
            log(f"offload.storage=disk: writing the {total / 2**30:.2f} GiB cache {self.dir} (once per checkpoint)")
        try:
            os.mkdir(tmp)
            prints, sums = [], []
            for i, leaf in enumerate(leaves):
                shape, dt = self._shapes[i]
                prints.append([])
                sums.append([])
                with open(self._file(i, tmp), "wb") as f:
                    for lo in range(0, self.num_blocks, self.chunk_size):
                        part = np.ascontiguousarray(np.asarray(read_layers(leaf, lo, lo + self.chunk_size),
                                                               dtype=_dtype(dt)))
                        prints[-1] += _layer_prints(part)
                        sums[-1] += _layer_sums(part)
                        f.write(part.reshape(-1).view(np.uint8).data)
                        del part
            with open(os.path.join(tmp, MANIFEST), "w") as f:
                json.dump({"format": FORMAT, "leaves": [[list(s), d] for s, d in self._shapes], "prints": prints,
                           "sums": sums}, f)
            try:
                os.rename(tmp, self.dir)
            except OSError:  # another process published the same cache first (checked after)
                shutil.rmtree(tmp, ignore_errors=True)
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise UserError(f"offload.storage=disk: cannot write the cache in {self.root} ({_why(exc)}): set "
                            f"{CACHE_ENV} to a writable folder with room, or set offload.storage=host") from None
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def _descriptors(self) -> list[int]:
        fds = []
        try:
            for i in range(len(self._shapes)):
                fds.append(_open_regular(self._file(i)))
        except _NotRegular as exc:
            for fd in fds:
                os.close(fd)
            raise UserError(f"offload.storage=disk: the cache file {self._file(i)} {exc} (changed while it was "
                            "opened): run again, or set offload.storage=host") from None
        return fds

    # -- the run ------------------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return self.num_blocks // self.chunk_size

    def check_files(self) -> None:
        """One ``error:`` line when a checkpoint file or a cache file changed since the run opened it."""
        for path, was in self._sources.items():
            try:
                now = _stamp(path)
            except OSError:
                now = None
            if now is None or now[0] != was[0]:
                self._changed("checkpoint file", path, f"was {was[0]} bytes, now "
                              f"{'gone' if now is None else f'{now[0]} bytes'}")
        for i, fd in enumerate(self._fds):
            size, _ = self._leaf_bytes(i)
            now = os.fstat(fd).st_size
            if now != size:
                self._changed("offload cache file", self._file(i), f"was {size} bytes, now {now} bytes")

    @staticmethod
    def _changed(what: str, path: str, how: str) -> None:
        raise UserError(f"offload.storage=disk: the {what} {path} changed during the run ({how}): leave it alone "
                        "while vidax runs, or set offload.storage=host")

    def read(self, i: int) -> list[np.ndarray]:
        """Chunk ``i`` of every leaf as host arrays, read and checked against the fingerprints."""
        lo, hi = i * self.chunk_size, (i + 1) * self.chunk_size
        if not self._fds:
            raise RuntimeError("the offload cache was closed")
        out = []
        for k, fd in enumerate(self._fds):
            shape, dt = self._shapes[k]
            _, layer = self._leaf_bytes(k)
            buf = _page_buffer((hi - lo,) + shape[1:], _dtype(dt))
            raw = memoryview(buf.reshape(-1).view(np.uint8))
            if _pread(fd, raw, lo * layer) != len(raw):
                self._changed("offload cache file", self._file(k), f"now {os.fstat(fd).st_size} bytes, "
                              f"{self._leaf_bytes(k)[0]} expected")
            if _layer_prints(buf) != self._prints[k][lo:hi]:
                self._changed("offload cache file", self._file(k), f"layers {lo} to {hi - 1} no longer match "
                              "their fingerprints")
            out.append(buf)
        return out

    def put(self, i: int) -> Any:
        """Chunk ``i`` read from the cache files and sent to the devices (one transfer per parameter)."""
        if i == 0:
            self.check_files()
        parts = [shd.put(a, s) for a, s in zip(self.read(i), self._targets)]
        return self._treedef.unflatten(parts)

    def host_bytes(self) -> int:
        return 0

    def disk_bytes(self) -> int:
        return sum(self._leaf_bytes(i)[0] for i in range(len(self._shapes)))

    def drop(self) -> None:
        """Let go of the cache files (the page cache is the OS's); sizes stay known."""
        self.close()

    def close(self) -> None:
        fds, self._fds = getattr(self, "_fds", []), []
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - at interpreter exit the modules may be gone already
            pass


class _NotRegular(Exception):
    pass


def _page_buffer(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An uninitialised array in an anonymous mapping of its own: page-aligned (the CPU backend places it without
    a copy) and handed back to the OS the moment it is freed (from the heap, freed chunks stayed in the process:
    a chunk's worth of memory for good)."""
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if nbytes < mmap.PAGESIZE:
        return np.empty(shape, dtype)
    region = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)  # counted as the process's own
    return np.frombuffer(region, dtype=dtype).reshape(shape)


def _open_regular(path: str) -> int:
    """A read-only descriptor of ``path`` if it is a regular file: symlinks are not followed and a FIFO or
    device is never waited on (``O_NONBLOCK``), then the descriptor itself is checked."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise _NotRegular("is missing") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _NotRegular("is a symlink") from None
        raise _NotRegular(f"cannot be opened ({_why(exc)})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise _NotRegular(f"is {_kind(mode)}, not a file")
    return fd


def _dtype(name: str) -> np.dtype:
    import ml_dtypes

    return np.dtype(getattr(ml_dtypes, name, None) or name)
