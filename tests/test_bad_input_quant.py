"""Malformed 8-bit checkpoints and a bad ``model.weight_dtype`` are one ``error:`` line each (exit 2).

Same contract as tests/test_bad_input_files.py: exactly one line on stderr, no traceback, no "internal error",
no output. Each case rewrites the tiny Wan checkpoint's transformer file into a broken 8-bit layout with the
layouts' real key names.
"""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest

from vidax_core import cli
from vidax_core.io.safetensors import SafetensorsFile, save_file
from vidax_core.testing.assets import writable_asset

SMALL = ["model.id=wan2.1-t2v-1.3b", "sampling.height=64", "sampling.width=64", "sampling.num_frames=5",
         "sampling.num_steps=2", "sampling.max_sequence_length=8"]
Q = "blocks.0.attn1.to_q"
E4M3 = ml_dtypes.float8_e4m3fn


@pytest.fixture()
def ckpt(tmp_path):
    """A writable copy of the built-in tiny Wan checkpoint (diffusers layout)."""
    return writable_asset("vidax_wan", tmp_path / "ckpt")


def _rewrite(c, edit):
    path = str(c / "transformer" / "diffusion_pytorch_model.safetensors")
    f = SafetensorsFile(path)
    tensors = {k: np.array(f[k]) for k in f}
    del f
    meta = edit(tensors) or None
    save_file(tensors, path, metadata=meta)


def _int8(t, scale_shape=None, scale_value=None):
    w = t[Q + ".weight"]
    out = w.shape[0]
    s = (np.abs(w).max(axis=1, keepdims=True) / 127).astype(np.float32)
    t[Q + ".weight"] = np.round(w / s).astype(np.int8)
    if scale_value is not None:
        s = np.full_like(s, scale_value)
    if scale_shape is not None:
        s = np.ones(scale_shape(out), np.float32)
    t[Q + ".weight_scale"] = s


def _no_scale(t):
    t[Q + ".weight"] = t[Q + ".weight"].astype(np.int8)


def _marker_only(t):
    t[Q + ".weight"] = t[Q + ".weight"].astype(E4M3)
    t["scaled_fp8"] = np.zeros(2, E4M3)


def _comfy(fmt, with_scale=True):
    def edit(t):
        t[Q + ".weight"] = t[Q + ".weight"].astype(E4M3)
        if with_scale:
            t[Q + ".weight_scale"] = np.ones((), np.float32)
        t[Q + ".comfy_quant"] = np.frombuffer(json.dumps({"format": fmt}).encode(), np.uint8).copy()
    return edit


def _orphan_scale(t):
    t["blocks.0.attn1.to_zz.weight_scale"] = np.ones((), np.float32)


