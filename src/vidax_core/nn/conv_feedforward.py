"""SANA's convolutional feed-forward (diffusers ``GLUMBConv``, and ``GLUMBTempConv`` with its temporal conv), over
the tokens of a (frames, height, width) grid.

``x`` (B, F*H*W, dim) in (f, h, w) token order ->

* a 1x1 conv to ``2 hidden`` channels, a value and a gate half (``conv_inverted``, kernel (dim, 2, hidden): the
  halves on their own axis, so a tp shard holds matching value and gate channels), SiLU;
* a 3x3 depthwise conv per frame on each half (``conv_depth``, (3, 3, 1, 2, hidden), zero padding 1), computed
  as its 9 taps on the tokens shifted by the tap's offset and masked at the frame's edges;
* ``value * silu(gate)``, then a 1x1 conv without bias back to ``out`` channels (``conv_point``, row-parallel);
* with ``temporal_kernel`` (SANA-Video): ``y + conv_t(y)``, a conv of ``temporal_kernel`` frames (zero padding, no
  bias, channels ``out -> out``, ``conv_temp``) across frames at each spatial position, computed as its taps'
  matrices applied to the tokens shifted by whole frames.

Tensor parallelism is the FFN's Megatron split: the hidden channels (logical ``mlp``) live on their tp shard
through both depthwise convs (depthwise: no channel mixes), one all-reduce after ``conv_point``. Under sequence
parallelism the convs read neighbouring tokens across the sp split, whether it falls between frames or inside
one: both convs are written as shifts of the token sequence (a pad and a slice, which XLA's partitioner turns into
a halo exchange between neighbouring shards) rather than as windowed convolutions, whose partitioning over a
sequence-split axis inside the blocks' ``lax.scan`` came out wrong (measured: tp 2 x sp 2 and sp 4 off by tens
of percent). The
temporal conv's ``out x out`` kernel is replicated. Convolutions accumulate in float32 and return the input's
dtype. The key table of diffusers' module names is :func:`glumb_conv_rules`.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.io.convert import KeyRule, conv, linear
from vidax_core.nn.layers import Linear, param
from vidax_core.parallel.sharding import constrain

EMBED, MLP, BATCH, SEQ = "embed", "mlp", "batch", "seq"


def shifted(x: jax.Array, offset: int) -> jax.Array:
    """(B, S, C) tokens moved along the sequence: ``out[:, s] = x[:, s + offset]``, zero where that leaves it."""
    if offset > 0:
        return jnp.pad(x[:, offset:], ((0, 0), (0, offset), (0, 0)))
    if offset < 0:
        return jnp.pad(x[:, :offset], ((0, 0), (-offset, 0), (0, 0)))
    return x


class GLUMBConv(nnx.Module):
    """``dim -> 2 x hidden (value, gate) -> out`` on a token grid; see the module docstring. Parameters in
    ``dtype``: ``conv_inverted`` ((dim, 2, hidden) and bias (2, hidden)), ``conv_depth`` ((3, 3, 1, 2, hidden) and
    bias), ``conv_point`` (Linear, no bias) and, with ``temporal_kernel``, ``conv_temp`` ((k, 1, out, out))."""

    def __init__(self, dim: int, hidden: int, *, out: int | None = None, temporal_kernel: int | None = None,
                 dtype: Any = jnp.float32, rngs: nnx.Rngs):
        out = dim if out is None else out
        if temporal_kernel is not None and temporal_kernel % 2 != 1:
            raise ValueError(f"GLUMBConv: temporal_kernel={temporal_kernel} must be odd (symmetric zero padding)")
        self.hidden, self.temporal_kernel = hidden, temporal_kernel
        z = jnp.zeros
        self.conv_inverted = param(z((dim, 2, hidden), dtype), (EMBED, None, MLP))
        self.conv_inverted_bias = param(z((2, hidden), dtype), (None, MLP))
        self.conv_depth = param(z((3, 3, 1, 2, hidden), dtype), (None, None, None, None, MLP))
        self.conv_depth_bias = param(z((2, hidden), dtype), (None, MLP))
        self.conv_point = Linear(hidden, out, (MLP, EMBED), dtype=dtype, rngs=rngs, bias=False)
        self.conv_temp = (None if temporal_kernel is None else
                          param(z((temporal_kernel, 1, out, out), dtype), (None, None, None, EMBED)))

    def _depthwise(self, h: jax.Array, half: int, grid: tuple[int, int, int]) -> jax.Array:
        """3x3 depthwise conv of each frame of (B, F*H*W, hidden) tokens (the ``half``'s kernel: 0 value, 1 gate),
        zero-padded: the sum over the 9 taps of the tokens shifted by the tap's offset, masked where it leaves the
        frame's rows or columns."""
        _, hh, ww = grid
        s = h.shape[1]
        kernel = self.conv_depth[...][..., half, :].astype(jnp.float32)  # (3, 3, 1, hidden)
        rows, cols = (np.arange(s) // ww) % hh, np.arange(s) % ww
        out = jnp.broadcast_to(self.conv_depth_bias[...][half].astype(jnp.float32), h.shape)
        for i, dh in enumerate((-1, 0, 1)):
            for j, dw in enumerate((-1, 0, 1)):
                inside = (rows + dh >= 0) & (rows + dh < hh) & (cols + dw >= 0) & (cols + dw < ww)
                tap = shifted(h, dh * ww + dw).astype(jnp.float32) * inside.astype(np.float32)[None, :, None]
                out = out + tap * kernel[i, j, 0]
        return constrain(out.astype(h.dtype), (BATCH, SEQ, MLP))

    def __call__(self, x: jax.Array, grid: tuple[int, int, int]) -> jax.Array:
        """x (B, F*H*W, dim) tokens of the ``grid`` (f, h, w) (Python ints) -> (B, F*H*W, out) in x's dtype."""
        f, hh, ww = (int(v) for v in grid)
        if x.shape[1] != f * hh * ww:
            raise ValueError(f"GLUMBConv: {x.shape[1]} tokens are not a {f}x{hh}x{ww} grid")
        value = self._depthwise(self._inverted_half(x, 0), 0, (f, hh, ww))
        gate = self._depthwise(self._inverted_half(x, 1), 1, (f, hh, ww))
        y = constrain(self.conv_point(value * jax.nn.silu(gate)), (BATCH, SEQ, EMBED))
        if self.conv_temp is None:
            return y
        return constrain(y + self._temporal(y, f), (BATCH, SEQ, EMBED))

    def _inverted_half(self, x: jax.Array, half: int) -> jax.Array:
        """``silu(conv_inverted)`` of one half (0 value, 1 gate): (B, S, dim) -> (B, S, hidden) in x's dtype. One
        matmul per half, never a (B, S, 2, hidden) activation: a TPU lays an axis of 2 beside the last one out as a
        whole tile of 8 or 16 rows (up to 8x its bytes); SANA-Video's 480p block, with that activation, asked the
        v5e for 16.5 GB of temporaries."""
        w = self.conv_inverted[...][:, half].astype(x.dtype)
        a = jnp.einsum("bsc,ch->bsh", x, w, preferred_element_type=jnp.float32)
        a = jax.nn.silu(a + self.conv_inverted_bias[...][half].astype(jnp.float32)).astype(x.dtype)
        return constrain(a, (BATCH, SEQ, MLP))

    def _temporal(self, y: jax.Array, frames: int) -> jax.Array:
        """The conv of ``temporal_kernel`` frames at each spatial position, zero-padded: the sum over its taps of
        the tokens shifted by whole frames times the tap's (out, out) matrix."""
        k, w = self.temporal_kernel, self.conv_temp[...]
        hw = y.shape[1] // frames
        out = None
        for j in range(k):  # tap j reads frame t + j - k // 2
            src = shifted(y, (j - k // 2) * hw)
            part = jnp.einsum("bsc,cd->bsd", src, w[j, 0].astype(y.dtype), preferred_element_type=jnp.float32)
            out = part if out is None else out + part
        return out.astype(y.dtype)


def _inverted(w: np.ndarray) -> np.ndarray:
    """torch 1x1 conv weight (2 hidden, dim, 1, 1) -> (dim, 2, hidden): value half, then gate half."""
    two_h, dim = w.shape[:2]
    return np.transpose(w.reshape(2, two_h // 2, dim), (2, 0, 1))


def _depth(w: np.ndarray) -> np.ndarray:
    """torch depthwise weight (2 hidden, 1, 3, 3) -> (3, 3, 1, 2, hidden)."""
    k = conv(w)  # (3, 3, 1, 2 hidden)
    return k.reshape(*k.shape[:3], 2, k.shape[3] // 2)


def _pairs(b: np.ndarray) -> np.ndarray:
    """A (2 hidden,) bias -> (2, hidden)."""
    return b.reshape(2, b.shape[0] // 2)


def _pointwise(w: np.ndarray) -> np.ndarray:
    """torch 1x1 conv weight (out, in, 1, 1) -> Linear kernel (in, out)."""
    return linear(w.reshape(w.shape[0], w.shape[1]))


def glumb_conv_rules(src: str, dst: str, layer_group: int | None = None) -> list[KeyRule]:
    """Key rules from diffusers' ``GLUMBConv`` / ``GLUMBTempConv`` at regex ``src`` (``conv_inverted``,
    ``conv_depth``, ``conv_point``, ``conv_temp``) onto :class:`GLUMBConv` at ``dst``; ``layer_group`` for a block
    index in ``src``."""
    g = layer_group

    def at(name: str) -> str:
        return f"{dst}/{name}" if dst else name

    return [
        KeyRule(src + r"\.conv_inverted\.weight", at("conv_inverted"), _inverted, g),
        KeyRule(src + r"\.conv_inverted\.bias", at("conv_inverted_bias"), _pairs, g),
        KeyRule(src + r"\.conv_depth\.weight", at("conv_depth"), _depth, g),
        KeyRule(src + r"\.conv_depth\.bias", at("conv_depth_bias"), _pairs, g),
        KeyRule(src + r"\.conv_point\.weight", at("conv_point/kernel"), _pointwise, g),
        KeyRule(src + r"\.conv_temp\.weight", at("conv_temp"), conv, g),
    ]


__all__ = ["GLUMBConv", "glumb_conv_rules"]
