"""A padded tile's real area (vidax_core.vae.tile_area.TileArea) against plain index arithmetic: the clamped edge
fill, the reflect fill, the zero mask and the key mask, at the program's resolution, upsampled and downsampled; and
a padded conv of each padding mode against the unpadded tile's."""

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


def _mirror(side: int, real: int, pad: int) -> np.ndarray:
    """Row (or column) ``i`` of the reflect-filled tile: the padded ``rows <= i < rows + pad`` mirror about the last
    real one; every other index stays."""
    idx = np.arange(side)
    near = (idx >= real) & (idx < real + pad)
    return np.where(near, np.maximum(2 * (real - 1) - idx, 0), idx)


@pytest.mark.parametrize("side,real,pad", [(4, ODD, 1), (8, ODD, 1), (2, EVEN, 1),
                                           (4, [[3, 2], [4, 4], [3, 3]], (2, 1))],
                         ids=["input", "upsampled", "downsampled", "pad-2x1"])
def test_reflect_fill_mirrors_the_padding_reach_by_index(side, real, pad):
    """Padded pixel (i, j) within ``pad`` of the real edge holds real pixel (2 (r - 1) - i, 2 (c - 1) - j) (either
    index kept where it is real or beyond the reach); a side without padding is untouched."""
    x = np.random.default_rng(1).standard_normal((3, 2, side, side, 5)).astype(np.float32)
    got = np.asarray(jax.jit(lambda a, xx: TileArea((4, 4), a).fill_reflect(xx, pad))(np.array(real, np.int32), x))
    ph, pw = (pad, pad) if isinstance(pad, int) else pad
    for b, (r, c) in enumerate(np.array(real) * side // 4):
        np.testing.assert_array_equal(got[b], x[b][:, _mirror(side, r, ph)][:, :, _mirror(side, c, pw)])


@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate"])
def test_padded_conv_equals_the_unpadded_tile_on_its_real_area(mode):
    """A 3 x 3 conv of each padding mode over a 6 x 6 tile with ``area`` gives, on each entry's real area, the conv
    of that entry's unpadded tile: the fill stands in for the conv's own padding at a padded real edge, and at a
    side with no padding the conv's own border padding is the real edge's."""
    from vidax_core.vae.causal_conv import CausalConv3d

    rng = np.random.default_rng(2)
    conv = CausalConv3d(4, 3, (1, 3, 3), spatial_padding=mode)
    conv.kernel[...] = rng.standard_normal(conv.kernel.shape).astype(np.float32)
    conv.bias[...] = rng.standard_normal(conv.bias.shape).astype(np.float32)
    real = np.array([[4, 3], [6, 6], [2, 6]], np.int32)
    x = rng.standard_normal((3, 2, 6, 6, 4)).astype(np.float32)
    padded = x.copy()
    for b, (r, c) in enumerate(real):  # garbage in the padding, which must not reach the real area
        padded[b, :, r:] = padded[b, :, :, c:] = 1e3
    got = np.asarray(conv(padded, TileArea((6, 6), real)))
    for b, (r, c) in enumerate(real):
        alone = np.asarray(conv(x[b : b + 1, :, :r, :c]))[0]
        np.testing.assert_allclose(got[b, :, :r, :c], alone, rtol=1e-5, atol=1e-5)
