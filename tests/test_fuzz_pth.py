"""Property-based fuzzing of the ``.pth`` reader (:mod:`vidax_core.io.pth`).

Inputs are torch.save-style zip archives whose ``data.pkl`` is assembled opcode by opcode from random object
graphs: tensors with random sizes, strides, offsets and dtypes, nested and shared containers (a list holding
the previous list twice is exponential as a tree), globals outside the allowlist (``os.system`` with a canary
file: it must never run), then random damage to the zip layer (compression method, flags, bit flips,
truncation). The contract for every input: :class:`PthFile` plus reading every tensor either succeeds or raises
one :class:`UserError` line, within a bounded time and memory; nothing else, ever.

CI runs a few dozen inputs; ``make fuzz`` sets ``VIDAX_FUZZ_EXAMPLES`` for the long campaign.
"""

from __future__ import annotations

import os
import struct
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from test_fuzz_contract import Outcomes, check_contract, fuzz_settings
from vidax_core.io.pth import PthFile

# ---------------------------------------------------------------- a tiny pickle assembler (protocol 2 opcodes)


class G:
    """A global ``module.name``."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name


class Call:
    """``fn(*args)`` through the REDUCE opcode."""

    def __init__(self, fn, *args) -> None:
        self.fn, self.args = fn, args


class Pers:
    """A persistent id (BINPERSID), as torch.save writes for storages."""

    def __init__(self, value) -> None:
        self.value = value


class Put:
    """Memoize ``obj`` in slot ``i`` (BINPUT)."""

    def __init__(self, i: int, obj) -> None:
        self.i, self.obj = i, obj


class Get:
    """The object memoized in slot ``i`` (BINGET)."""

    def __init__(self, i: int) -> None:
        self.i = i


def _long(n: int) -> bytes:
    if n == 0:
        return b"\x8a\x00"
    raw = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
    if len(raw) < 256:
        return b"\x8a" + bytes([len(raw)]) + raw
    return b"\x8b" + struct.pack("<i", len(raw)) + raw


def emit(obj) -> bytes:
    if obj is None:
        return b"N"
    if obj is True:
        return b"\x88"
    if obj is False:
        return b"\x89"
    if isinstance(obj, int):
        return _long(obj)
    if isinstance(obj, float):
        return b"G" + struct.pack(">d", obj)
    if isinstance(obj, str):
        raw = obj.encode("utf-8", "surrogatepass")
        return b"X" + struct.pack("<I", len(raw)) + raw
    if isinstance(obj, tuple):
        return b"(" + b"".join(emit(v) for v in obj) + b"t"
    if isinstance(obj, list):
        return b"](" + b"".join(emit(v) for v in obj) + b"e"
    if isinstance(obj, dict):
        return b"}(" + b"".join(emit(k) + emit(v) for k, v in obj.items()) + b"u"
    if isinstance(obj, G):
        return b"c" + obj.module.encode() + b"\n" + obj.name.encode() + b"\n"
    if isinstance(obj, Call):
        return emit(obj.fn) + emit(tuple(obj.args)) + b"R"
    if isinstance(obj, Pers):
        return emit(obj.value) + b"Q"
    if isinstance(obj, Put):
        return emit(obj.obj) + b"r" + struct.pack("<I", obj.i)
    if isinstance(obj, Get):
        return b"j" + struct.pack("<I", obj.i)
    raise TypeError(obj)


def pickle_bytes(obj) -> bytes:
    return b"\x80\x02" + emit(obj) + b"."


def tensor(key: str, numel: int, size, stride, offset: int = 0, storage: str = "FloatStorage"):
    """A ``_rebuild_tensor_v2`` record over storage ``key`` of ``numel`` elements."""
    return Call(G("torch._utils", "_rebuild_tensor_v2"),
                Pers(("storage", G("torch", storage), key, "cpu", numel)), offset, tuple(size), tuple(stride),
                False, Call(G("collections", "OrderedDict")))


def write_pth(path, obj, storages: dict[str, bytes], compression=zipfile.ZIP_STORED, folder: str = "archive") -> str:
    """A torch.save-layout zip: ``<folder>/data.pkl``, ``<folder>/data/<key>``, byteorder, version."""
    with zipfile.ZipFile(path, "w", compression=compression) as zf:
        zf.writestr(f"{folder}/data.pkl", pickle_bytes(obj))
        zf.writestr(f"{folder}/byteorder", "little")
        for key, raw in storages.items():
            zf.writestr(f"{folder}/data/{key}", raw)
        zf.writestr(f"{folder}/version", "3\n")
    return str(path)


def dag_pickle(depth: int):
    """``l0 = [t]; l(i+1) = [l(i), l(i)]``: 2**depth paths to one tensor, a ~200-byte pickle."""
    obj = Put(0, [tensor("0", 1, (1,), (1,))])
    for i in range(1, depth + 1):
        obj = Put(i, [obj, Get(i - 1)])
    return obj


def _damage_zip(raw: bytes, kind: str, where: int, value: int) -> bytes:
    buf = bytearray(raw)
    if kind == "truncate":
        return bytes(buf[: where % max(len(buf), 1)])
    if kind == "bitflip":
        buf[where % len(buf)] ^= 1 << (value % 8)
        return bytes(buf)
    # rewrite a field of every local and central header: compression method, flags, version needed
    offs = {"method": (8, 10), "flags": (6, 8), "version": (4, 6)}[kind]
    for sig, delta in ((b"PK\x03\x04", 0), (b"PK\x01\x02", 2)):
        start = 0
        while (i := buf.find(sig, start)) >= 0:
            a, b = offs[0] + delta, offs[1] + delta
            buf[i + a : i + b] = struct.pack("<H", value & 0xFFFF)
            start = i + 4
    return bytes(buf)


# ---------------------------------------------------------------- strategies

_DTYPE_STORAGES = ["FloatStorage", "HalfStorage", "BFloat16Storage", "LongStorage", "ByteStorage", "BoolStorage",
                   "DoubleStorage", "NoSuchStorage"]
_dims = st.one_of(st.integers(0, 6), st.sampled_from([2**20, 2**32, 2**47, 2**61, 2**62, 2**63, 2**70, -1]))


@st.composite
def good_tensors(draw, key: str):
    """A tensor that fits its 256-byte float storage: contiguous, transposed or broadcast."""
    size = draw(st.lists(st.integers(1, 4), max_size=3))
    numel = int(np.prod(size)) if size else 1
    offset = draw(st.integers(0, 64 - numel))
    stride = [int(np.prod(size[i + 1 :])) for i in range(len(size))]
    if size and draw(st.booleans()):
        stride[draw(st.integers(0, len(size) - 1))] = 0
    return tensor(key, 64, size, stride, offset, "FloatStorage")


@st.composite
def tensors(draw, key: str):
    if draw(st.booleans()):
        return draw(good_tensors(key))
    ndim = draw(st.one_of(st.integers(0, 4), st.sampled_from([16, 17, 70])))
    size = draw(st.lists(_dims, min_size=ndim, max_size=ndim))
    stride = draw(st.one_of(st.lists(st.one_of(st.integers(0, 8), _dims), min_size=ndim, max_size=ndim),
                            st.lists(st.integers(0, 3), max_size=4)))
    numel = draw(st.one_of(st.integers(0, 64), st.sampled_from([2**40, -3])))
    offset = draw(st.one_of(st.integers(0, 8), st.sampled_from([2**62, -1])))
    storage = draw(st.sampled_from(_DTYPE_STORAGES))
    return tensor(key, numel, size, stride, offset, storage)


MALICIOUS = [G("os", "system"), G("builtins", "exec"), G("builtins", "eval"), G("subprocess", "call"),
             G("posix", "system"), G("torch", "load"), G("numpy", "load"), G("torch._utils", "nope")]


@st.composite
def objects(draw, depth: int = 0):
    leaves = [st.integers(-5, 5), st.text(max_size=4), st.none(), st.floats(allow_nan=True),
              tensors(key=draw(st.sampled_from(["0", "0", "1", "2"]))), good_tensors(key="0")]
    if depth >= 3:
        return draw(st.one_of(*leaves))
    kind = draw(st.sampled_from(["leaf", "dict", "list", "tuple", "evil", "wrap"]))
    if kind == "leaf":
        return draw(st.one_of(*leaves))
    children = draw(st.lists(objects(depth + 1), max_size=3))
    if kind == "dict":
        keys = draw(st.lists(st.one_of(st.text(max_size=3), st.integers(-2, 2)), min_size=len(children),
                             max_size=len(children)))
        return dict(zip(keys, children))
    if kind == "list":
        return children
    if kind == "tuple":
        return tuple(children)
    if kind == "evil":
        return Call(draw(st.sampled_from(MALICIOUS)), f"touch {CANARY}")
    return {"state_dict": dict(enumerate(children))}


CANARY = "/tmp/vidax-fuzz-pth-canary"
OUTCOMES = Outcomes("pth")


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    OUTCOMES.report()
    OUTCOMES.assert_clean()


def _read_all(path: str) -> None:
    f = PthFile(path)
    for k in f:
        np.asarray(f[k]).sum()


@settings(**fuzz_settings(default=40))
@given(obj=objects(), storage_bytes=st.lists(st.integers(0, 300), min_size=3, max_size=3),
       compression=st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2]),
       damage=st.one_of(st.none(), st.none(), st.none(),
                        st.tuples(st.sampled_from(["truncate", "bitflip", "method", "flags", "version"]),
                                  st.integers(0, 10**6), st.integers(0, 0xFFFF))))
def test_pth_reader_contract(tmp_path_factory, obj, storage_bytes, compression, damage):
    folder = tmp_path_factory.mktemp("pth")
    path = folder / "ckpt.pth"
    storages = {str(i): os.urandom(256 if i == 0 else n) for i, n in enumerate(storage_bytes)}
    write_pth(path, obj, storages, compression=compression)
    if damage is not None:
        path.write_bytes(_damage_zip(path.read_bytes(), *damage))
    if os.path.exists(CANARY):
        os.unlink(CANARY)
    check_contract(OUTCOMES, lambda: _read_all(str(path)))
    assert not os.path.exists(CANARY), "a pickled global executed"


def test_valid_pickle_matches_torch(tmp_path):
    """The assembler writes what torch.load reads: the fuzz inputs are real .pth files, not noise."""
    torch = pytest.importorskip("torch")
    raw = np.arange(12, dtype=np.float32).tobytes()
    path = write_pth(tmp_path / "ok.pth", {"a": tensor("0", 12, (3, 4), (4, 1)), "b": tensor("0", 12, (4, 3), (1, 4))},
                     {"0": raw})
    ref = torch.load(path, weights_only=True)
    got = PthFile(path)
    for k in ("a", "b"):
        np.testing.assert_array_equal(got[k], ref[k].numpy())


def _zip_field(kind: str, value: int):
    return lambda raw: _damage_zip(raw, kind, 0, value)


def _deflate_garbage(raw: bytes) -> bytes:
    """Overwrite the middle of every deflated member's payload (a corrupt deflate stream)."""
    buf = bytearray(raw)
    start = 0
    while (i := buf.find(b"PK\x03\x04", start)) >= 0:
        n_name, n_extra = struct.unpack("<HH", buf[i + 26 : i + 30])
        size = struct.unpack("<I", buf[i + 18 : i + 22])[0]
        body = i + 30 + n_name + n_extra
        for j in range(body + 1, body + max(size - 1, 1)):
            buf[j] = 0xFF
        start = i + 4
    return bytes(buf)


