"""Memory-mapped safetensors reading into numpy (bf16/fp8 through ml_dtypes), with one-line errors.

The format is an 8-byte little-endian header length, a JSON header (name -> dtype, shape, data_offsets) and the
raw bytes. Reading it directly keeps every dtype (numpy's own safetensors backend has no bfloat16) and lets a
truncated or garbage file be reported as such instead of as a parser traceback.
"""

from __future__ import annotations

import json
import os
from typing import Iterator, Mapping

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
        except OSError as exc:
            raise UserError(f"cannot read checkpoint file {path}: {exc.strerror or exc}") from exc
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UserError(f"{path} has a corrupt safetensors header (not JSON): re-download it") from exc
        if not isinstance(header, dict):
            raise UserError(f"{path} has a corrupt safetensors header: re-download it")
        self.metadata = header.pop("__metadata__", None) or {}
        self._base = 8 + n
        self._entries: dict[str, tuple[np.dtype, tuple[int, ...], int, int]] = {}
        for name, info in header.items():
            try:
                dtype = np.dtype(_DTYPES[info["dtype"]])
                shape = tuple(int(d) for d in info["shape"])
                start, end = (int(o) for o in info["data_offsets"])
            except (KeyError, TypeError, ValueError) as exc:
                raise UserError(f"{path}: tensor {name!r} has an unsupported or corrupt header entry") from exc
            if end - start != dtype.itemsize * int(np.prod(shape, dtype=np.int64)) or self._base + end > size:
                raise UserError(f"{path} is truncated or corrupt at tensor {name!r}: re-download it")
            self._entries[name] = (dtype, shape, start, end)
        self._mm: np.memmap | None = None

    def _map(self) -> np.memmap:
        if self._mm is None:
            self._mm = np.memmap(self.path, dtype=np.uint8, mode="r")
        return self._mm

    def __getitem__(self, name: str) -> np.ndarray:
        dtype, shape, start, end = self._entries[name]
        raw = self._map()[self._base + start : self._base + end]
        return raw.view(dtype).reshape(shape)

    def nbytes(self, name: str) -> int:
        _, _, start, end = self._entries[name]
        return end - start

    def shape(self, name: str) -> tuple[int, ...]:
        return self._entries[name][1]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


def save_file(tensors: Mapping[str, np.ndarray], path: str) -> None:
    """Write numpy arrays as a safetensors file (used by built-in tiny checkpoints)."""
    inverse = {np.dtype(v): k for k, v in _DTYPES.items()}
    header: dict[str, object] = {}
    offset = 0
    arrays = []
    for name in sorted(tensors):
        arr = np.ascontiguousarray(tensors[name])
        nbytes = arr.nbytes
        header[name] = {"dtype": inverse[arr.dtype], "shape": list(arr.shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
        arrays.append(arr)
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * ((8 - len(blob) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(blob).to_bytes(8, "little"))
        f.write(blob)
        for arr in arrays:
            f.write(arr.tobytes())
