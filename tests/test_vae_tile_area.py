"""A padded tile's real area (vidax_core.vae.tile_area.TileArea) against plain index arithmetic: the clamped edge
fill, the zero mask and the key mask, at the program's resolution, upsampled and downsampled."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from vidax_core.vae.tile_area import TileArea

ODD = [[3, 2], [4, 4], [1, 3]]  # per batch entry: real rows and columns of a 4 x 4 input
EVEN = [[2, 4], [4, 2], [2, 2]]  # whole at half resolution too


@pytest.mark.parametrize("side,real", [(4, ODD), (8, ODD), (2, EVEN)], ids=["input", "upsampled", "downsampled"])
def test_area_at_a_resolution_fills_masks_and_keys_by_index(side, real):
    """At ``side`` x ``side`` (the 4 x 4 input scaled): padded pixel (i, j) holds real pixel (min(i, r - 1),
    min(j, c - 1)); the masks are the real rectangle (keys per frame, frame-major)."""
    x = np.random.default_rng(0).standard_normal((3, 2, side, side, 5)).astype(np.float32)

    def all_four(a, xx):
        area = TileArea((4, 4), a)
        return area.fill_edges(xx), area.spatial_mask(xx), area.mask(xx), area.key_mask(xx)

    filled, mask, zeroed, keys = map(np.asarray, jax.jit(all_four)(np.array(real, np.int32), x))
    idx = np.arange(side)
    for b, (r, c) in enumerate(np.array(real) * side // 4):
        np.testing.assert_array_equal(filled[b], x[b][:, np.minimum(idx, r - 1)][:, :, np.minimum(idx, c - 1)])
        inside = (idx[:, None] < r) & (idx[None, :] < c)
        np.testing.assert_array_equal(mask[b, 0, :, :, 0], inside)
        np.testing.assert_array_equal(zeroed[b], x[b] * inside[None, :, :, None])
        np.testing.assert_array_equal(keys[b], np.tile(inside.reshape(-1), x.shape[1]))
