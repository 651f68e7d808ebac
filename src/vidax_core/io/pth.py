"""Safe reading of ``torch.save`` checkpoints (``.pth``/``.pt``/``.bin``) into numpy, without torch.

``torch.save`` (torch >= 1.6) writes a zip archive ``<folder>/data.pkl`` (the pickled object graph),
``<folder>/data/<key>`` (one raw storage per key, stored uncompressed), ``<folder>/byteorder`` and
``<folder>/version``; the folder name varies and is taken from the first entry. The pickle is read by a
restricted unpickler whose ``find_class`` resolves only tensor-rebuild functions, storage classes, dtypes,
``collections.OrderedDict``, ``torch.Size`` and ``_codecs.encode`` -- each to a vidax stand-in, never to torch
or any other real callable -- so no code from the file ever runs. Anything else is refused with a one-line
:class:`UserError`. Storages are memory-mapped straight out of the zip (or read into memory when a member
is compressed) and tensors are numpy views honouring size, stride and storage offset.

What you get back: nested containers are flattened to dotted keys (``{"a": {"b": t}}`` -> ``"a.b"``, list and
tuple items by index); non-tensor leaves (numbers, strings, None) are dropped. With ``unwrap=True`` (the
default) a wrapper checkpoint such as ``{"state_dict": sd, "epoch": 3}`` or ``{"model": sd, "optimizer": ...}``
is first unwrapped to ``sd``: while the top level is a dict holding no tensors directly and one of the keys
``state_dict``, ``model_state_dict``, ``model``, ``module``, ``net`` (checked in that order) holds a dict, that dict
replaces it. A bare tensor saved at the top level gets the key ``""``.

Refused with a clear error: the legacy non-zip format (torch < 1.6), TorchScript archives, and any pickled
object other than plain tensors/parameters (quantized, sparse, tensor subclasses, arbitrary Python classes).
"""

from __future__ import annotations

import collections
import io
import lzma
import os
import pickle
import struct
import zipfile
import zlib
from typing import Any, Iterator, Mapping

import ml_dtypes
import numpy as np

from vidax_core.errors import UserError

__all__ = ["PthFile", "load_pth"]

# torch dtype name -> numpy dtype (aliases included: torch.float is torch.float32 etc.).
_TORCH_DTYPES: dict[str, Any] = {
    "float32": np.float32,
    "float": np.float32,
    "float64": np.float64,
    "double": np.float64,
    "float16": np.float16,
    "half": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e5m2": ml_dtypes.float8_e5m2,
    "float8_e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
    "float8_e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
    "int8": np.int8,
    "int16": np.int16,
    "short": np.int16,
    "int32": np.int32,
    "int": np.int32,
    "int64": np.int64,
    "long": np.int64,
    "uint8": np.uint8,
    "uint16": np.uint16,
    "uint32": np.uint32,
    "uint64": np.uint64,
    "bool": np.bool_,
    "complex64": np.complex64,
    "cfloat": np.complex64,
    "complex128": np.complex128,
    "cdouble": np.complex128,
}

# Legacy typed storage classes (``torch.FloatStorage`` ...) -> numpy dtype.
_STORAGE_CLASSES: dict[str, Any] = {
    "FloatStorage": np.float32,
    "DoubleStorage": np.float64,
    "HalfStorage": np.float16,
    "BFloat16Storage": ml_dtypes.bfloat16,
    "LongStorage": np.int64,
    "IntStorage": np.int32,
    "ShortStorage": np.int16,
    "CharStorage": np.int8,
    "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
    "ComplexFloatStorage": np.complex64,
    "ComplexDoubleStorage": np.complex128,
}

_WRAPPER_KEYS = ("state_dict", "model_state_dict", "model", "module", "net")


class _Refused(Exception):
    """Internal: a pickled global outside the allowlist (turned into a UserError naming the file)."""

    def __init__(self, module: str, name: str) -> None:
        super().__init__(f"{module}.{name}")
        self.module, self.name = module, name


class _Corrupt(Exception):
    """Internal: the pickle is well-formed but describes something impossible (turned into a UserError)."""


