"""vidax_core.io.noise: initial-noise files are checked from their headers before numpy maps or inflates them."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest

from vidax_core.errors import UserError
from vidax_core.io import noise

SHAPES = {"video": (1, 6, 4), "audio": (1, 3, 2)}


def _arrays():
    rng = np.random.default_rng(0)
    return {k: rng.standard_normal(s).astype(np.float32) for k, s in SHAPES.items()}


def test_npz_round_trip_reads_each_stream(tmp_path):
    arrays = _arrays()
    np.savez(tmp_path / "n.npz", **arrays)
    got = noise.load_npz_noise(str(tmp_path / "n.npz"), SHAPES)
    assert set(got) == set(SHAPES)
    for k in SHAPES:
        np.testing.assert_array_equal(got[k], arrays[k])
    noise.check_noise_file(str(tmp_path / "n.npz"))


def test_npy_round_trip_fortran_and_float64(tmp_path):
    a = np.asfortranarray(np.arange(24, dtype=np.float64).reshape(2, 3, 4))
    np.save(tmp_path / "n.npy", a)
    got = noise.load_initial_noise(str(tmp_path / "n.npy"), (2, 3, 4))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, a.astype(np.float32))


def _bomb(path, claimed, written_mib):
    """A deflated .npz member: a header claiming ``claimed`` float32 entries, then ``written_mib`` MiB of zeros."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        with z.open("video.npy", "w", force_zip64=True) as f:
            head = io.BytesIO()
            np.lib.format.write_array_header_1_0(head, {"descr": "<f4", "fortran_order": False, "shape": claimed})
            f.write(head.getvalue())
            for _ in range(written_mib):
                f.write(bytes(1 << 20))
        z.writestr("audio.npy", _npy(np.zeros(SHAPES["audio"], np.float32)))


def _npy(a) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def _count_inflated(monkeypatch):
    seen = {"bytes": 0}
    real = zipfile.ZipExtFile.read

    def read(self, n=-1):
        out = real(self, n)
        seen["bytes"] += len(out)
        return out

    monkeypatch.setattr(zipfile.ZipExtFile, "read", read)
    return seen


def test_npz_member_header_is_checked_before_its_data_is_inflated(tmp_path, monkeypatch):
    """A small .npz whose member inflates to 32 MiB of zeros of the wrong shape: refused after reading its header
    only (a 4.6 MB file holding 1 GiB was decompressed whole before its names were checked)."""
    _bomb(tmp_path / "b.npz", (8 << 20,), 32)
    assert (tmp_path / "b.npz").stat().st_size < 1 << 20
    seen = _count_inflated(monkeypatch)
    with pytest.raises(UserError, match=r"video has shape \(8388608,\), this run needs \(1, 6, 4\)"):
        noise.load_npz_noise(str(tmp_path / "b.npz"), SHAPES)
    assert seen["bytes"] < 1 << 16, seen


def test_npz_names_are_checked_from_the_directory(tmp_path, monkeypatch):
    _bomb(tmp_path / "b.npz", (8 << 20,), 32)
    seen = _count_inflated(monkeypatch)
    with pytest.raises(UserError, match="holds audio, video, this model needs latents"):
        noise.load_npz_noise(str(tmp_path / "b.npz"), {"latents": (1, 2)})
    assert seen["bytes"] == 0


def test_pre_run_check_reads_only_headers(tmp_path, monkeypatch):
    _bomb(tmp_path / "b.npz", (8 << 20,), 32)
    seen = _count_inflated(monkeypatch)
    noise.check_noise_file(str(tmp_path / "b.npz"))  # headers are sound; the shape is checked later
    assert seen["bytes"] < 1 << 16, seen


@pytest.mark.parametrize("keep", [0, 3, 30, 100, 200])
def test_truncated_npz_is_a_user_error(tmp_path, keep):
    buf = io.BytesIO()
    np.savez(buf, **_arrays())
    (tmp_path / "t.npz").write_bytes(buf.getvalue()[:keep] if keep else b"PK\x03\x04")
    for call in (lambda: noise.load_npz_noise(str(tmp_path / "t.npz"), SHAPES),
                 lambda: noise.check_noise_file(str(tmp_path / "t.npz"))):
        with pytest.raises(UserError):
            call()


def test_npz_member_flipped_byte_is_a_user_error(tmp_path):
    buf = io.BytesIO()
    np.savez_compressed(buf, **_arrays())
    raw = bytearray(buf.getvalue())
    raw[60] ^= 0xFF  # inside the first member's deflated data
    (tmp_path / "f.npz").write_bytes(bytes(raw))
    with pytest.raises(UserError):
        noise.load_npz_noise(str(tmp_path / "f.npz"), SHAPES)


@pytest.mark.parametrize("descr", ["<U0", "|V0", "|S0", "|O", "<c8", "[('a', '<f4')]"])
def test_non_real_or_zero_itemsize_dtype_is_refused_from_the_header(tmp_path, descr):
    head = io.BytesIO()
    head.write(b"\x93NUMPY\x01\x00")
    text = ("{'descr': %s, 'fortran_order': False, 'shape': (-1,), }"
            % (descr if descr.startswith("[") else repr(descr))).encode()
    text += b" " * (64 - (10 + len(text) + 1) % 64) + b"\n"
    (tmp_path / "z.npy").write_bytes(b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text)
    with pytest.raises(UserError):
        noise.load_initial_noise(str(tmp_path / "z.npy"), (1, 2))
