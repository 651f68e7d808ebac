"""3-D neighborhood attention (vidax_core.attention.neighborhood) against a dense float64 reference at tiny sizes:
NATTEN's window (centred, shifted inward at the borders, always the full kernel), tiles that do not divide the
grid, kernels larger than an axis, another logit scale, bf16; no (S, S) array in the compiled program; the
benchmark script runs end to end at tiny size."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vidax_core import attention as att
from vidax_core.attention.kernels import neighborhood as blockwise
from vidax_core.attention.neighborhood import neighborhood_attention

ROOT = Path(__file__).resolve().parents[1]


def window_mask(grid, kernel):
    """(S, S) bool: key j in the window of query i (NATTEN: start clamp(i - k//2, 0, n - k), k = min(k, n))."""
    coords = np.stack(np.meshgrid(*(np.arange(n) for n in grid), indexing="ij"), -1).reshape(-1, 3)
    vis = np.ones((len(coords), len(coords)), bool)
    for axis, (n, k) in enumerate(zip(grid, kernel)):
        k = min(k, n)
        start = np.clip(coords[:, axis] - k // 2, 0, n - k)
        vis &= (coords[None, :, axis] >= start[:, None]) & (coords[None, :, axis] < start[:, None] + k)
    return vis


def reference(q, k, v, kernel, heads, scale=None, mask=window_mask):
    """Channels-last (B, T, H, W, heads * D) in and out, float64."""
    b, t, h, w, c = q.shape
    scale = 1 / np.sqrt(c // heads) if scale is None else scale
    q, k, v = (np.asarray(x, np.float64).reshape(b, t * h * w, heads, -1) for x in (q, k, v))
    logits = np.einsum("bqnd,bknd->bnqk", q, k) * scale
    logits = np.where(mask((t, h, w), kernel), logits, -np.inf)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bnqk,bknd->bqnd", p, v).reshape(b, t, h, w, -1)


def truncated_mask(grid, kernel):
    """The plausible bug: windows cut at the borders instead of shifted inward."""
    coords = np.stack(np.meshgrid(*(np.arange(n) for n in grid), indexing="ij"), -1).reshape(-1, 3)
    vis = np.ones((len(coords),) * 2, bool)
    for axis, k in enumerate(kernel):
        vis &= np.abs(coords[None, :, axis] - coords[:, None, axis]) <= k // 2
    return vis


CASES = {  # grid, kernel, tile
    "odd_tiles": ((5, 7, 9), (3, 3, 5), (2, 3, 4)),
    "default_tile": ((4, 6, 10), (3, 5, 5), None),
    "kernel_over_axis": ((3, 4, 5), (5, 7, 3), (1, 2, 2)),
    "even_kernel": ((6, 5, 7), (4, 2, 3), (4, 4, 4)),
    "tile_over_grid": ((2, 3, 3), (1, 3, 3), (8, 8, 8)),
    "one_token_window": ((2, 3, 3), (1, 1, 1), (1, 1, 1)),
}


def _inputs(grid, seed=0, heads=2, dim=8, batch=2):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((batch, *grid, heads * dim)).astype(np.float32) for _ in range(3)]


@pytest.mark.parametrize("case", list(CASES))
def test_blockwise_matches_dense_reference(case):
    grid, kernel, tile = CASES[case]
    q, k, v = _inputs(grid)
    out = jax.jit(lambda q, k, v: blockwise.attention(q, k, v, kernel, heads=2, tile=tile))(q, k, v)
    ref = reference(q, k, v, kernel, 2)
    assert out.shape == ref.shape and out.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(out), ref, atol=2e-6, rtol=0)


def test_the_window_shifts_inward_at_the_borders():
    """A truncated window (the plausible bug) moves the border tokens, the interior stays: the reference is
    sensitive to exactly what the kernel must do."""
    grid, kernel = (5, 6, 7), (3, 5, 5)
    q, k, v = _inputs(grid, seed=3)
    out = np.asarray(blockwise.attention(q, k, v, kernel, heads=2))
    truncated = reference(q, k, v, kernel, 2, mask=truncated_mask)
    assert np.abs(out - truncated).max() > 0.05
    np.testing.assert_allclose(out[:, 1:-1, 2:-2, 2:-2], truncated[:, 1:-1, 2:-2, 2:-2], atol=2e-6)


def test_dispatch_scale_bf16_and_recorded_call():
    grid, kernel = (3, 5, 6), (3, 3, 3)
    q, k, v = _inputs(grid, seed=1, heads=3, dim=16, batch=1)
    with att.use_backend("xla"):
        out = jax.jit(lambda q, k, v: neighborhood_attention(q, k, v, kernel, heads=3, scale=0.5))(q, k, v)
        calls = att.calls()
    np.testing.assert_allclose(np.asarray(out), reference(q, k, v, kernel, 3, scale=0.5), atol=2e-6, rtol=0)
    (site,) = [c for c in calls.values() if c["backend"] == "neighborhood_blockwise"]
    assert site["q_len"] == site["kv_len"] == 90 and site["heads"] == 3 and site["head_dim"] == 16
    low = neighborhood_attention(*(jnp.asarray(x, jnp.bfloat16) for x in (q, k, v)), kernel, heads=3)
    assert low.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(low, np.float32), reference(q, k, v, kernel, 3), atol=3e-2, rtol=0)


def test_no_dense_score_array_is_compiled():
    """At 16384 tokens one (S, S) fp32 array is 1 GiB; the compiled program's temporaries stay a small fraction."""
    grid, kernel = (4, 64, 64), (3, 7, 7)
    s = int(np.prod(grid))
    spec = jax.ShapeDtypeStruct((1, *grid, 32), jnp.float32)
    compiled = jax.jit(lambda q, k, v: blockwise.attention(q, k, v, kernel, heads=2)).lower(spec, spec, spec).compile()
    temp = compiled.memory_analysis().temp_size_in_bytes
    print(f"temp bytes {temp} vs one (S, S) fp32 array {s * s * 4}")
    assert temp < s * s * 4 / 64


def test_bad_arguments_are_value_errors():
    q = jnp.zeros((1, 2, 3, 4, 8))
    with pytest.raises(ValueError, match="kernel sizes must be positive"):
        blockwise.attention(q, q, q, (0, 1, 1), heads=1)
    with pytest.raises(ValueError, match="B, T, H, W, heads . D"):
        blockwise.attention(q[0], q[0], q[0], (1, 1, 1), heads=1)
    with pytest.raises(ValueError, match="heads=3 must divide"):
        blockwise.attention(q, q, q, (1, 1, 1), heads=3)
    with pytest.raises(ValueError, match="neighborhood attention is 3-D"):
        blockwise.attention(q, q, q, (1, 1), heads=1)


def test_benchmark_script_runs_at_tiny_size(tmp_path, monkeypatch, capsys):
    """``benchmarks/ltx2_diffusion_decoder.py`` (the TPU compile/decode measurement) end to end on CPU, in-process."""
    import runpy

    out = tmp_path / "dd.json"
    monkeypatch.setattr(sys, "argv", ["ltx2_diffusion_decoder.py", "--config", "tiny", "--size", "64x96x9", "--dtype",
                                      "float32", "--out", str(out)])
    with att.use_backend("xla"):  # the script sets the process backend; the test's stays as it was
        with pytest.raises(SystemExit) as done:
            runpy.run_path(str(ROOT / "benchmarks" / "ltx2_diffusion_decoder.py"), run_name="__main__")
    assert done.value.code == 0, capsys.readouterr().err[-3000:]
    r = json.loads(out.read_text())
    assert [u["unit"] for u in r["units"]] == ["stage 1", "stage 2", "stage 3", "stage 4", "stage 5 (diffusion step)"]
    assert all(u["compile_s"] > 0 and u["run_s"] > 0 for u in r["units"])
    assert r["output_shape"] == [1, 3, 9, 64, 96] and r["finite"] and r["decode_s"] > 0
    assert {c["backend"] for c in r["attention_calls"].values()} == {"neighborhood_blockwise"}
    assert all(0 < u["flops"] <= u["dense_equivalent_flops"] for u in r["units"])  # windows: never more than dense
    assert r["flops"] < r["dense_equivalent_flops"]
