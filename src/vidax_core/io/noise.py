"""``sampling.initial_noise``: a .npy (one latent stream) or a .npz (one array per stream), read defensively.

numpy trusts a file's header: a zero item size makes ``np.load(mmap_mode="r")`` divide by zero (SIGFPE), a cut
header raises tokenizer errors, and a .npz is decompressed whole before its names are seen. So the header is
parsed here first (magic, version, a literal dict, dtype kind and item size, shape, byte count against the file
size), and only then is the data read, exactly the bytes the model needs (never memory-mapped: a file cut while
it is read is a short read, not SIGBUS). Every value must be finite and of sane magnitude
(:data:`MAX_MAGNITUDE`): the pre-run check reads the file a block at a time to say so before anything loads.
"""

from __future__ import annotations

import ast
import math
import os
import re
import zipfile
import zlib
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np

from vidax_core.errors import UserError

MAGIC = b"\x93NUMPY"
MAX_HEADER = 10000  # numpy's own default limit (np.lib.format's max_header_size)
MAX_MEMBERS = 4096  # a chunked run's every draw (windows x diffusion-forcing rows) fits
HOW = "save a float32 array with numpy.save"
MAX_MAGNITUDE = 1e4  # of an initial-noise entry: standard normal draws stay within a few units
SCAN_BYTES = 1 << 24  # read at a time when the values are checked before a run


@dataclass(frozen=True)
class NpyHeader:
    dtype: np.dtype
    shape: tuple[int, ...]
    fortran: bool
    offset: int  # where the data starts

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


def read_header(f: BinaryIO, size: int, where: str) -> NpyHeader:
    """The checked header of the .npy stream ``f`` holding ``size`` bytes in all; raise :class:`UserError` if it
    is not one numpy.save writes for a real-valued array whose data fills the rest of the stream exactly."""
    bad = lambda why: UserError(f"{where} cannot be read as .npy ({why}): {HOW}")  # noqa: E731
    head = f.read(10)
    if len(head) < 10 or head[:6] != MAGIC:
        raise bad("no .npy magic at its start")
    major = head[6]
    if major == 1:
        n, start = int.from_bytes(head[8:10], "little"), 10
    elif major in (2, 3):
        more = f.read(2)
        if len(more) < 2:
            raise bad("truncated header")
        n, start = int.from_bytes(head[8:10] + more, "little"), 12
    else:
        raise bad(f"format version {major}")
    if n > MAX_HEADER:
        raise bad(f"a {n}-byte header, numpy writes at most {MAX_HEADER}")
    raw = f.read(n)
    if len(raw) < n:
        raise bad("truncated header")
    try:
        text = raw.decode("utf-8" if major == 3 else "latin1")
        d = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, UnicodeDecodeError, MemoryError, RecursionError, TypeError):
        raise bad("its header is not a Python literal") from None
    if not isinstance(d, dict) or set(d) != {"descr", "fortran_order", "shape"}:
        raise bad("its header lacks descr, fortran_order and shape")
    descr, fortran, shape = d["descr"], d["fortran_order"], d["shape"]
    if not isinstance(descr, str):
        raise bad(f"dtype {descr!r} is not a plain number type")
    try:
        dtype = np.dtype(descr)
    except (TypeError, ValueError):
        raise bad(f"unknown dtype {descr!r}") from None
    if dtype.kind not in "fiu" or dtype.itemsize <= 0 or dtype.itemsize > 16:
        raise UserError(f"{where} holds dtype {descr!r}: it must hold a real-valued numeric array ({HOW})")
    if not isinstance(fortran, bool):
        raise bad("fortran_order is not true/false")
    if (not isinstance(shape, tuple) or len(shape) > 32
            or not all(type(s) is int and 0 <= s < 2**62 for s in shape)):
        raise bad(f"shape {shape!r} is not a tuple of non-negative integers")
    header = NpyHeader(dtype, tuple(shape), fortran, start + n)
    data = size - header.offset
    if header.nbytes > data:
        raise bad(f"truncated: its header promises {header.nbytes} data bytes, the file holds {max(data, 0)}")
    if header.nbytes < data:
        raise bad(f"{data - header.nbytes} bytes follow the data its header describes")
    return header