class _Sealed:
    """Base of every stand-in object: the pickle may not set attributes on it (BUILD opcode)."""

    __slots__ = ()

    def __setstate__(self, state: Any) -> None:
        raise _Corrupt("unexpected object state in the pickle")


class _DType(_Sealed):
    """A torch dtype record (``torch.bfloat16``), as pickled by ``_rebuild_tensor_v3`` or stored as a value."""

    __slots__ = ("name", "np")

    def __init__(self, name: str, np_dtype: Any) -> None:
        self.name, self.np = name, np.dtype(np_dtype) if np_dtype is not None else None

    def __call__(self, *args: Any) -> Any:
        raise _Corrupt(f"torch.{self.name} is not callable")


class _StorageType(_Sealed):
    """A storage class (``torch.FloatStorage``, ``torch.UntypedStorage``); only meaningful inside a storage record."""

    __slots__ = ("name", "np")

    def __init__(self, name: str, np_dtype: Any) -> None:
        self.name, self.np = name, np.dtype(np_dtype) if np_dtype is not None else None

    def __call__(self, *args: Any) -> Any:
        raise _Corrupt(f"storage class {self.name} called directly")


class _Storage(_Sealed):
    """One ``data/<key>`` record: raw bytes read lazily; ``dtype`` is the storage class's element type (or None)."""

    __slots__ = ("key", "dtype", "numel")

    def __init__(self, key: str, dtype: np.dtype | None, numel: int) -> None:
        self.key, self.dtype, self.numel = key, dtype, numel


class _TensorRef(_Sealed):
    """A tensor described by the pickle; materialised by :meth:`PthFile.__getitem__`."""

    __slots__ = ("storage", "dtype", "offset", "shape", "stride")

    def __init__(self, storage: _Storage, dtype: np.dtype, offset: int, shape: tuple, stride: tuple) -> None:
        self.storage, self.dtype, self.offset, self.shape, self.stride = storage, dtype, offset, shape, stride


MAX_DIMS = 16
MAX_PICKLE_BYTES = 256 << 20
# A tensor may need more bytes than its storage only through stride-0 (broadcast) views, which torch.save keeps;
# materialising one is bounded by this much beyond the storage's own size.
MAX_BROADCAST_BYTES = 64 << 20
MAX_COMPRESSED_STORAGE = 4 << 30
# Everything the zip layer raises on a damaged or unusual archive (unknown compression, encryption, bad streams).
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, struct.error, NotImplementedError,
               RuntimeError, zlib.error, lzma.LZMAError, MemoryError, OverflowError)
MAX_NODES = 250_000  # containers + leaves visited when flattening the pickled object graph


def _int_tuple(value: Any, what: str) -> tuple[int, ...]:
    if (
        not isinstance(value, (tuple, list))
        or len(value) > MAX_DIMS
        or not all(type(v) is int and 0 <= v < 2**62 for v in value)
    ):
        raise _Corrupt(f"bad tensor {what} {value!r:.80}")
    return tuple(value)


def _make_tensor(storage: Any, offset: Any, size: Any, stride: Any, dtype: np.dtype | None) -> _TensorRef:
    if not isinstance(storage, _Storage):
        raise _Corrupt("tensor rebuilt from something that is not a storage record")
    if dtype is None:
        raise _Corrupt(f"storage {storage.key} has no element type")
    if type(offset) is not int or not 0 <= offset < 2**62:
        raise _Corrupt(f"bad storage offset {offset!r:.40}")
    shape, strides = _int_tuple(size, "size"), _int_tuple(stride, "stride")
    if len(shape) != len(strides):
        raise _Corrupt("tensor size and stride differ in length")
    extent = np.dtype(dtype).itemsize
    for d in shape:
        extent *= max(d, 1)
    if extent >= 2**48:  # numpy refuses such shapes even when one dimension is 0; no real tensor is near this
        raise _Corrupt(f"impossible tensor size {shape}")
    return _TensorRef(storage, np.dtype(dtype), offset, shape, strides)


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None, metadata=None):
    return _make_tensor(storage, storage_offset, size, stride, getattr(storage, "dtype", None))


