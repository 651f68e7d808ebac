"""The Wan VAE's mid-block attention in query blocks: exact against a float64 dense softmax (with a tile's key mask),
and its compiled temporaries bounded by the block size instead of quadratic in the frame's area (a latent frame's
dense scores are 0.8 GB at 720p, 4.2 GB at 1080p)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from vidax_core.vae import wan21


def dense64(q, k, v, mask):
    q, k, v = (np.asarray(a, np.float64)[:, :, 0] for a in (q, k, v))
    s = np.einsum("nqc,nkc->nqk", q, k) / np.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(np.asarray(mask)[:, None, :], s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("nqk,nkc->nqc", p / p.sum(-1, keepdims=True), v)[:, :, None]


@pytest.mark.parametrize("score_bytes", [2**30, 3 * 200 * 4 * 130, 1], ids=["one-call", "ragged-blocks", "min-rows"])
@pytest.mark.parametrize("masked", [False, True])
def test_query_blocks_equal_dense_attention(score_bytes, masked):
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((3, 200, 1, 16)).astype(np.float32) for _ in range(3))
    mask = (np.arange(200)[None, :] < np.array([[200], [137], [1]])) if masked else None
    got = wan21.attention_in_query_blocks(jnp.asarray(q), jnp.asarray(k), jnp.asarray(v),
                                          kv_mask=None if mask is None else jnp.asarray(mask),
                                          score_bytes=score_bytes)
    want = dense64(q, k, v, mask)
    assert np.abs(np.asarray(got, np.float64) - want).max() < 1e-5
    if masked:  # a dropped key mask would be far off
        assert np.abs(want - dense64(q, k, v, None)).max() > 1e-2


def temp_bytes(block, x):
    graphdef, state = nnx.split(block)
    compiled = jax.jit(lambda s, x: nnx.merge(graphdef, s)(x)).lower(state, x).compile()
    return compiled.memory_analysis().temp_size_in_bytes


def test_mid_block_attention_temporaries_follow_the_block_not_the_area(monkeypatch):
    block = wan21.AttentionBlock(16)
    x = jnp.zeros((1, 2, 32, 64, 16), jnp.float32)  # 2 frames of 2,048 positions: dense scores 32 MiB
    dense = 2 * 2048 * 2048 * 4
    monkeypatch.setattr(wan21, "SCORE_BYTES", 2**40)
    whole = temp_bytes(block, x)
    monkeypatch.setattr(wan21, "SCORE_BYTES", 2 * 2**20)
    blocked = temp_bytes(block, x)
    assert whole >= dense / 2  # the measure sees the quadratic scores when they exist (XLA fuses some)
    assert blocked < whole / 4, (blocked, whole)