def check_shape(header: NpyHeader, shape: tuple[int, ...], where: str) -> None:
    if header.shape != tuple(shape):
        raise UserError(f"{where} has shape {header.shape}, this run needs {tuple(shape)} (the layout the "
                        "family's diffusers pipeline takes as latents=)")


def finite32(noise: np.ndarray, where: str) -> np.ndarray:
    out = np.asarray(noise, dtype=np.float32)
    _check_values(out, where)
    return out


def _check_values(values: np.ndarray, where: str) -> None:
    """Finite, and not of absurd magnitude: a draw times 1e38 is finite and still turns a run's latents to NaN."""
    if values.dtype.kind == "f" and not np.isfinite(values).all():
        raise UserError(f"{where} holds NaN or infinite values: every entry must be finite")
    if values.size and float(np.max(np.abs(values))) > MAX_MAGNITUDE:
        raise UserError(f"{where} holds values up to {float(np.max(np.abs(values))):.3g}: initial noise is a standard "
                        f"normal draw (values of a few units), and entries beyond {MAX_MAGNITUDE:g} in magnitude "
                        "are refused; save the draw itself")


def scan_values(f: BinaryIO, header: NpyHeader, where: str) -> None:
    """The data after ``header`` read from ``f`` a block at a time and checked (:func:`_check_values`) without
    holding it whole; a stream shorter than its header promises is refused."""
    left, block = header.nbytes, max(header.dtype.itemsize, SCAN_BYTES // header.dtype.itemsize * header.dtype.itemsize)
    while left:
        raw = f.read(min(left, block))
        if not raw or len(raw) % header.dtype.itemsize:
            raise UserError(f"{where} is truncated: its header promises {header.nbytes} data bytes ({HOW})")
        _check_values(np.frombuffer(raw, dtype=header.dtype), where)
        left -= len(raw)


def checked_noise(noise: Any, shape: tuple[int, ...], where: str) -> np.ndarray:
    """``noise`` as float32 if it is a real-valued array of exactly ``shape`` with every entry finite."""
    if not isinstance(noise, np.ndarray) or noise.dtype.kind not in "fiu":
        raise UserError(f"{where} must hold a real-valued numeric array (save a float32 array)")
    if tuple(noise.shape) != tuple(shape):
        raise UserError(f"{where} has shape {tuple(noise.shape)}, this run needs {tuple(shape)} (the layout the "
                        "family's diffusers pipeline takes as latents=)")
    return finite32(noise, where)


def is_zip(path: str) -> bool:
    """A zip archive (a .npz): a first entry's header, or the end record of an archive with no entry."""
    try:
        with open(path, "rb") as f:
            return f.read(4) in (b"PK\x03\x04", b"PK\x05\x06")
    except OSError:
        return False


def _open(path: str, where: str) -> BinaryIO:
    if not os.path.isfile(path):
        raise UserError(f"{where} does not exist or is not a regular file")
    try:
        return open(path, "rb")
    except OSError as exc:
        raise UserError(f"{where} cannot be read ({exc.strerror or exc})") from None


def npy_header(path: str, where: str) -> NpyHeader:
    with _open(path, where) as f:
        return read_header(f, os.fstat(f.fileno()).st_size, where)


def _archive_for_one(where: str, shape: Any) -> UserError:
    return UserError(f"{where} is a .npz archive, but this model's latents are one array of shape {tuple(shape)}: "
                     "save it alone with numpy.save (.npy)")


def load_initial_noise(path: str, shape: tuple[int, ...]) -> np.ndarray:
    """A .npy array of exactly ``shape``, real numbers, all finite; mapped only after its header is checked."""
    where = f"sampling.initial_noise {path}"
    if is_zip(path):
        raise _archive_for_one(where, shape)
    with _open(path, where) as f:
        h = read_header(f, os.fstat(f.fileno()).st_size, where)
        check_shape(h, shape, where)
        raw = f.read(h.nbytes)  # read, not mapped: a file cut while it is read is a short read, not SIGBUS
    if len(raw) != h.nbytes:
        raise UserError(f"{where} is truncated: its header promises {h.nbytes} data bytes, the file holds {len(raw)}")
    noise = np.frombuffer(raw, dtype=h.dtype).reshape(h.shape, order="F" if h.fortran else "C")
    return finite32(noise, where)


# ---- .npz ------------------------------------------------------------------------------------------------------

ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, OSError, EOFError, NotImplementedError,
              RuntimeError, ValueError, KeyError, OverflowError)


