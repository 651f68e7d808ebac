"""Issue 29 (robustness, round 2): each reproducer of the campaign is one clean `error:` line (exit 2).

Same contract as tests/test_bad_input.py's issue-12 table: exactly one line on stderr (fd 2), no traceback, no
"internal error", no partial output, no output folder; and, where the case says so, before any weight loads
(the checkpoint's weights are replaced by garbage, so a run that reached them would fail differently).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import struct
import zipfile

import numpy as np
import pytest

from vidax_core import cli

MODEL = "model.id=wan2.1-t2v-1.3b"
SMALL = ["sampling.height=64", "sampling.width=64", "sampling.num_frames=5", "sampling.num_steps=2",
         "sampling.max_sequence_length=8"]
NOISE_SHAPE = (1, 4, 2, 8, 8)  # the Wan tiny run's latents= shape for SMALL
CK = lambda c: f"model.checkpoint={c}"  # noqa: E731
NOISE = lambda t, name: f"sampling.initial_noise={t / name}"  # noqa: E731


@pytest.fixture()
def ckpt(tmp_path):
    import vidax_wan

    src = os.path.join(os.path.dirname(vidax_wan.__file__), "assets", "tiny-random")
    dst = tmp_path / "ckpt"
    shutil.copytree(src, dst)
    return dst


def _bytes(path, data: bytes):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _npy_with_header(path, header: str, data: bytes = b"", version: int = 1):
    """A .npy whose header text is ``header`` (padded as numpy pads it), followed by ``data``."""
    body = header.encode("latin1")
    pad = 64 - (10 + len(body) + 1) % 64
    body = body + b" " * pad + b"\n"
    _bytes(path, b"\x93NUMPY" + bytes([version, 0]) + struct.pack("<H", len(body)) + body + data)


def _npy_bytes(array) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def _cut(path, keep):
    _bytes(path, _npy_bytes(np.zeros(NOISE_SHAPE, np.float32))[:keep])


def _flip(path, at):
    raw = bytearray(_npy_bytes(np.zeros(NOISE_SHAPE, np.float32)))
    raw[at] ^= 0xFF
    _bytes(path, bytes(raw))


def _npz(path, **arrays):
    np.savez(path, **arrays)


def _npz_truncated(path):
    buf = io.BytesIO()
    np.savez(buf, a=np.zeros((4, 4), np.float32))
    _bytes(path, buf.getvalue()[:100])


def _npz_bomb_member(path, name, shape):
    """A .npz whose member ``name`` is a header claiming ``shape`` float32 zeros, deflated."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        with z.open(name + ".npy", "w", force_zip64=True) as f:
            f.write(_npy_bytes(np.zeros((0,), np.float32))[:0])
            head = io.BytesIO()
            np.lib.format.write_array_header_1_0(head, {"descr": "<f4", "fortran_order": False, "shape": shape})
            f.write(head.getvalue())
            chunk = bytes(1 << 20)
            for _ in range(int(np.prod(shape)) * 4 // len(chunk)):
                f.write(chunk)


def run_cli(argv, tmp_path, capfd):
    if not any(a.startswith("runtime.compilation_cache_dir") for a in argv):
        argv = argv + [f"runtime.compilation_cache_dir={tmp_path / 'jc'}"]
    if not any(a.startswith("output.path") for a in argv):
        argv = argv + [f"output.path={tmp_path / 'new' / 'folder' / 'o.mp4'}"]
    code = cli.main(["run", *argv, "--quiet"])
    out, err = capfd.readouterr()
    return code, [line for line in err.splitlines() if line.strip()]


def _poison_weights(c):
    """Garbage in every weight file: a case that reaches the weights fails with a 'corrupt' message instead."""
    for root, _, files in os.walk(c):
        for f in files:
            if f.endswith(".safetensors"):
                with open(os.path.join(root, f), "wb") as fh:
                    fh.write(b"x" * 64)


# (case id, setup(tmp, ckpt) -> args, expected fragment, refused before the weights load)
CASES = [
    # defect 1: zero item size / negative shape in a .npy header (SIGFPE in numpy's mmap before)
    *[(f"noise-zero-itemsize-{d.strip('<|')}", lambda t, c, d=d: [_npy_with_header(t / "n.npy", f"{{'descr': '{d}', 'fortran_order': False, 'shape': (-1,), }}"), MODEL, CK(c), NOISE(t, "n.npy")] + SMALL,
       "must hold a real-valued numeric array", True) for d in ("<U0", "|V0", "|S0")],
    ("noise-negative-shape", lambda t, c: [_npy_with_header(t / "n.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }"), MODEL, CK(c), NOISE(t, "n.npy")] + SMALL, "not a tuple of non-negative integers", True),
    ("noise-header-promises-more", lambda t, c: [_npy_with_header(t / "n.npy", f"{{'descr': '<f4', 'fortran_order': False, 'shape': {NOISE_SHAPE}, }}", b"\0" * 16), MODEL, CK(c), NOISE(t, "n.npy")] + SMALL, "truncated", True),
    # defect 3: cut / flipped headers, truncated and oversized .npz
    ("noise-header-cut", lambda t, c: [_cut(t / "n.npy", 40), MODEL, CK(c), NOISE(t, "n.npy")] + SMALL, "truncated header", True),
    ("noise-header-flipped", lambda t, c: [_flip(t / "n.npy", 10), MODEL, CK(c), NOISE(t, "n.npy")] + SMALL, "not a Python literal", True),
    ("noise-header-flipped-quote", lambda t, c: [_flip(t / "n.npy", 11), MODEL, CK(c), NOISE(t, "n.npy")] + SMALL, "not a usable .npy file", True),
    ("noise-data-cut", lambda t, c: [_cut(t / "n.npy", 200), MODEL, CK(c), NOISE(t, "n.npy")] + SMALL, "truncated", True),
    ("noise-npz-truncated", lambda t, c: [_npz_truncated(t / "n.npz"), MODEL, CK(c), NOISE(t, "n.npz")] + SMALL, "not a readable .npz archive", True),
    # confusing message: a .npz for a single-stream model
    ("noise-npz-for-one-stream", lambda t, c: [_npz(t / "n.npz", latents=np.zeros(NOISE_SHAPE, np.float32)), MODEL, CK(c), NOISE(t, "n.npz")] + SMALL, "save it alone with numpy.save", False),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_round2_reproducer(case, tmp_path, ckpt, capfd, monkeypatch):
    name, setup, fragment, early = case
    monkeypatch.chdir(tmp_path)
    args = [a for a in setup(tmp_path, ckpt) if a is not None]
    if early:
        _poison_weights(ckpt)
    code, lines = run_cli(args, tmp_path, capfd)
    assert code == 2, lines
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert "internal error" not in lines[0], lines[0]
    assert fragment in lines[0], lines[0]
    assert not [p for p in os.listdir(tmp_path) if ".partial" in p]
    assert not (tmp_path / "new").exists()
