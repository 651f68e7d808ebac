"""Fixed sin-cos position tables against diffusers' get_1d_sincos_pos_embed_from_grid (float64 there too)."""

from __future__ import annotations

import numpy as np
import pytest

from vidax_core.nn.sincos import sincos_table

pytestmark = pytest.mark.xdist_group("nn_sincos")


def test_matches_diffusers():
    torch = pytest.importorskip("torch")
    from diffusers.models.embeddings import get_1d_sincos_pos_embed_from_grid

    pos = np.arange(7, dtype=np.float32) / np.float32(1.875)
    want = get_1d_sincos_pos_embed_from_grid(24, torch.from_numpy(pos), output_type="pt").numpy()
    np.testing.assert_allclose(sincos_table(pos, 24), want, rtol=0, atol=1e-12)


def test_layout_and_odd_width():
    t = sincos_table(np.array([0.0, 1.0]), 4)
    np.testing.assert_allclose(t[0], [0, 0, 1, 1])
    np.testing.assert_allclose(t[1], [np.sin(1), np.sin(1e-2), np.cos(1), np.cos(1e-2)])
    with pytest.raises(ValueError):
        sincos_table(np.zeros(2), 5)