def _npz_where(path: str) -> str:
    return f"sampling.initial_noise {path}"


def _members(z: zipfile.ZipFile, path: str) -> dict[str, zipfile.ZipInfo]:
    """Array name -> zip entry, from the central directory alone (nothing is decompressed)."""
    infos = z.infolist()
    if len(infos) > MAX_MEMBERS:
        raise UserError(f"{_npz_where(path)} holds {len(infos)} entries, more than the {MAX_MEMBERS} a noise .npz "
                        "may hold (one array per latent stream, or per draw of a chunked run)")
    out: dict[str, zipfile.ZipInfo] = {}
    for info in infos:
        name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
        if name in out:
            raise UserError(f"{_npz_where(path)} holds {name!r} twice: write it with numpy.savez")
        out[name] = info
    return out


def _read_member(z: zipfile.ZipFile, info: zipfile.ZipInfo, shape: tuple[int, ...], where: str) -> np.ndarray:
    with z.open(info) as f:
        h = read_header(f, info.file_size, where)
        check_shape(h, shape, where)
        raw = f.read(h.nbytes)
    if len(raw) != h.nbytes:
        raise UserError(f"{where} is truncated inside the archive: {HOW} and numpy.savez")
    arr = np.frombuffer(raw, dtype=h.dtype)
    arr = arr.reshape(h.shape, order="F" if h.fortran else "C")
    return finite32(arr, where)


#: Names of a model's later noise draws beside its latent streams: a name and the draw's index, ``decoder_0``...
DRAW_NAME = re.compile(r"[a-z][a-z0-9]*(?:_[a-z][a-z0-9]*)*_\d+")