def _rebuild_tensor_v3(
    storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None, dtype=None, metadata=None
):
    if not isinstance(dtype, _DType) or dtype.np is None:
        raise _Corrupt(f"tensor has an unsupported dtype {getattr(dtype, 'name', dtype)!r}")
    return _make_tensor(storage, storage_offset, size, stride, dtype.np)


def _rebuild_parameter(data, requires_grad=False, backward_hooks=None, state=None):
    if not isinstance(data, _TensorRef):
        raise _Corrupt("parameter rebuilt from something that is not a tensor")
    return data


def _torch_size(*args: Any) -> tuple:
    dims = args[0] if args else ()
    return tuple(_int_tuple(dims, "torch.Size"))


def _codecs_encode(obj: Any, encoding: str = "utf-8", errors: str = "strict") -> bytes:
    # Protocol-2 pickles of ``bytes`` objects go through ``_codecs.encode(str, "latin1")``.
    if not isinstance(obj, str) or encoding not in ("latin1", "latin-1", "utf-8", "utf8"):
        raise _Corrupt("unexpected _codecs.encode call")
    return obj.encode(encoding)


class _Opaque(_Sealed):
    """Stands in for a non-tensor object the reader recognises and drops (``io.BytesIO``): created and given its
    state by the pickle, which it ignores, so its bytes are never interpreted."""

    __slots__ = ()

    def __new__(cls, *args: Any) -> "_Opaque":
        return object.__new__(cls)

    def __init__(self, *args: Any) -> None:
        pass

    def __setstate__(self, state: Any) -> None:
        pass


def _ordered_dict(*args: Any) -> collections.OrderedDict:
    return collections.OrderedDict(*args[:1])


class _Callable(_Sealed):
    """An allowlisted global: a fresh, attribute-less wrapper, so BUILD/NEWOBJ opcodes cannot touch vidax code."""

    __slots__ = ("_fn",)

    def __init__(self, fn: Any) -> None:
        self._fn = fn

    def __call__(self, *args: Any) -> Any:
        return self._fn(*args)


def _resolve(module: str, name: str) -> Any:
    """The allowlist: (module, name) -> vidax stand-in. Anything else raises _Refused."""
    if module == "torch._utils":
        if name == "_rebuild_tensor_v2":
            return _Callable(_rebuild_tensor_v2)
        if name == "_rebuild_tensor_v3":
            return _Callable(_rebuild_tensor_v3)
        if name in ("_rebuild_parameter", "_rebuild_parameter_with_state"):
            return _Callable(_rebuild_parameter)
    elif module == "collections" and name == "OrderedDict":
        return _Callable(_ordered_dict)
    elif module == "_codecs" and name == "encode":
        return _Callable(_codecs_encode)
    elif module == "torch":
        if name in _STORAGE_CLASSES:
            return _StorageType(name, _STORAGE_CLASSES[name])
        if name == "UntypedStorage":
            return _StorageType(name, np.uint8)
        if name == "Size":
            return _Callable(_torch_size)
        if name in _TORCH_DTYPES:
            return _DType(name, _TORCH_DTYPES[name])
    elif module == "torch.storage":
        if name == "UntypedStorage":
            return _StorageType(name, np.uint8)
        if name == "TypedStorage":
            return _StorageType(name, None)
    elif module in ("_io", "io") and name == "BytesIO":
        return _Opaque  # TransformerEngine's ``_extra_state`` (Cosmos releases): not a tensor, skipped
    raise _Refused(module, name)


