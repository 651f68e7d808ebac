"""vidax_core.io.pth (torch-free, pickle-code-free .pth reader) against torch.save as the oracle."""

import io
import os
import pickle
import zipfile

import ml_dtypes
import numpy as np
import pytest

from vidax_core.errors import UserError
from vidax_core.io.pth import PthFile, load_pth

torch = pytest.importorskip("torch")


def _np(t):
    """Reference numpy array of a torch tensor (bf16 through ml_dtypes)."""
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def _assert_same(got, ref):
    want = _np(ref)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8) if got.dtype == ml_dtypes.bfloat16 else got,
                                  want.view(np.uint8) if want.dtype == ml_dtypes.bfloat16 else want)


def _save(obj, tmp_path, name="ckpt.pth"):
    path = tmp_path / name
    torch.save(obj, path)
    return path


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32,
              torch.int16, torch.int8, torch.uint8, torch.bool]
)
def test_dtype_round_trip(tmp_path, dtype):
    g = torch.Generator().manual_seed(0)
    if dtype == torch.bool:
        t = torch.rand(3, 5, generator=g) > 0.5
    elif dtype.is_floating_point:
        t = (torch.randn(3, 5, generator=g) * 100).to(dtype)
    else:
        t = torch.randint(-100 if dtype != torch.uint8 else 0, 100, (3, 5), generator=g).to(dtype)
    got = load_pth(_save({"w": t}, tmp_path))
    assert list(got) == ["w"]
    _assert_same(got["w"], t)


def test_extra_dtypes_via_rebuild_tensor_v3(tmp_path):
    sd = {
        "u16": torch.arange(6).to(torch.uint16).reshape(2, 3),
        "f8": torch.linspace(-2, 2, 8).to(torch.float8_e4m3fn),
        "c64": torch.randn(4, dtype=torch.complex64),
    }
    got = load_pth(_save(sd, tmp_path))
    np.testing.assert_array_equal(got["u16"], np.arange(6, dtype=np.uint16).reshape(2, 3))
    assert got["f8"].dtype == ml_dtypes.float8_e4m3fn
    np.testing.assert_array_equal(got["f8"].view(np.uint8), sd["f8"].view(torch.uint8).numpy())
    np.testing.assert_array_equal(got["c64"], sd["c64"].numpy())


def test_scalar_and_empty(tmp_path):
    sd = {"s": torch.tensor(3.5), "e": torch.zeros(0, 4), "one": torch.ones(1, 1, 3)}
    got = load_pth(_save(sd, tmp_path))
    for k, v in sd.items():
        _assert_same(got[k], v)


def test_non_contiguous_and_shared_storage(tmp_path):
    base = torch.arange(4 * 6, dtype=torch.float32).reshape(4, 6)
    sd = {
        "base": base,
        "t": base.t(),  # transposed: strides (1, 6)
        "rows": base[1:3],  # storage offset 6, contiguous
        "cols": base[:, 2:5],  # storage offset 2, row stride 6
        "step": base[::2, ::3],  # strided
        "expanded": torch.arange(3.0).expand(4, 3),  # stride 0
    }
    path = _save(sd, tmp_path)
    with zipfile.ZipFile(path) as zf:  # views really share one storage in the file
        assert len([n for n in zf.namelist() if "/data/" in n]) == 2
    got = load_pth(path)
    for k, v in sd.items():
        _assert_same(got[k], v)
        assert got[k].flags.c_contiguous


def test_lazy_mapping_memory_maps(tmp_path):
    sd = {"a": torch.randn(8, 8), "b": torch.randn(3)}
    f = PthFile(_save(sd, tmp_path))
    assert len(f) == 2 and "a" in f and set(f) == {"a", "b"}
    assert f.shape("a") == (8, 8) and f.dtype("a") == np.float32 and f.nbytes("a") == 256
    arr = f["a"]
    assert isinstance(arr.base, np.memmap) or isinstance(arr, np.memmap)
    assert not arr.flags.writeable
    _assert_same(arr, sd["a"])


def test_module_state_dict(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(4, 2)
    ).to(torch.bfloat16)
    sd = model.state_dict()
    got = load_pth(_save(sd, tmp_path))
    assert list(got) == list(sd)  # order kept; includes int64 num_batches_tracked buffer
    for k, v in sd.items():
        _assert_same(got[k], v)