def load_npz_noise(path: str, shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    """One checked float32 array per latent stream of ``shapes`` from the .npz ``path``: the member names and
    headers are checked first, and only the bytes of the wanted shapes are decompressed. Members named like a
    later draw (:data:`DRAW_NAME`, e.g. ``decoder_0``) are left to the model part that draws them
    (:func:`load_npz_draw`)."""
    where = _npz_where(path)
    need = ", ".join(sorted(shapes))
    how = f"this model's latents are several arrays ({need}): give a .npz holding each (numpy.savez)"
    with _open(path, where) as f:
        try:
            z = zipfile.ZipFile(f)
        except ZIP_ERRORS:
            raise UserError(f"{where} is not a readable .npz archive: {how}") from None
        with z:
            found = {k: v for k, v in _members(z, path).items() if k in shapes or not DRAW_NAME.fullmatch(k)}
            if sorted(found) != sorted(shapes):
                raise UserError(f"{where} holds {', '.join(sorted(found)) or 'no array'}, this model needs {need}")
            try:
                return {k: _read_member(z, found[k], tuple(s), f"{where}: {k}") for k, s in shapes.items()}
            except UserError:
                raise
            except ZIP_ERRORS as exc:
                raise UserError(f"{where} is a damaged .npz archive ({type(exc).__name__}): {how}") from None


def check_noise_shapes(path: str, shapes: Any) -> None:
    """The noise file against what the run takes as ``latents=`` (one shape, or {stream: shape}): the stream
    names and each header's shape, then the values of the arrays the run takes (finite, of sane magnitude, read a
    block at a time), before any weight loads."""
    where = _npz_where(path)
    if not isinstance(shapes, dict):
        if is_zip(path):
            raise _archive_for_one(where, shapes)
        with _open(path, where) as f:
            h = read_header(f, os.fstat(f.fileno()).st_size, where)
            check_shape(h, tuple(shapes), where)
            scan_values(f, h, where)
        return
    need = ", ".join(sorted(shapes))
    if not is_zip(path):
        raise UserError(f"{where} is one .npy array, but this model's latents are several arrays ({need}): give a "
                        ".npz holding each (numpy.savez)")
    with _open(path, where) as f:
        try:
            with zipfile.ZipFile(f) as z:
                found = {k: v for k, v in _members(z, path).items() if k in shapes or not DRAW_NAME.fullmatch(k)}
                if sorted(found) != sorted(shapes):
                    raise UserError(f"{where} holds {', '.join(sorted(found)) or 'no array'}, this model needs {need}")
                for k, s in shapes.items():
                    with z.open(found[k]) as m:
                        h = read_header(m, found[k].file_size, f"{where}: {k}")
                        check_shape(h, tuple(s), f"{where}: {k}")
                        scan_values(m, h, f"{where}: {k}")
        except UserError:
            raise
        except ZIP_ERRORS as exc:
            raise UserError(f"{where} is not a readable .npz archive ({type(exc).__name__}): write it with "
                            "numpy.savez") from None


def npz_shapes(path: str) -> dict[str, tuple[int, ...]]:
    """Array name -> shape of the .npz ``path`` (empty for a .npy), from the member headers (nothing is inflated
    beyond them)."""
    if not is_zip(path):
        return {}
    where = _npz_where(path)
    with _open(path, where) as f:
        try:
            with zipfile.ZipFile(f) as z:
                out = {}
                for name, info in _members(z, path).items():
                    with z.open(info) as m:
                        out[name] = read_header(m, info.file_size, f"{where}: {name}").shape
                return out
        except UserError:
            raise
        except ZIP_ERRORS as exc:
            raise UserError(f"{where} is not a readable .npz archive ({type(exc).__name__}): write it with "
                            "numpy.savez") from None


def load_npz_draw(path: str, name: str, shape: tuple[int, ...]) -> np.ndarray | None:
    """The later draw ``name`` (see :data:`DRAW_NAME`) of the .npz ``path`` as checked float32 of exactly
    ``shape``, or None when the archive has no such member (or ``path`` is a .npy)."""
    where = _npz_where(path)
    if not is_zip(path):
        return None
    with _open(path, where) as f:
        try:
            with zipfile.ZipFile(f) as z:
                info = _members(z, path).get(name)
                return None if info is None else _read_member(z, info, tuple(shape), f"{where}: {name}")
        except UserError:
            raise
        except ZIP_ERRORS as exc:
            raise UserError(f"{where} is a damaged .npz archive ({type(exc).__name__}): write it with "
                            "numpy.savez") from None


def check_noise_file(path: str) -> None:
    """The pre-run check of ``sampling.initial_noise``: a .npy with a usable header, or a .npz whose members all
    have one (the shapes, then the values, are checked once the model's latent grid is known: nothing is inflated
    before a member's shape is the run's)."""
    where = _npz_where(path)
    if not is_zip(path):
        npy_header(path, where)
        return
    with _open(path, where) as f:
        try:
            with zipfile.ZipFile(f) as z:
                for name, info in _members(z, path).items():
                    with z.open(info) as m:
                        read_header(m, info.file_size, f"{where}: {name}")
        except UserError:
            raise
        except ZIP_ERRORS as exc:
            raise UserError(f"{where} is not a readable .npz archive ({type(exc).__name__}): write it with "
                            "numpy.savez") from None