def _prescan(data: bytes) -> None:
    """Walk the pickle's opcodes before unpickling: CPython's unpickler allocates what a length or memo index
    says before reading it (a corrupt ``BINBYTES8`` or ``LONG_BINPUT`` asked for tens of GiB), so every length
    must fit in the bytes that remain and every memo index below the pickle's own size."""
    import pickletools

    limit = len(data)
    try:
        for op, arg, _pos in pickletools.genops(data):
            if op.name in ("BINPUT", "LONG_BINPUT", "PUT", "BINGET", "LONG_BINGET", "GET"):
                index = int(arg) if not isinstance(arg, int) else arg
                if not 0 <= index <= limit:
                    raise _Corrupt(f"memo index {index} beyond the pickle's {limit} bytes")
            if op.name == "STOP":
                return
    except _Corrupt:
        raise
    except (ValueError, TypeError, OverflowError, UnicodeDecodeError, struct.error, IndexError) as exc:
        raise _Corrupt(" ".join(str(exc).split())[:120] or type(exc).__name__) from None
    raise _Corrupt("the pickle has no STOP opcode")


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        return _resolve(str(module), str(name))

    def __init__(self, data: bytes) -> None:
        super().__init__(io.BytesIO(data))
        self.storages: dict[str, _Storage] = {}

    def persistent_load(self, pid: Any) -> Any:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise _Corrupt(f"unexpected persistent id {pid!r:.80}")
        _, storage_type, key, _location, numel = pid
        if not isinstance(storage_type, _StorageType) or not isinstance(key, str) or type(numel) is not int:
            raise _Corrupt(f"bad storage record {pid!r:.80}")
        if not 0 <= numel < 2**62:
            raise _Corrupt(f"bad storage size {numel}")
        found = self.storages.get(key)
        if found is None:
            found = self.storages[key] = _Storage(key, storage_type.np, numel)
        return found


def _flatten(obj: Any, prefix: str, out: dict[str, _TensorRef], depth: int = 0, budget: list | None = None) -> None:
    budget = budget if budget is not None else [MAX_NODES]
    budget[0] -= 1
    if budget[0] < 0:
        raise _Corrupt(f"the pickled object graph has over {MAX_NODES} entries (repeated references?)")
    if depth > 64:
        raise _Corrupt("containers nested too deeply")
    if isinstance(obj, _TensorRef):
        if prefix in out:
            raise _Corrupt(f"two tensors flatten to the same key {prefix!r}")
        out[prefix] = obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(k, (str, int)) and not isinstance(k, bool):
                _flatten(v, f"{prefix}.{k}" if prefix else str(k), out, depth + 1, budget)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _flatten(v, f"{prefix}.{i}" if prefix else str(i), out, depth + 1, budget)
    # anything else (numbers, strings, None, dtypes, bytes) is not a tensor and is skipped


def _unwrap(obj: Any) -> Any:
    for _ in range(8):
        if not isinstance(obj, dict) or any(isinstance(v, _TensorRef) for v in obj.values()):
            return obj
        for key in _WRAPPER_KEYS:
            if isinstance(obj.get(key), dict):
                obj = obj[key]
                break
        else:
            return obj
    return obj