def test_parameters_saved_directly(tmp_path):
    lin = torch.nn.Linear(3, 2)
    got = load_pth(_save({"weight": lin.weight, "bias": lin.bias}, tmp_path))
    _assert_same(got["weight"], lin.weight)
    _assert_same(got["bias"], lin.bias)


def test_wrapped_checkpoints_are_unwrapped(tmp_path):
    sd = {"layer.weight": torch.randn(2, 2), "layer.bias": torch.randn(2)}
    for i, wrapped in enumerate([
        {"state_dict": sd, "epoch": 3, "name": "x"},
        {"model": sd, "optimizer": {"state": {0: {"exp_avg": torch.zeros(2)}}, "param_groups": [{"lr": 0.1}]}},
        {"model": {"module": sd}},
    ]):
        got = load_pth(_save(wrapped, tmp_path, f"w{i}.pth"))
        assert sorted(got) == sorted(sd), i
        for k, v in sd.items():
            _assert_same(got[k], v)


def test_nested_dicts_flatten_to_dotted_keys(tmp_path):
    a, b, c, d = torch.randn(2), torch.randn(3), torch.randn(1), torch.ones(2, dtype=torch.int64)
    obj = {"encoder": {"layers": [{"w": a}, {"w": b}]}, "head": {"w": c}, "step": 7, "meta": {"names": ("x", d)}}
    got = load_pth(_save(obj, tmp_path))
    assert sorted(got) == ["encoder.layers.0.w", "encoder.layers.1.w", "head.w", "meta.names.1"]
    _assert_same(got["encoder.layers.1.w"], b)
    _assert_same(got["meta.names.1"], d)
    # unwrap=False keeps the wrapper key as a prefix
    got = load_pth(_save({"model": {"w": a}, "epoch": 1}, tmp_path, "n2.pth"), unwrap=False)
    assert list(got) == ["model.w"]


def test_bare_tensor_and_pickle_protocol_4(tmp_path):
    t = torch.randn(2, 3)
    _assert_same(load_pth(_save(t, tmp_path))[""], t)
    path = tmp_path / "p4.pth"
    torch.save({"x": t, "b": b"bytes"}, path, pickle_protocol=4)
    _assert_same(load_pth(path)["x"], t)


def test_folder_name_inside_zip_varies(tmp_path):
    buf = io.BytesIO()
    t = torch.arange(5, dtype=torch.int32)
    torch.save({"x": t}, buf)
    path = tmp_path / "renamed.bin"
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as src, zipfile.ZipFile(path, "w") as dst:
        for info in src.infolist():
            dst.writestr("some_other_name/" + info.filename.split("/", 1)[1], src.read(info))
    _assert_same(load_pth(path)["x"], t)


def test_compressed_members_are_read(tmp_path):
    src_path = _save({"x": torch.randn(4, 4), "y": torch.randn(4, 4).t()}, tmp_path)
    path = tmp_path / "deflated.pth"
    with zipfile.ZipFile(src_path) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info))
    ref = torch.load(src_path)
    got = load_pth(path)
    _assert_same(got["x"], ref["x"])
    _assert_same(got["y"], ref["y"])


def _pickle_into_torch_zip(tmp_path, payload, name="evil.pth"):
    """A torch.save-shaped zip whose data.pkl is ``payload`` (bytes)."""
    buf = io.BytesIO()
    torch.save({"x": torch.ones(2)}, buf)
    path = tmp_path / name
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as src, zipfile.ZipFile(path, "w") as dst:
        for info in src.infolist():
            data = payload if info.filename.endswith("/data.pkl") else src.read(info)
            dst.writestr(info.filename, data)
    return path


class _OpenMarker:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


class _SystemMarker:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("cls,refused", [(_OpenMarker, "io.open"), (_SystemMarker, "posix.system")])
def test_malicious_pickle_is_refused_without_running(tmp_path, cls, refused):
    marker = tmp_path / "pwned"
    payload = pickle.dumps({"x": cls(str(marker))}, protocol=2)
    path = _pickle_into_torch_zip(tmp_path, payload)
    with pytest.raises(UserError) as err:
        load_pth(path)
    assert not marker.exists()
    msg = str(err.value)
    assert "\n" not in msg and "pickled object vidax will not load" in msg and refused in msg
    # the same object through torch.save itself
    path2 = tmp_path / "evil2.pth"
    torch.save({"w": torch.ones(1), "evil": cls(str(marker))}, path2)
    with pytest.raises(UserError, match="will not load"):
        PthFile(path2)
    assert not marker.exists()


