"""Memory-mapped safetensors reading into numpy (bf16/fp8 through ml_dtypes), with one-line errors.

The format is an 8-byte little-endian header length, a JSON header (name -> dtype, shape, data_offsets) and the
raw bytes. Reading it directly keeps every dtype (numpy's own safetensors backend has no bfloat16) and lets a
truncated or garbage file be reported as such instead of as a parser traceback.
"""

from __future__ import annotations

import json
import mmap
import os
from typing import BinaryIO, Callable, Iterator, Mapping

import ml_dtypes
import numpy as np

from vidax_core.errors import UserError

_DTYPES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "BF16": ml_dtypes.bfloat16,
    "F8_E4M3": ml_dtypes.float8_e4m3fn,
    "F8_E5M2": ml_dtypes.float8_e5m2,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
    "BOOL": np.bool_,
}
_MAX_HEADER = 100 * 1024 * 1024


class SafetensorsFile(Mapping[str, np.ndarray]):
    """Read-only mapping name -> memory-mapped numpy array of one .safetensors file."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            size = os.path.getsize(path)
            with open(path, "rb") as f:
                head = f.read(8)
                if len(head) < 8:
                    raise UserError(f"{path} is not a safetensors file (only {len(head)} bytes): re-download it")
                n = int.from_bytes(head, "little")
                if n <= 0 or n > _MAX_HEADER or 8 + n > size:
                    raise UserError(f"{path} has a corrupt or truncated safetensors header: re-download it")
                header = json.loads(f.read(n).decode("utf-8"))
        except UserError:
            raise
        except OSError as exc:
            raise UserError(f"cannot read checkpoint file {path}: {exc.strerror or exc}") from exc
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError, ValueError) as exc:
            raise UserError(f"{path} has a corrupt safetensors header (not JSON): re-download it") from exc
        if not isinstance(header, dict):
            raise UserError(f"{path} has a corrupt safetensors header: re-download it")
        metadata = header.pop("__metadata__", None) or {}
        self.metadata = metadata if isinstance(metadata, dict) else {}
        self._base = 8 + n
        self._entries: dict[str, tuple[np.dtype, tuple[int, ...], int, int]] = {}
        for name, info in header.items():
            self._entries[name] = _entry(path, name, info)
        _check_layout(path, self._entries, size - self._base)
        self._file: BinaryIO | None = None

    def __getitem__(self, name: str) -> np.ndarray:
        """The tensor as a read-only array over a memory map of its own bytes: the map (and the pages it holds in
        this process) goes when the array does, so a tensor copied to where it lives costs no host memory through
        its file. (One map of the whole file would keep every page read: under gVisor, as on the lent TPU host,
        touching a file map made the whole file resident, 6.1 GiB for a 2 GiB tensor of a 4 GiB file.)"""
        dtype, shape, start, end = self._entries[name]
        if end == start:
            return np.zeros(shape, dtype)
        begin = self._base + start
        lead = begin % mmap.ALLOCATIONGRANULARITY
        try:
            if self._file is None:  # opened once: a kept source reads its tensors again without reopening it
                self._file = open(self.path, "rb")
            mm = mmap.mmap(self._file.fileno(), end - start + lead, offset=begin - lead, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as exc:
            raise UserError(f"cannot read tensor {name[:80]!r} of {self.path}: {exc}: re-download it") from exc
        return np.frombuffer(mm, np.uint8, end - start, lead).view(dtype).reshape(shape)

    def nbytes(self, name: str) -> int:
        _, _, start, end = self._entries[name]
        return end - start

    def shape(self, name: str) -> tuple[int, ...]:
        return self._entries[name][1]

    def dtype(self, name: str) -> np.dtype:
        return self._entries[name][0]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


def _entry(path: str, name: str, info: object) -> tuple[np.dtype, tuple[int, ...], int, int]:
    """One header entry, checked: a known dtype, at most 16 non-negative integer dims, integer offsets whose
    span is exactly the tensor's size in bytes (computed with Python integers: no overflow)."""
    bad = UserError(f"{path}: tensor {name[:80]!r} has an unsupported or corrupt header entry: re-download it")
    if not isinstance(info, dict) or not isinstance(info.get("dtype"), str) or info["dtype"] not in _DTYPES:
        raise bad
    shape, offsets = info.get("shape"), info.get("data_offsets")
    if not isinstance(shape, list) or len(shape) > 16 or not all(type(d) is int and d >= 0 for d in shape):
        raise bad
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(type(o) is int and o >= 0 for o in offsets):
        raise bad
    dtype = np.dtype(_DTYPES[info["dtype"]])
    start, end = offsets
    numel = extent = 1
    for d in shape:
        numel *= d
        extent *= max(d, 1)
    if extent * dtype.itemsize >= 2**48:  # numpy refuses such shapes even when one dimension is 0
        raise bad
    if end - start != dtype.itemsize * numel:
        raise UserError(f"{path} is truncated or corrupt at tensor {name[:80]!r}: re-download it")
    return dtype, tuple(shape), start, end


def _check_layout(path: str, entries: Mapping[str, tuple], data_size: int) -> None:
    """The tensors' byte ranges must tile the data section exactly: in order, no gap, no overlap, no overrun
    (the safetensors format's own rule)."""
    pos = 0
    for name, (_, _, start, end) in sorted(entries.items(), key=lambda kv: (kv[1][2], kv[1][3])):
        if start != pos:
            raise UserError(f"{path} is corrupt at tensor {name[:80]!r} "
                            "(its bytes overlap or leave a gap): re-download it")
        pos = end
    if pos > data_size:
        raise UserError(f"{path} is truncated: its tensors need {pos} bytes of data, "
                        f"the file holds {data_size}: re-download it")
    if pos < data_size:
        raise UserError(f"{path} is corrupt: {data_size - pos} bytes after the last tensor "
                        "belong to none: re-download it")


def save_file(tensors: Mapping[str, np.ndarray], path: str, metadata: Mapping[str, str] | None = None) -> None:
    """Write numpy arrays as a safetensors file (used by built-in tiny checkpoints and tests); ``metadata`` is
    the header's ``__metadata__`` (string -> string)."""
    arrays = {name: np.ascontiguousarray(tensors[name]) for name in tensors}
    write_file(path, {k: (a.shape, a.dtype) for k, a in arrays.items()},
               lambda name, f: f.write(arrays[name].tobytes()), metadata)


def write_file(path: str, entries: Mapping[str, tuple], fill: Callable[[str, BinaryIO], None] | None,
               metadata: Mapping[str, str] | None = None) -> int:
    """A safetensors file of ``entries`` (name -> (shape, numpy dtype)), the tensors in name order:
    ``fill(name, file)`` writes each tensor's bytes in turn (None leaves the data as a hole of a sparse file).
    Returns the data bytes."""
    inverse = {np.dtype(v): k for k, v in _DTYPES.items()}
    header: dict[str, object] = {"__metadata__": dict(metadata)} if metadata else {}
    offset = 0
    order = sorted(entries)
    for name in order:
        shape, dtype = entries[name]
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        header[name] = {"dtype": inverse[np.dtype(dtype)], "shape": [int(d) for d in shape],
                        "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * ((8 - len(blob) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(blob).to_bytes(8, "little"))
        f.write(blob)
        if fill is None:
            f.truncate(8 + len(blob) + offset)
        else:
            for name in order:
                fill(name, f)
    return offset