# The .pth reproducers of the run fuzz campaign: (id, object, storages, compression, damage, expected fragment)
PTH_CASES = [
    ("compression-unsupported", {"w": tensor("0", 4, (4,), (1,))}, {"0": b"\0" * 16}, zipfile.ZIP_STORED,
     _zip_field("method", 99), "not a valid torch.save zip"),
    ("version-bitflip", {"w": tensor("0", 4, (4,), (1,))}, {"0": b"\0" * 16}, zipfile.ZIP_STORED,
     _zip_field("version", 0xFFFF), "not a valid torch.save zip"),
    ("encrypted-flag", {"w": tensor("0", 4, (4,), (1,))}, {"0": b"\0" * 16}, zipfile.ZIP_STORED,
     _zip_field("flags", 1), "not a valid torch.save zip"),
    ("corrupt-deflate", {"w": tensor("0", 64, (64,), (1,))}, {"0": b"\1" * 256}, zipfile.ZIP_DEFLATED, _deflate_garbage,
     "re-download"),
    ("stride0-4TiB", {"w": tensor("0", 1, (2**20, 2**20), (0, 0))}, {"0": b"\0" * 4}, zipfile.ZIP_STORED, None,
     "needs more bytes than its storage"),
    ("stride0-1.6GB", {"w": tensor("0", 1, (20000, 20000), (0, 0))}, {"0": b"\0" * 4}, zipfile.ZIP_STORED, None,
     "needs more bytes than its storage"),
    ("size-2**32-squared", {"w": tensor("0", 1, (2**32, 2**32), (1, 1))}, {"0": b"\0" * 4}, zipfile.ZIP_STORED, None,
     "impossible tensor size"),
    ("size-0-by-2**62", {"w": tensor("0", 1, (0, 2**62), (1, 1))}, {"0": b"\0" * 4}, zipfile.ZIP_STORED, None,
     "bad tensor size"),
    ("size-0-by-2**61", {"w": tensor("0", 1, (0, 2**61), (1, 1))}, {"0": b"\0" * 4}, zipfile.ZIP_STORED, None,
     "impossible tensor size"),
    ("size-2**63", {"w": tensor("0", 1, (2**63,), (1,))}, {"0": b"\0" * 4}, zipfile.ZIP_STORED, None,
     "bad tensor size"),
    ("70-dims", {"w": tensor("0", 1, (1,) * 70, (1,) * 70)}, {"0": b"\0" * 4}, zipfile.ZIP_STORED, None,
     "bad tensor size"),
    ("dag-depth-26", dag_pickle(26), {"0": b"\0" * 4}, zipfile.ZIP_STORED, None, "entries (repeated references?)"),
    ("os-system", {"w": Call(G("os", "system"), f"touch {CANARY}")}, {}, zipfile.ZIP_STORED, None,
     "will not load (os.system)"),
]


@pytest.mark.parametrize("case", PTH_CASES, ids=[c[0] for c in PTH_CASES])
def test_pth_reproducer_is_one_line(case, tmp_path):
    name, obj, storages, compression, damage, fragment = case
    path = write_pth(tmp_path / "x.pth", obj, storages, compression=compression)
    if damage is not None:
        path_bytes = damage(open(path, "rb").read())
        open(path, "wb").write(path_bytes)
    if os.path.exists(CANARY):
        os.unlink(CANARY)
    check_contract(OUTCOMES, lambda: _read_all(path), expect_error=fragment)
    assert not os.path.exists(CANARY)