def test_build_opcode_cannot_patch_allowlisted_globals(tmp_path):
    # GLOBAL torch._utils._rebuild_tensor_v2, then BUILD with (None, {"__defaults__": ...}) slot state.
    payload = b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\nN}X\x0c\x00\x00\x00__defaults__)s\x86b."
    with pytest.raises(UserError, match="corrupt"):
        load_pth(_pickle_into_torch_zip(tmp_path, payload))


def test_arbitrary_torch_objects_are_refused(tmp_path):
    path = _save({"w": torch.ones(1), "dev": torch.device("cpu")}, tmp_path)
    with pytest.raises(UserError, match=r"torch\.device"):
        load_pth(path)


def test_truncated_file(tmp_path):
    path = _save({"w": torch.randn(64, 64)}, tmp_path)
    data = path.read_bytes()
    for cut in (len(data) // 2, len(data) - 30, 10):
        bad = tmp_path / f"trunc{cut}.pth"
        bad.write_bytes(data[:cut])
        with pytest.raises(UserError) as err:
            load_pth(bad)
        assert "\n" not in str(err.value) and str(bad) in str(err.value)


def test_storage_member_shorter_than_declared(tmp_path):
    buf = io.BytesIO()
    torch.save({"w": torch.randn(16)}, buf)
    path = tmp_path / "short.pth"
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as src, zipfile.ZipFile(path, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            dst.writestr(info.filename, data[:8] if "/data/" in info.filename else data)
    with pytest.raises(UserError, match="truncated or corrupt"):
        load_pth(path)


@pytest.mark.parametrize("head", [b"", b"\x00\x01", b"PK\x03\x04"])
def test_random_bytes(tmp_path, head):
    path = tmp_path / "garbage.pth"
    path.write_bytes(head + np.random.default_rng(0).integers(1, 255, 4096, dtype=np.uint8).tobytes())
    with pytest.raises(UserError) as err:
        load_pth(path)
    assert "\n" not in str(err.value)


def test_zip_without_data_pkl_and_empty_file(tmp_path):
    path = tmp_path / "other.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("foo/readme.txt", "hi")
    with pytest.raises(UserError, match="data.pkl"):
        load_pth(path)
    empty = tmp_path / "empty.pth"
    empty.write_bytes(b"")
    with pytest.raises(UserError, match="not a torch.save checkpoint"):
        load_pth(empty)
    with pytest.raises(UserError, match="cannot read"):
        load_pth(tmp_path / "missing.pth")


def test_legacy_format_is_refused(tmp_path):
    path = tmp_path / "legacy.pth"
    torch.save({"w": torch.ones(2)}, path, _use_new_zipfile_serialization=False)
    with pytest.raises(UserError, match="legacy"):
        load_pth(path)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_torchscript_is_refused(tmp_path):
    path = tmp_path / "script.pt"
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), str(path))
    with pytest.raises(UserError, match="TorchScript"):
        load_pth(path)


def test_no_tensors(tmp_path):
    with pytest.raises(UserError, match="no tensors"):
        load_pth(_save({"epoch": 3}, tmp_path))


def test_big_endian_checkpoint(tmp_path):
    # Simulate a checkpoint written on a big-endian machine: swap storage bytes and the byteorder record.
    sd = {
        "f": torch.randn(3, 2),
        "bf": torch.randn(4).bfloat16(),
        "i": torch.arange(3),
        "c": torch.randn(2, dtype=torch.complex64),
    }
    src_path = _save(sd, tmp_path)
    with zipfile.ZipFile(src_path) as z:
        members = {i.filename: z.read(i) for i in z.infolist()}
    folder = next(iter(members)).split("/")[0]
    members[f"{folder}/byteorder"] = b"big"
    # one storage per tensor, keys "0".."3" in dict order; swap each element (each complex component)
    for key, t in zip(("0", "1", "2", "3"), sd.values()):
        unit = t.element_size() // 2 if t.is_complex() else t.element_size()
        raw = np.frombuffer(members[f"{folder}/data/{key}"], dtype=np.dtype(f"u{unit}"))
        members[f"{folder}/data/{key}"] = raw.byteswap().tobytes()
    path = tmp_path / "be.pth"
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    got = load_pth(path)
    for k, v in sd.items():
        _assert_same(got[k], v)


def test_reader_never_imports_torch():
    import subprocess
    import sys

    code = "import sys, vidax_core.io.pth; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ})
