"""NABLA's block-sparse attention (vidax_core.attention.nabla), against independent float64 numpy definitions: the
STA window mask, the top-CDF block mask of the queries' and keys' block means, and attention restricted exactly to
the kept (query block, key block) pairs (the semantics of the reference's flex-attention BlockMask of full blocks),
computed by the blockwise kernel tile by tile (all-masked tiles skipped); and under sequence and tensor
parallelism on fake devices, where the mask is computed after the all-to-all."""

from __future__ import annotations

import os

import jax
import numpy as np
import pytest

from vidax_core.attention.nabla import BLOCK, block_mask, nabla_attention, sta_mask
from vidax_core.testing.devices import run_script

SCRIPTS = os.path.join(os.path.dirname(__file__), "parallel_scripts")
GRID, WINDOW, P = (2, 2, 3), (1, 3, 1), 0.6


def sta_reference(grid, window) -> np.ndarray:
    cells = [(t, h, w) for t in range(grid[0]) for h in range(grid[1]) for w in range(grid[2])]
    return np.array([[all(abs(a - b) <= win // 2 for a, b, win in zip(i, j, window)) for j in cells] for i in cells])


def mask_reference(q, k, sta, threshold) -> np.ndarray:
    b, s, h, d = q.shape
    n = s // BLOCK
    qm, km = (x.astype(np.float64).reshape(b, n, BLOCK, h, d).mean(2) for x in (q, k))
    logits = np.einsum("bqhd,bkhd->bhqk", qm, km) / np.sqrt(d)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    keep = np.zeros(p.shape, bool)
    for idx in np.ndindex(p.shape[:3]):
        order = np.argsort(p[idx])
        keep[idx][order] = np.cumsum(p[idx][order]) >= 1 - threshold
    return keep | sta


def attention_reference(q, k, v, keep) -> np.ndarray:
    allowed = np.repeat(np.repeat(keep, BLOCK, axis=2), BLOCK, axis=3)
    logits = np.einsum("bqhd,bkhd->bhqk", q.astype(np.float64), k) / np.sqrt(q.shape[-1])
    logits = np.where(allowed, logits, -np.inf)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    return np.einsum("bhqk,bkhd->bqhd", p / p.sum(-1, keepdims=True), v)


@pytest.fixture(scope="module")
def qkv():
    rng = np.random.default_rng(3)
    n = int(np.prod(GRID))
    return tuple(rng.standard_normal((2, n * BLOCK, 2, 8)).astype(np.float32) for _ in range(3))


def test_sta_window():
    for grid, window in ((GRID, WINDOW), ((3, 2, 2), (11, 3, 3)), ((4, 1, 1), (1, 1, 1))):
        assert (sta_mask(grid, window) == sta_reference(grid, window)).all()


def test_block_mask_and_attention_match_their_definitions(qkv):
    q, k, v = qkv
    sta = sta_mask(GRID, WINDOW)
    keep = np.asarray(block_mask(q, k, sta, P))
    want = mask_reference(q, k, sta, P)
    assert (keep == want).all() and 0.3 < keep.mean() < 0.9  # the map really drops blocks
    ref = attention_reference(q, k, v, want)
    for tile in (64, 128, 512):  # 1, 2 and all 12 mask blocks per tile: skipped, partly and fully masked tiles
        got = np.asarray(jax.jit(lambda q, k, v, t=tile: nabla_attention(q, k, v, grid=GRID, window=WINDOW,
                                                                        threshold=P, tile=t))(q, k, v))
        err = float(np.abs(got - ref).max())
        print(f"nabla attention, tile {tile}: max abs vs float64 definition {err:.2e}")
        assert err < 1e-5
    dense = attention_reference(q, k, v, np.ones_like(want))
    assert float(np.abs(dense - ref).max()) > 1e-2  # the sparsity matters at this bound


def test_sequence_and_tensor_parallel_equal_one_device():
    errors = run_script(os.path.join(SCRIPTS, "nabla_sp.py"), timeout=600)
    print(errors)
    assert set(errors) == {"dp1_sp4_tp1", "dp1_sp2_tp2", "dp2_sp2_tp2"}
    assert all(r["rel"] < 1e-6 and r["all_to_all"] > 0 for r in errors.values())
