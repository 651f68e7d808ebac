"""Causal 3D convolution and the per-conv feature cache that lets a video VAE run in time chunks.

A causal conv with time kernel ``kt`` sees ``kt - 1`` frames of the past. Streaming a video chunk by chunk, each
such conv keeps the last :data:`CACHE_T` frames of its *input* and prepends them to the next chunk's input, so the
chunked result equals running the whole clip at once while memory stays one chunk deep. The cache is an explicit
list of arrays passed into and returned from one jitted call per chunk (no hidden state), so a chunk program is a
pure function and every chunk of the same shape reuses one compiled program.
"""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
from flax import nnx

from vidax_core.vae.tile_area import TileArea

#: Frames of input history each kernel-3 causal conv keeps between chunks.
CACHE_T = 2


#: Spatial padding modes: torch ``Conv3d(padding_mode=...)`` -> ``jnp.pad`` mode ("zeros" pads inside the conv).
SPATIAL_PADDING = {"zeros": "constant", "reflect": "reflect", "replicate": "edge"}


class CausalConv3d(nnx.Module):
    """Conv3d, time-VALID (the caller prepends cache / causal zeros), spatial 'same' padding: zeros by default, or
    torch's ``padding_mode`` ``"reflect"`` / ``"replicate"`` (``spatial_padding``).

    ``kernel`` (kt, kh, kw, in, out), ``bias`` (out,): the layout of ``vidax_core.io.convert.conv``. ``area``: ``x``
    is a spatial tile padded up to the program's tile shape; its padding first holds what this conv's padding shows
    the unpadded tile (:meth:`~vidax_core.vae.tile_area.TileArea.conv_input`), so the real area comes out as that
    tile's.
    """

    def __init__(self, cin: int, cout: int, kernel: Sequence[int] = (3, 3, 3), *, stride_t: int = 1,
                 spatial_padding: str = "zeros", dtype=jnp.float32):
        if spatial_padding not in SPATIAL_PADDING:
            raise ValueError(f"CausalConv3d: spatial_padding {spatial_padding!r} is not one of {list(SPATIAL_PADDING)}")
        kernel = tuple(kernel)
        self.kernel = nnx.Param(jnp.zeros((*kernel, cin, cout), dtype))
        self.bias = nnx.Param(jnp.zeros((cout,), dtype))
        self.kt = kernel[0]
        self.pad_h = (kernel[1] - 1) // 2
        self.pad_w = (kernel[2] - 1) // 2
        self.stride_t = stride_t
        self.spatial_padding = spatial_padding

    def __call__(self, x: jax.Array, area: TileArea | None = None) -> jax.Array:
        if area is not None and (self.pad_h or self.pad_w):
            x = area.conv_input(x, self.spatial_padding, (self.pad_h, self.pad_w))
        pad = ((0, 0), (self.pad_h, self.pad_h), (self.pad_w, self.pad_w))
        if self.spatial_padding != "zeros" and (self.pad_h or self.pad_w):
            x = jnp.pad(x, ((0, 0), *pad, (0, 0)), mode=SPATIAL_PADDING[self.spatial_padding])
            pad = ((0, 0), (0, 0), (0, 0))
        y = jax.lax.conv_general_dilated(
            x,
            self.kernel[...].astype(x.dtype),
            window_strides=(self.stride_t, 1, 1),
            padding=pad,
            dimension_numbers=("NDHWC", "DHWIO", "NDHWC"),
        )
        return y + self.bias[...].astype(x.dtype)


class FeatureCache:
    """Threads the per-conv feature cache through one chunk; the order of ``take``/``put`` is the cache layout.

    ``inputs`` is the previous chunk's ``outputs`` (``None`` on the first chunk: every conv sees causal zeros).

    One program for every chunk (the Wan VAEs' decoder): the first chunk then runs with zero caches through the
    later chunks' shapes, its extra frames at the end of the time axis (causal: they change no real frame).
    ``valid`` (a traced int32) is how many leading frames of the current activations are real; a conv's new cache is
    the last :data:`CACHE_T` real frames of its input. ``area`` (a :class:`~vidax_core.vae.tile_area.TileArea`): a
    spatial tile padded up to the program's tile shape, zeroed outside its real area before every spatial conv
    (:meth:`mask`), so each real output pixel sees exactly the zero padding that tile alone would have (tiles of
    every shape share one program).
    """

    def __init__(self, inputs: Sequence[jax.Array] | None, *, valid: jax.Array | None = None,
                 area: TileArea | None = None):
        self.inputs = inputs
        self.outputs: list[jax.Array] = []
        self.valid = valid
        self.area = area

    def take(self) -> jax.Array | None:
        return None if self.inputs is None else self.inputs[len(self.outputs)]

    def put(self, c: jax.Array) -> None:
        self.outputs.append(c)

    def last_frames(self, xx: jax.Array, fresh: int) -> jax.Array:
        """The last :data:`CACHE_T` real frames of ``xx`` = concat(cache, x) whose x holds ``fresh`` frames."""
        if self.valid is None:
            return xx[:, -CACHE_T:]
        real = jnp.minimum(self.valid, fresh).astype(jnp.int32)
        return jax.lax.dynamic_slice_in_dim(xx, xx.shape[1] - fresh - CACHE_T + real, CACHE_T, axis=1)

    def mask(self, x: jax.Array) -> jax.Array:
        """``x`` zeroed outside the tile's real area (unchanged without an area)."""
        return x if self.area is None else self.area.mask(x)

    def conv(self, conv: CausalConv3d, x: jax.Array, *, first_pad: str = "zeros") -> jax.Array:
        """Kernel-3 causal conv: prepend the cache, keep the last 2 (real) input frames.

        On the first chunk the missing past is ``first_pad``: ``"zeros"`` (Wan) or ``"first"``, copies of the
        first frame (CogVideoX's causal conv).
        """
        c = self.take()
        if c is None and first_pad == "first":
            c = jnp.repeat(x[:, :1], conv.kt - 1, axis=1)
        elif c is None:
            c = jnp.zeros((x.shape[0], conv.kt - 1) + x.shape[2:], x.dtype)
        xx = jnp.concatenate([c.astype(x.dtype), self.mask(x)], axis=1)
        self.put(self.last_frames(xx, x.shape[1]))
        return conv(xx)
