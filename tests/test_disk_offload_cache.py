"""The ``offload.storage=disk`` cache (issue 51, items 1-3): checked before use at every open, rebuilt when damaged,
one ``error:`` line naming ``VIDAX_OFFLOAD_CACHE`` when its folder cannot be used, never a SIGBUS.

The group's cache is opened directly (:class:`vidax_core.parallel.disk_chunks.DiskChunks` over a small host state
keyed by a real file, as a run keys it by the checkpoint's files), damaged the ways the campaign found, and opened
again: the chunks read back must be the state's own values. One command-line run checks the folder refusals end to
end, dry run and run alike.
"""

from __future__ import annotations

import gc
import os
import signal

import jax
import ml_dtypes
import numpy as np
import pytest

from vidax_core import cli
from vidax_core.errors import UserError
from vidax_core.parallel import disk_chunks as dc

BLOCKS = 4


def _state():
    rng = np.random.default_rng(0)
    return {"a": rng.standard_normal((BLOCKS, 3, 5)).astype(np.float32),
            "b": rng.standard_normal((BLOCKS, 1000)).astype(ml_dtypes.bfloat16),
            "c": rng.standard_normal((BLOCKS, 8192)).astype(np.float32)}  # 32 KiB a layer: sampled pages


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    """(open(chunk_size) -> DiskChunks, the log lines, the state); the cache under tmp_path/cache."""
    monkeypatch.setenv(dc.CACHE_ENV, str(tmp_path / "cache"))
    source = tmp_path / "weights.safetensors"
    source.write_bytes(b"x" * 64)
    state, lines = _state(), []
    dev = jax.sharding.SingleDeviceSharding(jax.devices()[0])

    def open_(chunk_size=2):
        return dc.DiskChunks(state, chunk_size, {k: dev for k in state}, name="blocks", files=[str(source)],
                             log=lines.append)

    return open_, lines, state


def _assert_reads(chunks, state):
    for i in range(len(chunks)):
        got = chunks.read(i)
        for (k, want), have in zip(sorted(state.items()), got):
            lo, hi = i * chunks.chunk_size, (i + 1) * chunks.chunk_size
            np.testing.assert_array_equal(np.asarray(have, np.float32), np.asarray(want[lo:hi], np.float32), k)


def _leaf_file(chunks, k=2):
    return chunks._file(k)  # leaf order is the state's sorted keys: 0 a, 1 b, 2 c


