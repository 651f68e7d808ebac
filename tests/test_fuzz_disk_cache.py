"""Property-based fuzzing of the ``offload.storage=disk`` cache (issue 51): the cache folder's path and the states
a cache can be found in (files cut, grown, refilled with NaN or random bytes at any place, replaced by folders,
FIFOs, symlinks, devices; the manifest edited into junk; the group folder replaced), before it is opened and while
a run reads it.

The contract for every input (tests/test_fuzz_contract.py): the cache opens (rebuilt when damaged) and every chunk
read back is the group's own weights, or one :class:`UserError` line; never a hang (a FIFO), a SIGBUS, an internal
error or a wrong weight. ``VIDAX_FUZZ_EXAMPLES`` is the number of inputs per surface.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import jax
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from test_fuzz_contract import Outcomes, check_contract, fuzz_settings, report_all
from vidax_core.parallel import disk_chunks as dc

OUTCOMES = {name: Outcomes(name) for name in ("disk cache folder", "disk cache at open", "disk cache in a run")}
N = 12
BLOCKS = 4


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    report_all(OUTCOMES.values())


def _state():
    rng = np.random.default_rng(0)
    return {"a": rng.standard_normal((BLOCKS, 3, 5)).astype(np.float32),
            "b": rng.standard_normal((BLOCKS, 1000)).astype(ml_dtypes.bfloat16),
            "c": rng.standard_normal((BLOCKS, 8192)).astype(np.float32)}


STATE = _state()
DEV = jax.sharding.SingleDeviceSharding(jax.devices()[0])


_SOURCE = os.path.join(tempfile.mkdtemp(prefix="vidax-fuzz-disk-"), "weights.safetensors")
with open(_SOURCE, "wb") as _f:  # what the cache is keyed by, as a run keys it by the checkpoint's files
    _f.write(b"x" * 64)


def _open(root, chunk_size=2):
    os.environ[dc.CACHE_ENV] = root
    return dc.DiskChunks(STATE, chunk_size, {k: DEV for k in STATE}, name="blocks", files=[_SOURCE])


def _write(path, data) -> None:
    with open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)


def _same(chunks) -> None:
    """Every chunk read back equals the state (a wrong weight is an internal error, not a user error)."""
    for i in range(len(chunks)):
        lo, hi = i * chunks.chunk_size, (i + 1) * chunks.chunk_size
        for (k, want), have in zip(sorted(STATE.items()), chunks.read(i)):
            got, exp = np.asarray(have, np.float32), np.asarray(want[lo:hi], np.float32)
            if not np.array_equal(got, exp, equal_nan=True):
                raise AssertionError(f"leaf {k} chunk {i} read back wrong")


# ---- the cache folder ------------------------------------------------------------------------------------------

@st.composite
def root_state(draw, base):
    kind = draw(st.sampled_from(["missing", "folder", "file", "dev", "dangling", "loop", "under-file", "empty-env",
                                 "blank-env", "relative", "fifo", "symlink-to-folder", "symlink-to-file", "tilde"]))
    path = os.path.join(base, "root")
    if kind == "folder":
        os.mkdir(path)
    elif kind == "file":
        _write(path, "x")
    elif kind == "dev":
        path = draw(st.sampled_from(["/dev/null", "/dev/zero"]))
    elif kind == "dangling":
        os.symlink(os.path.join(base, "nowhere"), path)
    elif kind == "loop":
        os.symlink(path, path)
    elif kind == "under-file":
        _write(path, "x")
        path = os.path.join(path, "sub", "cache")
    elif kind in ("empty-env", "blank-env"):
        path = "" if kind == "empty-env" else draw(st.sampled_from([" ", "\t", "  \n"]))
    elif kind == "relative":
        path = os.path.relpath(os.path.join(base, "rel", "cache"))
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink-to-folder":
        os.mkdir(os.path.join(base, "target"))
        os.symlink(os.path.join(base, "target"), path)
    elif kind == "symlink-to-file":
        _write(os.path.join(base, "target"), "x")
        os.symlink(os.path.join(base, "target"), path)
    elif kind == "tilde":
        path = "~/" + os.path.relpath(path, os.path.expanduser("~")) if path.startswith(os.path.expanduser("~")) \
            else path
    return kind, path


@settings(**fuzz_settings(default=N))
@given(data=st.data())
def test_cache_folders(tmp_path_factory, data):
    base = str(tmp_path_factory.mktemp("root"))
    kind, path = data.draw(root_state(base))
    saved = os.environ.get(dc.CACHE_ENV)

    def use():
        chunks = _open(path)
        try:
            _same(chunks)
        finally:
            chunks.close()

    try:
        outcome = check_contract(OUTCOMES["disk cache folder"], use, label=f"{kind} {path!r}")
        if kind in ("file", "dev", "dangling", "loop", "under-file", "empty-env", "blank-env", "fifo",
                    "symlink-to-file") and outcome == "ok":
            raise AssertionError(f"an unusable cache folder was used: {kind} {path!r}")
    finally:
        if saved is None:
            os.environ.pop(dc.CACHE_ENV, None)
        else:
            os.environ[dc.CACHE_ENV] = saved


# ---- damaged caches --------------------------------------------------------------------------------------------

DAMAGE = ("truncate", "extend", "nan", "random", "zero-page", "delete", "folder", "fifo", "devnull", "symlink-other",
          "manifest-junk", "manifest-edit", "manifest-delete", "group-file", "group-symlink", "chmod-000")


# a run holding the cache open checks sizes and kinds, and a few sampled pages of every layer it reads: content
# rewritten between those pages while it runs is beyond it (the full checksums are verified when a cache opens)
IN_RUN = tuple(d for d in DAMAGE if d not in ("nan", "random", "zero-page"))


@st.composite
def damage(draw, kinds=DAMAGE):
    """(what, which leaf, where in the file as a fraction, a seed)."""
    return (draw(st.sampled_from(kinds)), draw(st.integers(0, 2)), draw(st.floats(0, 1)), draw(st.integers(0, 99)))


def _apply(chunks, how) -> None:
    what, leaf, at, seed = how
    path = chunks._file(leaf)
    rng = np.random.default_rng(seed)
    size = os.path.getsize(path) if os.path.isfile(path) else 0
    pos = int(at * max(size - 1, 0))
    if what == "truncate":
        os.truncate(path, pos)
    elif what == "extend":
        with open(path, "ab") as f:
            f.write(b"\0" * (1 + seed))
    elif what in ("nan", "random", "zero-page"):
        n = min(size - pos, 4096 if what == "zero-page" else max(1, size // 2))
        data = {"nan": np.full(max(n // 4, 1), np.nan, np.float32).tobytes()[:n],
                "random": rng.integers(0, 256, n, np.uint8).tobytes(), "zero-page": b"\0" * n}[what]
        with open(path, "r+b") as f:
            f.seek(pos)
            f.write(data)
    elif what == "delete":
        os.unlink(path)
    elif what == "folder":
        os.unlink(path)
        os.mkdir(path)
    elif what == "fifo":
        os.unlink(path)
        os.mkfifo(path)
    elif what == "devnull":
        os.unlink(path)
        os.symlink("/dev/null", path)
    elif what == "symlink-other":
        other = chunks._file((leaf + 1) % 3)
        os.unlink(path)
        os.symlink(other, path)
    elif what.startswith("manifest"):
        m = os.path.join(chunks.dir, dc.MANIFEST)
        if what == "manifest-delete":
            os.unlink(m)
        elif what == "manifest-junk":
            _write(m, rng.integers(0, 256, 40, np.uint8).tobytes())
        else:
            with open(m) as f:
                doc = json.load(f)
            doc["sums" if seed % 3 else "prints"][leaf][seed % BLOCKS] = "0" * 16 if seed % 2 else 5
            _write(m, json.dumps(doc))
    elif what == "group-file":
        shutil.rmtree(chunks.dir)
        _write(chunks.dir, "x")
    elif what == "group-symlink":
        shutil.rmtree(chunks.dir)
        os.symlink("/dev/null", chunks.dir)
    elif what == "chmod-000":
        os.chmod(path, 0)


@settings(**fuzz_settings(default=N))
@given(how=damage(), chunk=st.sampled_from([1, 2, 4]))
def test_damaged_caches_at_open(tmp_path_factory, how, chunk):
    """Damaged before a run opens it: rebuilt, and every chunk is the weights (or one line)."""
    root = str(tmp_path_factory.mktemp("cache") / "c")
    first = _open(root, chunk)
    first.close()
    _apply(first, how)

    def use():
        again = _open(root, chunk)
        try:
            _same(again)
        finally:
            again.close()

    check_contract(OUTCOMES["disk cache at open"], use, label=repr(how))


@settings(**fuzz_settings(default=N))
@given(how=damage(IN_RUN), chunk=st.sampled_from([1, 2, 4]))
def test_damaged_caches_while_a_run_reads_them(tmp_path_factory, how, chunk):
    """Damaged while a run holds the cache open: every chunk is still the weights (the open descriptors read the
    files the run opened), or one line that the cache changed during the run; never SIGBUS. Whole layers refilled
    are caught by their sampled pages (tests/test_disk_offload_cache.py)."""
    root = str(tmp_path_factory.mktemp("cache") / "c")
    chunks = _open(root, chunk)
    _same(chunks)
    _apply(chunks, how)

    def use():
        try:
            chunks.put(0)
            _same(chunks)
        finally:
            chunks.close()

    check_contract(OUTCOMES["disk cache in a run"], use, label=repr(how))