class PthFile(Mapping[str, np.ndarray]):
    """Read-only mapping key -> numpy array of one ``torch.save`` zip checkpoint; tensors are read on access.

    Contiguous tensors of uncompressed members (what ``torch.save`` writes) are read-only memory-mapped views;
    non-contiguous ones (e.g. a saved transpose) are copied into a new C-contiguous array.
    """

    def __init__(self, path: str | os.PathLike, unwrap: bool = True) -> None:
        self.path = path = os.fspath(path)
        try:
            self._size = os.path.getsize(path)
            with open(path, "rb") as f:
                head = f.read(4)
            if head != b"PK\x03\x04":
                if head[:1] == b"\x80":
                    raise UserError(
                        f"{path} uses the legacy torch.save format (torch < 1.6), which vidax does not read: "
                        "re-save it with a newer torch (torch.save) or convert it to safetensors"
                    )
                raise UserError(
                    f"{path} is not a torch.save checkpoint (not a zip archive): check the file or re-download it"
                )
            with zipfile.ZipFile(path) as zf:
                infos = zf.infolist()
                self._members = {i.filename: i for i in infos}
                if not infos:
                    raise UserError(f"{path} is an empty zip archive, not a torch.save checkpoint: re-download it")
                folder = infos[0].filename.split("/", 1)[0]
                self._prefix = f"{folder}/"
                scripted = any(n.startswith(f"{folder}/code/") for n in self._members)
                if scripted or f"{folder}/constants.pkl" in self._members:
                    raise UserError(
                        f"{path} is a TorchScript archive (torch.jit.save), which vidax does not read: "
                        "save the model's state_dict with torch.save instead"
                    )
                pkl_name = f"{folder}/data.pkl"
                if pkl_name not in self._members:
                    raise UserError(f"{path} is a zip archive without {pkl_name}, not a torch.save checkpoint")
                if self._members[pkl_name].file_size > MAX_PICKLE_BYTES:
                    raise UserError(f"{path}: {pkl_name} is over {MAX_PICKLE_BYTES >> 20} MiB, not a state_dict pickle")
                data_pkl = zf.read(pkl_name)
                order_name = f"{folder}/byteorder"
                byteorder = "little"  # files from torch < 1.10 have no byteorder record
                if order_name in self._members:
                    byteorder = zf.read(order_name).decode("ascii", "replace").strip()
                # Offsets of the storage payloads inside the zip (local header + name + extra field).
                self._offsets: dict[str, int] = {}
                with open(path, "rb") as f:
                    for info in infos:
                        if not info.filename.startswith(f"{folder}/data/"):
                            continue
                        f.seek(info.header_offset)
                        local = f.read(30)
                        if len(local) < 30 or local[:4] != b"PK\x03\x04":
                            raise UserError(
                                f"{path} is truncated or corrupt (zip member {info.filename}): re-download it"
                            )
                        n_name, n_extra = struct.unpack("<HH", local[26:30])
                        start = info.header_offset + 30 + n_name + n_extra
                        if start + info.compress_size > self._size:
                            raise UserError(f"{path} is truncated (zip member {info.filename}): re-download it")
                        self._offsets[info.filename] = start
        except UserError:
            raise
        except OSError as exc:
            raise UserError(f"cannot read checkpoint file {path}: {exc.strerror or exc}") from exc
        except _ZIP_ERRORS as exc:
            raise UserError(
                f"{path} is truncated or not a valid torch.save zip archive ({type(exc).__name__}: "
                f"{' '.join(str(exc).split())[:120]}): re-download it"
            ) from None
        if byteorder not in ("little", "big"):
            raise UserError(f"{path} has an unknown byteorder record {byteorder!r}: re-save the checkpoint")
        self._swap = byteorder != ("little" if np.little_endian else "big")

        unpickler = _RestrictedUnpickler(data_pkl)
        try:
            _prescan(data_pkl)
            obj = unpickler.load()
        except _Refused as exc:
            raise UserError(
                f"{path} contains a pickled object vidax will not load ({exc.module}.{exc.name}); "
                "only tensors are read from .pth files"
            ) from None
        except _Corrupt as exc:
            raise UserError(
                f"{path} has a corrupt or unsupported checkpoint pickle ({str(exc)[:160]}): re-save or re-download it"
            ) from None
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001 - any unpickling failure of foreign data is a bad file
            raise UserError(
                f"{path} has a corrupt checkpoint pickle ({type(exc).__name__}: {' '.join(str(exc).split())[:120]}): "
                "re-download it"
            ) from None
        self.raw_object_type = type(obj).__name__
        entries: dict[str, _TensorRef] = {}
        try:
            _flatten(_unwrap(obj) if unwrap else obj, "", entries)
        except _Corrupt as exc:
            raise UserError(f"{path}: {exc}; vidax cannot use this checkpoint") from None
        if not entries:
            raise UserError(f"{path} contains no tensors: pass a checkpoint saved from a model state_dict")
        for name, ref in entries.items():
            self._check(name, ref)
        self._entries = entries
        self._mm: np.memmap | None = None
        self._blobs: dict[str, np.ndarray] = {}

    def _check(self, name: str, ref: _TensorRef) -> None:
        member = f"{self._prefix}data/{ref.storage.key}"
        info = self._members.get(member)
        if info is None:
            raise UserError(
                f"{self.path} is corrupt: tensor {name!r} refers to missing storage {member}: re-download it"
            )
        sdt = ref.storage.dtype
        declared = ref.storage.numel * (sdt.itemsize if sdt is not None else 1)
        if info.file_size < declared:
            raise UserError(
                f"{self.path} is truncated or corrupt at tensor {name!r} (storage {member}): re-download it"
            )
        numel = 1
        for d in ref.shape:
            numel *= d
        if numel * ref.dtype.itemsize > info.file_size + MAX_BROADCAST_BYTES:
            raise UserError(
                f"{self.path} is corrupt: tensor {name[:80]!r} needs more bytes than its storage holds "
                "(a broadcast or impossible size): re-download it"
            )
        if numel:
            last = ref.offset + sum((d - 1) * s for d, s in zip(ref.shape, ref.stride))
            if (last + 1) * ref.dtype.itemsize > info.file_size:
                raise UserError(
                    f"{self.path} is corrupt: tensor {name[:80]!r} reaches past the end of its storage: re-download it"
                )

    def _storage_bytes(self, key: str) -> np.ndarray:
        member = f"{self._prefix}data/{key}"
        info = self._members[member]
        if info.compress_type == zipfile.ZIP_STORED:
            if self._mm is None:
                try:
                    self._mm = np.memmap(self.path, dtype=np.uint8, mode="r")
                except (OSError, ValueError) as exc:
                    raise UserError(f"cannot memory-map checkpoint file {self.path}: {exc}") from exc
            start = self._offsets[member]
            return self._mm[start : start + info.file_size]
        blob = self._blobs.get(member)
        if blob is None and info.file_size > MAX_COMPRESSED_STORAGE:
            raise UserError(f"{self.path}: compressed zip member {member} is too large to unpack; torch.save stores "
                            "storages uncompressed: re-save the checkpoint")
        if blob is None:
            try:
                with zipfile.ZipFile(self.path) as zf:
                    blob = np.frombuffer(zf.read(member), dtype=np.uint8)
            except (OSError, *_ZIP_ERRORS) as exc:
                raise UserError(
                    f"{self.path} is corrupt at zip member {member} ({type(exc).__name__}: "
                    f"{' '.join(str(exc).split())[:120]}): re-download it"
                ) from None
            self._blobs[member] = blob
        return blob

    def __getitem__(self, name: str) -> np.ndarray:
        ref = self._entries[name]
        dtype, shape = ref.dtype, ref.shape
        item = dtype.itemsize
        raw = self._storage_bytes(ref.storage.key)
        numel = int(np.prod(shape, dtype=np.int64))
        if numel == 0:
            return np.zeros(shape, dtype)
        c_strides = [int(np.prod(shape[i + 1 :], dtype=np.int64)) for i in range(len(shape))]
        contiguous = all(st == c for d, st, c in zip(shape, ref.stride, c_strides) if d != 1)
        if contiguous:
            flat = raw[ref.offset * item : (ref.offset + numel) * item]
            out = flat.view(dtype).reshape(shape)
        else:
            span = ref.offset + sum((d - 1) * s for d, s in zip(shape, ref.stride)) + 1
            base = raw[: span * item].view(dtype)[ref.offset :]
            view = np.lib.stride_tricks.as_strided(
                base, shape=shape, strides=tuple(s * item for s in ref.stride), writeable=False
            )
            out = np.ascontiguousarray(view)
        if self._swap and item > 1:
            out = _byteswap(out)
        return out

    def shape(self, name: str) -> tuple[int, ...]:
        return self._entries[name].shape

    def dtype(self, name: str) -> np.dtype:
        return self._entries[name].dtype

    def nbytes(self, name: str) -> int:
        ref = self._entries[name]
        return ref.dtype.itemsize * int(np.prod(ref.shape, dtype=np.int64))

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries


def _byteswap(arr: np.ndarray) -> np.ndarray:
    """Copy of ``arr`` with each (component of each) element byte-swapped, for big-endian checkpoints."""
    unit = arr.dtype.itemsize // 2 if arr.dtype.kind == "c" else arr.dtype.itemsize
    ints = np.ascontiguousarray(arr).view(np.dtype(f"u{unit}"))
    return ints.byteswap().view(arr.dtype)


def load_pth(path: str | os.PathLike, unwrap: bool = True) -> dict[str, np.ndarray]:
    """All tensors of a ``torch.save`` checkpoint as ``{dotted key: numpy array}`` (see the module docstring)."""
    f = PthFile(path, unwrap=unwrap)
    return {k: f[k] for k in f}