def _nan_fill(path):
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.write(np.full(size // 4, np.nan, np.float32).tobytes())


def _random_fill(path):
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.write(np.random.default_rng(1).integers(0, 256, size, np.uint8).tobytes())


def _truncate(path):
    os.truncate(path, os.path.getsize(path) // 2)


def _folder(path):
    os.unlink(path)
    os.mkdir(path)


def _devnull(path):
    os.unlink(path)
    os.symlink("/dev/null", path)


def _fifo(path):
    os.unlink(path)
    os.mkfifo(path)


def _group_folder_a_file(chunks):
    import shutil

    shutil.rmtree(chunks.dir)
    with open(chunks.dir, "w") as f:
        f.write("not a folder")


DAMAGE = {
    "chunk-file-truncated": lambda c: _truncate(_leaf_file(c)),
    "chunk-file-deleted": lambda c: os.unlink(_leaf_file(c)),
    "chunk-file-a-folder": lambda c: _folder(_leaf_file(c)),
    "chunk-file-symlink-to-dev-null": lambda c: _devnull(_leaf_file(c)),
    "chunk-file-a-fifo": lambda c: _fifo(_leaf_file(c)),
    "chunk-file-nan-filled-right-size": lambda c: _nan_fill(_leaf_file(c)),
    "chunk-file-random-right-size": lambda c: _random_fill(_leaf_file(c, 0)),
    "later-chunk-nan-filled": lambda c: _nan_fill(_leaf_file(c, 1)),
    "group-folder-a-file": _group_folder_a_file,
    "manifest-deleted": lambda c: os.unlink(os.path.join(c.dir, dc.MANIFEST)),
    "manifest-garbage": lambda c: open(os.path.join(c.dir, dc.MANIFEST), "w").write("{"),
}


def test_a_clean_cache_is_reused(cache):
    open_, lines, state = cache
    first = open_()
    _assert_reads(first, state)
    again = open_(chunk_size=1)  # another chunk size reads the same files: fingerprints are per layer
    assert any("reusing" in line for line in lines), lines
    _assert_reads(again, state)


@pytest.mark.parametrize("damage", list(DAMAGE), ids=list(DAMAGE))
def test_a_damaged_cache_is_rebuilt(cache, damage):
    """Disk cache chunk files of the right size with NaN or random contents, truncated, deleted, a folder, a
    symlink to /dev/null, a FIFO (which blocked the run); the group folder a file: each is found when the cache is
    opened and rebuilt, and the chunks read back are the weights."""
    open_, lines, state = cache
    first = open_()
    first.close()
    signal.setitimer(signal.ITIMER_REAL, 30)  # a FIFO opened for reading would block: fail instead of hanging
    try:
        DAMAGE[damage](first)
        again = open_()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    assert any("is damaged" in line and "rebuilding" in line for line in lines), lines
    _assert_reads(again, state)


def test_a_chunk_file_shortened_while_the_run_reads_it_is_one_line_not_sigbus(cache):
    """An offload.storage=disk chunk file shortened while a run reads it (DiskChunks.put checked sizes only at
    chunk 0): rc -7 before. The chunks are read with pread, never through a mapping."""
    open_, _, state = cache
    chunks = open_(chunk_size=1)
    _assert_reads(chunks, state)
    os.truncate(_leaf_file(chunks), 100)
    with pytest.raises(UserError, match="changed during the run"):
        chunks.read(3)
    with pytest.raises(UserError, match="changed during the run"):
        chunks.put(0)


def test_contents_changed_while_the_run_reads_them_are_one_line(cache):
    open_, _, _ = cache
    chunks = open_(chunk_size=1)
    _nan_fill(_leaf_file(chunks))
    with pytest.raises(UserError, match="no longer match their fingerprints"):
        chunks.read(2)


def test_a_cache_removed_under_a_running_process_does_not_disturb_it(cache):
    import shutil

    open_, _, state = cache
    chunks = open_()
    shutil.rmtree(chunks.dir)
    _assert_reads(chunks, state)  # the open descriptors still read the files


def test_what_a_killed_build_left_is_swept(cache, tmp_path):
    open_, _, state = cache
    chunks = open_()
    root = os.path.dirname(chunks.dir)
    dead = 2**22 + 12345  # above the default pid_max: no process has it
    left = os.path.join(root, f".{chunks.name}.{dc.stale.host()}-{dead}.abcd1234.tmp")
    live = os.path.join(root, f".{chunks.name}.{dc.stale.host()}-{os.getppid()}.abcd1234.tmp")
    os.mkdir(left)
    os.mkdir(live)
    _nan_fill(_leaf_file(chunks))
    chunks.close()
    open_()  # damaged: rebuilt, and the dead build's folder swept
    assert not os.path.exists(left) and os.path.isdir(live)


def _unusable_roots(tmp_path):
    (tmp_path / "afile").write_text("x")
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling")
    os.symlink(tmp_path / "loop", tmp_path / "loop")
    return {"empty": ("", "is set but empty"), "a-file": (str(tmp_path / "afile"), "it is a file, not a folder"),
            "dangling-symlink": (str(tmp_path / "dangling"), "which does not exist"),
            "symlink-loop": (str(tmp_path / "loop"), "symlink loop"),
            "dev-null": ("/dev/null", "it is a device"),
            "under-a-file": (str(tmp_path / "afile" / "cache"), "part of its path is a file")}


ROOTS = ["empty", "a-file", "dangling-symlink", "symlink-loop", "dev-null", "under-a-file"]


@pytest.mark.parametrize("which", ROOTS)
def test_an_unusable_cache_folder_is_one_line_naming_the_variable(tmp_path, monkeypatch, which):
    value, words = _unusable_roots(tmp_path)[which]
    monkeypatch.setenv(dc.CACHE_ENV, value)
    for create in (False, True):
        with pytest.raises(UserError) as info:
            dc.check_cache_root(create=create)
        assert dc.CACHE_ENV in str(info.value) and words in str(info.value), str(info.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_an_unwritable_cache_folder_is_one_line(tmp_path, monkeypatch):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    monkeypatch.setenv(dc.CACHE_ENV, str(locked))
    with pytest.raises(UserError, match="cannot write there"):
        dc.check_cache_root()


def test_the_cache_folder_is_checked_by_the_dry_run_and_the_run(tmp_path, monkeypatch, capfd):
    """VIDAX_OFFLOAD_CACHE="" silently meant the default; /dev/null was an internal error once the run wrote the
    cache. Both are one line before anything loads, in the dry run too, and nothing is written."""
    demo = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs", "demo.yaml")
    monkeypatch.chdir(tmp_path)
    args = [demo, "offload.enabled=true", "offload.storage=disk", "sampling.num_steps=1",
            f"output.path={tmp_path / 'out' / 'o.mp4'}", "output.metrics=null"]
    for value, words in (("", "is set but empty"), ("/dev/null", "it is a device")):
        monkeypatch.setenv(dc.CACHE_ENV, value)
        for extra in (["--dry-run"], ["--quiet"]):
            code = cli.main(["run", *args, *extra])
            lines = [x for x in capfd.readouterr().err.splitlines() if x.strip()]
            assert code == 2 and len(lines) == 1 and words in lines[0] and dc.CACHE_ENV in lines[0], lines
    assert not (tmp_path / "out").exists()


def test_a_read_chunk_is_held_once_and_handed_back(tmp_path, monkeypatch):
    """Chunks are read into page-aligned mappings of their own: the CPU backend places one without a copy, and
    freeing it hands its pages back to the OS (read into heap buffers, a freed chunk's memory stayed in the process
    and each placement copied it once more)."""
    from vidax_core.report.memory import anon_mb

    monkeypatch.setenv(dc.CACHE_ENV, str(tmp_path / "cache"))
    (tmp_path / "w.safetensors").write_bytes(b"x")
    state = {f"w{i}": np.ones((2, 2048, 2048), np.float32) for i in range(4)}  # 64 MiB a chunk
    dev = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    chunks = dc.DiskChunks(state, 1, {k: dev for k in state}, name="blocks", files=[str(tmp_path / "w.safetensors")])
    del state
    base = anon_mb()
    peak = base
    for _ in range(3):
        for i in range(len(chunks)):
            placed = jax.block_until_ready(chunks.put(i))
            peak = max(peak, anon_mb())
            for a in jax.tree.leaves(placed):
                a.delete()
            del placed
    chunks.close()
    gc.collect()
    print(f"a 64 MiB chunk read 6 times: peak {peak - base:.0f} MiB above the start, {anon_mb() - base:.0f} after")
    assert peak - base <= 64 * 1.25 and anon_mb() - base <= 8