CASES = [
    ("scale-wrong-shape", lambda t: _int8(t, scale_shape=lambda out: (out + 1, 1)),
     "needs one value or one per output channel"),
    ("scale-missing", _no_scale, f"{Q}.weight has no {Q}.weight_scale"),
    ("tagged-layer-without-scale", _comfy("float8_e4m3fn", with_scale=False), f"has no {Q}.weight_scale"),
    ("marker-without-scales", _marker_only, "has the scaled_fp8 marker but no <layer>.scale_weight"),
    ("nvfp4", _comfy("nvfp4"), "is nvfp4"),
    ("unknown-format", _comfy("mxfp8"), "quantization format 'mxfp8'"),
    ("scale-nan", lambda t: _int8(t, scale_value=np.nan), "NaN or infinite"),
    ("scale-zero", lambda t: _int8(t, scale_value=0.0), "zero or negative"),
    ("scale-without-weight", _orphan_scale, "has no weight blocks.0.attn1.to_zz.weight"),
    ("metadata-not-json", lambda t: {"_quantization_metadata": "{not json"},
     "_quantization_metadata entry is not JSON"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_malformed_8bit_checkpoint(case, tmp_path, ckpt, capfd, monkeypatch):
    name, edit, fragment = case
    monkeypatch.chdir(tmp_path)
    _rewrite(ckpt, edit)
    argv = [*SMALL, f"model.checkpoint={ckpt}", f"runtime.compilation_cache_dir={tmp_path / 'jc'}",
            f"output.path={tmp_path / 'new' / 'o.mp4'}"]
    code = cli.main(["run", *argv, "--quiet"])
    _, err = capfd.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, lines
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert "internal error" not in lines[0] and fragment in lines[0], lines[0]
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("value", ["float16", "fp8", "int4"])
def test_bad_weight_dtype_key(value, tmp_path, capfd):
    code = cli.main(["run", *SMALL, "model.checkpoint=builtin:tiny-random", f"model.weight_dtype={value}",
                     "--dry-run"])
    _, err = capfd.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith("error: config key model.weight_dtype must be null") and "int8" in lines[0], lines


def _dry(argv, capfd):
    code = cli.main(["run", *SMALL, *argv, "--dry-run"])
    out, err = capfd.readouterr()
    assert code == 0, err
    return out + err


def test_dry_run_prints_8bit_bytes(tmp_path, ckpt, capfd):
    """``--dry-run`` sizes the 8-bit leaves: an ``8-bit:`` line and fewer per-device bytes, from the run key or
    from an 8-bit checkpoint's own tensors (no key)."""
    import re

    def per_device(text):
        m = re.search(r"^per device: ~([\d.]+) (KiB|MiB)", text, re.M)
        return float(m[1]) * (1024 if m[2] == "MiB" else 1)

    base = _dry(["model.checkpoint=builtin:tiny-random"], capfd)
    keyed = _dry(["model.checkpoint=builtin:tiny-random", "model.weight_dtype=float8_e4m3fn"], capfd)
    more = _dry(["model.checkpoint=builtin:tiny-random", "model.weight_dtype=float8_e4m3fn",
                 "model.quantize_outside_blocks=true"], capfd)
    assert "8-bit:" not in base
    # at-load quantization covers the blocks only; with model.quantize_outside_blocks Wan's time / text embedder
    # MLPs and time projection are 8-bit too (vidax_wan.plugin.QUANTIZED_OUTSIDE_BLOCKS)
    assert re.search(r"^8-bit: .* of float8_e4m3fn weights in \d+ Linear kernels \+ .* of fp32 scales", keyed,
                     re.M), keyed
    assert re.search(r"^8-bit: .* of float8_e4m3fn weights in \d+ Linear kernels "
                     r"\(5 outside the blocks\) \+ .* of fp32 "
                     "scales", more, re.M), more
    assert per_device(more) < per_device(keyed) < per_device(base)
    _rewrite(ckpt, lambda t: _int8(t))  # one LightX2V-style int8 layer: the run detects int8 storage
    found = _dry([f"model.checkpoint={ckpt}"], capfd)
    assert re.search(r"^8-bit: .* of int8 weights", found, re.M), found


def test_8bit_checkpoint_runs_without_key(tmp_path, ckpt, capfd):
    """A LightX2V-style int8 checkpoint runs end to end with no key set, its storage reported in the metrics."""
    _rewrite(ckpt, lambda t: _int8(t))
    m = tmp_path / "m.json"
    code = cli.main(["run", *SMALL, f"model.checkpoint={ckpt}", "output.path=null", f"output.metrics={m}",
                     f"runtime.compilation_cache_dir={tmp_path / 'jc'}", "--quiet"])
    capfd.readouterr()
    assert code == 0
    assert json.loads(m.read_text())["weight_storage"] == ["int8"]


def test_misshaped_weight_under_at_load_quantization(tmp_path, ckpt, capfd):
    """A block weight of the wrong shape is the conversion's one line, also when it would be quantized at load."""
    def edit(t):
        t[Q + ".weight"] = t[Q + ".weight"][:-1].copy()  # one output channel short

    _rewrite(ckpt, edit)
    code = cli.main(["run", *SMALL, f"model.checkpoint={ckpt}", "model.weight_dtype=int8",
                     f"output.path={tmp_path / 'new' / 'o.mp4'}", "--quiet"])
    _, err = capfd.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "mis-shaped" in lines[0] and Q in lines[0], lines
