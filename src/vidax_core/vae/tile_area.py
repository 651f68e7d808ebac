"""The real area of a spatial tile padded up to its program's tile shape, at any layer's resolution.

:class:`vidax_core.vae.tiling.TiledStream` with ``pad_tiles`` pads a smaller edge tile (at the bottom and right)
to the tile shape, so that tiles of every shape run one compiled program, and passes each batch entry's real rows
and columns. For the real area to come out exactly as the unpadded tile's, every layer that mixes pixels must see
the padding as that tile alone would: a zero-padded conv wants zeros there (:meth:`TileArea.mask`, Wan), an
edge-replicating conv wants the last real row / column repeated (:meth:`TileArea.fill_edges`, HunyuanVideo-1.5), a
reflect-padded conv the real rows / columns mirrored about the last one (:meth:`TileArea.fill_reflect`, the LTX-2.0
decoder; :meth:`TileArea.conv_input` picks by torch's ``padding_mode``), and attention over the tile must not see
padded keys (:meth:`TileArea.key_mask`). Per-pixel layers (pointwise convs, per-pixel norms) need nothing; a norm
whose statistics span the tile (GroupNorm) cannot be padded this way.
"""

from __future__ import annotations

from typing import Sequence, Union

import jax
import jax.numpy as jnp


class TileArea:
    """``size``: (rows, columns) of the program's input; ``real``: (B, 2) int32 (traced), each batch entry's real
    rows and columns there. A layer at another resolution (an upsampled or downsampled activation, ``x`` of shape
    (B, T, H, W, C)) sees the area scaled by ``H / rows`` and ``W / columns``; a downsampling network needs real
    sizes that stay whole at every level (the caller's tiles are multiples of its compression)."""

    def __init__(self, size: Sequence[int], real: jax.Array):
        self.size = (int(size[0]), int(size[1]))
        self.real = real

    def at(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        """((B, 1), (B, 1)) int32: the real rows and columns at ``x``'s resolution."""
        (h0, w0), real = self.size, self.real.astype(jnp.int32)
        return real[:, 0:1] * x.shape[2] // h0, real[:, 1:2] * x.shape[3] // w0

    def _inside(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        """((B, H), (B, W)) bool: the real rows and the real columns of ``x``."""
        rows, cols = self.at(x)
        return (jnp.arange(x.shape[2], dtype=jnp.int32)[None, :] < rows,
                jnp.arange(x.shape[3], dtype=jnp.int32)[None, :] < cols)

    def spatial_mask(self, x: jax.Array) -> jax.Array:
        """(B, 1, H, W, 1) bool: True on the real area of ``x``."""
        rows, cols = self._inside(x)
        return (rows[:, :, None] & cols[:, None, :])[:, None, :, :, None]

    def mask(self, x: jax.Array) -> jax.Array:
        """``x`` zeroed outside the real area: what a zero-padded conv of the unpadded tile sees."""
        return jnp.where(self.spatial_mask(x), x, jnp.zeros((), x.dtype))

    def fill_edges(self, x: jax.Array) -> jax.Array:
        """``x`` with every padded pixel ``(i, j)`` replaced by the real pixel ``(min(i, rows - 1), min(j, cols -
        1))``: what an edge-replicating conv of the unpadded tile sees. Selects and one-hot sums only (no gather),
        exact in any dtype."""
        for axis, real in zip((2, 3), self.at(x)):
            x = jnp.where(_along(x, axis, lambda i: i < real), x, _line(x, axis, real - 1))
        return x

    def fill_reflect(self, x: jax.Array, pad: Union[int, Sequence[int]]) -> jax.Array:
        """``x`` with padded row ``i`` (``rows <= i < rows + pad``) replaced by the real row ``2 (rows - 1) - i``,
        then the same for columns (so a padded corner holds the real pixel mirrored in both): what a conv whose
        reflect padding is ``pad`` (an int, or (rows, columns)) sees of the unpadded tile; padded pixels further
        out are left as they are (no such kernel reaches them from a real pixel). A side with no padding is left
        to the conv's own reflection at the border, which then is the real edge; with ``pad`` 1 (a 3 x 3 kernel)
        any padded side holds the one mirrored row itself (a wider ``pad`` wants the padding ``pad`` thick or
        none). Selects and one-hot sums only (no gather), exact in any dtype. As torch's reflect padding, it wants
        more than ``pad`` real rows (one real row with ``pad`` 1 mirrors onto itself, as ``jnp.pad`` does)."""
        pads = (pad, pad) if isinstance(pad, int) else tuple(pad)
        for axis, real, p in zip((2, 3), self.at(x), pads):
            for k in range(int(p)):
                mirrored = _line(x, axis, jnp.maximum(real - 2 - k, 0))
                x = jnp.where(_along(x, axis, lambda i: i == real + k), mirrored, x)
        return x

    def conv_input(self, x: jax.Array, padding_mode: str, pad: Union[int, Sequence[int]]) -> jax.Array:
        """``x`` prepared for a conv that pads ``pad`` pixels by torch's ``padding_mode`` ("zeros", "reflect",
        "replicate"): its padded area holds what that conv sees around the unpadded tile."""
        if padding_mode == "zeros":
            return self.mask(x)
        if padding_mode == "reflect":
            return self.fill_reflect(x, pad)
        if padding_mode == "replicate":
            return self.fill_edges(x)
        raise ValueError(f"TileArea: padding mode {padding_mode!r} is not zeros / reflect / replicate")

    def key_mask(self, x: jax.Array) -> jax.Array:
        """(B, T * H * W) bool: which of ``x``'s tokens (frame-major, then rows, then columns) are real keys."""
        b, t, h, w = x.shape[:4]
        return jnp.broadcast_to(self.spatial_mask(x)[..., 0], (b, t, h, w)).reshape(b, t * h * w)


def tile_area(x: jax.Array, real: jax.Array | None) -> TileArea | None:
    """A padded tile program's area: its input ``x`` (B, T, H, W, C) and the (B, 2) real rows and columns that
    :class:`vidax_core.vae.tiling.TiledStream` passes (None: the input is a whole tile, no area)."""
    return None if real is None else TileArea(x.shape[2:4], real)


def _along(x: jax.Array, axis: int, test) -> jax.Array:
    """``test`` of the positions along ``axis`` (2: rows, 3: columns; ``test`` maps (1, N) positions against (B, 1)
    real sizes to (B, N)), shaped to broadcast against ``x`` (B, T, H, W, C)."""
    shape = [x.shape[0], 1, 1, 1, 1]
    shape[axis] = x.shape[axis]
    return test(jnp.arange(x.shape[axis], dtype=jnp.int32)[None, :]).reshape(shape)


def _line(x: jax.Array, axis: int, at: jax.Array) -> jax.Array:
    """Each batch entry's row (``axis`` 2) or column (3) at ``at`` ((B, 1) int32), kept as an axis of size 1: the
    sum of ``x`` where the position is ``at`` (a one-hot select, exact in any dtype)."""
    return jnp.sum(jnp.where(_along(x, axis, lambda i: i == at), x, jnp.zeros((), x.dtype)), axis=axis,
                   keepdims=True)
