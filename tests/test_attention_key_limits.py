"""Chunk-causal attention over a cached prefix (``key_limits``: runs of query rows, each seeing a prefix of the
keys) on the xla and blockwise backends and on the splash kernel in Pallas' interpreter, against a dense-masked
float64 softmax; the splash tile table skips the tiles past every row's limit."""

from __future__ import annotations

import numpy as np
import pytest

from vidax_core import attention
from vidax_core.attention.kernels import splash_tpu
from vidax_core.attention.splash_blocks import Blocks

# 200 past keys, then three chunks of new tokens (150, 250, 280): chunk b sees the past and chunks 0..b
PAST, CHUNKS = 200, (150, 250, 280)
RUNS = tuple((n, PAST + sum(CHUNKS[:i + 1])) for i, n in enumerate(CHUNKS))


def dense(q, k, v, runs):
    s = np.einsum("bqhd,bkhd->bhqk", q.astype(np.float64), k.astype(np.float64)) / np.sqrt(q.shape[-1])
    limits = np.repeat([n for _, n in runs], [r for r, _ in runs])
    s = np.where(np.arange(k.shape[1])[None, :] < limits[:, None], s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bhqk,bkhd->bqhd", p / p.sum(-1, keepdims=True), v.astype(np.float64))


def inputs(d=16):
    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, sum(CHUNKS), 2, d)).astype(np.float32)
    k, v = (rng.standard_normal((2, PAST + sum(CHUNKS), 2, d)).astype(np.float32) for _ in range(2))
    return q, k, v


@pytest.mark.parametrize("backend", ["xla", "blockwise"])
def test_key_limits_match_the_dense_mask(backend):
    q, k, v = inputs()
    with attention.use_backend(backend):
        got = np.asarray(attention.attention(q, k, v, key_limits=RUNS))
    np.testing.assert_allclose(got, dense(q, k, v, RUNS), rtol=2e-5, atol=2e-5)


@pytest.mark.skipif(splash_tpu.import_error() is not None, reason=str(splash_tpu.import_error()))
def test_key_limits_on_splash_skip_tiles():
    q, k, v = inputs(d=64)
    got = np.asarray(splash_tpu.limited_attention(q, k, v, RUNS, blocks=Blocks(128, 128, 128), interpret=True))
    np.testing.assert_allclose(got, dense(q, k, v, RUNS), rtol=2e-5, atol=2e-5)
    limits = np.repeat([n for _, n in RUNS], [r for r, _ in RUNS])
    limits = np.concatenate([limits, np.full(768 - limits.size, limits[-1])])
    state = splash_tpu.limit_tile_state(limits.astype(np.int32), 896, 128, 128)[0]
    assert (state == 0).sum() > 0 and (state == 2).sum() > 0  # skipped tiles past the first chunks' limits
    assert state[0, -1] == 0 and state[-1, 0] == 2


def test_key_limits_refuse_bad_runs():
    q, k, v = inputs()
    with pytest.raises(ValueError, match="must cover"):
        attention.attention(q, k, v, key_limits=((10, 20),))
