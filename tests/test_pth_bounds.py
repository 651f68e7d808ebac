"""The pickle-free .pth reader bounds what a corrupt pickle makes it allocate by the file's own size (a corrupt
pickle in an original .pt asked the host for 57 GB before failing)."""

from __future__ import annotations

import struct
import tracemalloc
import zipfile

import pytest

from vidax_core.errors import UserError
from vidax_core.io.pth import PthFile

GIB = 1 << 30


def _archive(path, pickle_bytes: bytes):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", pickle_bytes)
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/version", "3\n")


CORRUPT = {
    # BINBYTES8 / BYTEARRAY8 / BINUNICODE8 claiming 57 GB, followed by a few bytes
    "binbytes8": b"\x80\x04\x8e" + struct.pack("<Q", 57 * 10**9) + b"abc.",
    "bytearray8": b"\x80\x05\x96" + struct.pack("<Q", 57 * 10**9) + b"abc.",
    "binunicode8": b"\x80\x04\x8d" + struct.pack("<Q", 57 * 10**9) + b"abc.",
    # LONG_BINPUT of a memo index of 2**31: the memo table grows to it
    "long-binput": b"\x80\x02}r" + struct.pack("<I", 2**31 - 1) + b".",
    # LONG4 claiming 2 GB of digits
    "long4": b"\x80\x02\x8b" + struct.pack("<i", 2**31 - 1) + b"\x01.",
    # a claim the host could honour (3 GiB): allocated, then found short, before the fix
    "binbytes8-3gib": b"\x80\x04\x8e" + struct.pack("<Q", 3 * GIB) + b"abc.",
    "long-binput-2**28": b"\x80\x02}r" + struct.pack("<I", 2**28) + b".",
}


@pytest.mark.parametrize("name", sorted(CORRUPT))
def test_corrupt_pickle_lengths_allocate_nothing_large(tmp_path, name):
    path = tmp_path / "m.pt"
    _archive(path, CORRUPT[name])
    tracemalloc.start()
    try:
        with pytest.raises(UserError, match="corrupt") as err:
            PthFile(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "MemoryError" not in str(err.value), err.value  # refused from the length, not by a failed allocation
    assert peak < 64 << 20, f"{name}: peak {peak / GIB:.2f} GiB"
