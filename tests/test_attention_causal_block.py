"""Block-causal attention (``causal_block=T``: query i sees keys j with j // T <= i // T) on every CPU backend
against the dense-masked softmax written out here, with a ragged last block and a key padding mask."""

from __future__ import annotations

import numpy as np
import pytest

from vidax_core import attention


def dense(q, k, v, block, kv_mask=None):
    s = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(q.shape[-1])
    i = np.arange(q.shape[1])
    visible = (i[None, :] // block) <= (i[:, None] // block)
    if kv_mask is not None:
        visible = visible[None] & kv_mask[:, None, :]
        visible = visible[:, None]
    s = np.where(visible, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bhqk,bkhd->bqhd", p / p.sum(-1, keepdims=True), v)


@pytest.mark.parametrize("backend", ["xla", "blockwise"])
@pytest.mark.parametrize("masked", [False, True])
def test_block_causal_equals_the_dense_mask(backend, masked):
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 22, 3, 8)).astype(np.float32) for _ in range(3))
    kv_mask = np.ones((2, 22), bool)
    kv_mask[1, 3] = False  # a padded key inside the first block
    with attention.use_backend(backend):
        got = np.asarray(attention.attention(q, k, v, causal_block=8, kv_mask=kv_mask if masked else None))
    want = dense(q, k, v, 8, kv_mask if masked else None)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def test_causal_block_refuses_other_causal_masks():
    x = np.zeros((1, 4, 1, 8), np.float32)
    with pytest.raises(ValueError, match="does not combine"):
        attention.attention(x, x, x, causal_block=2, causal=True)
