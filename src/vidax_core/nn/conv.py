"""Channel-last convolutions with torch's semantics: :class:`Conv` (any number of spatial axes, explicit per-axis
padding, stride, dilation, groups) and :class:`ConvTranspose1d` (torch ``nn.ConvTranspose1d``).

Audio nets (vocoders, spectrogram VAEs) pad asymmetrically (causal axes), dilate, and upsample with transposed
convolutions, which the video VAEs' causal 3-D conv does not cover. Inputs are (B, *spatial, C).

Kernel layouts are those of :mod:`vidax_core.io.convert`: a conv's kernel is ``conv(torch weight)``, (*k, in / groups,
out); a transposed conv's is ``conv_transpose(torch weight)``, (k, in, out) un-flipped.
"""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
from flax import nnx


def same_padding(kernel: int, dilation: int = 1) -> tuple[int, int]:
    """torch ``padding="same"``: ``dilation * (kernel - 1)`` in total, the odd one on the right."""
    total = dilation * (kernel - 1)
    return total // 2, total - total // 2


def conv_nd(x: jax.Array, kernel: jax.Array, bias: jax.Array | None, *, stride: Sequence[int],
            padding: Sequence[tuple[int, int]], dilation: Sequence[int], groups: int = 1) -> jax.Array:
    """Zero-padded cross-correlation of channel-last ``x`` with ``kernel`` (*k, in / groups, out), fp32 accumulation,
    result in ``x``'s dtype."""
    n = kernel.ndim - 2
    spatial = "DHW"[-n:] if n <= 3 else None
    if spatial is None:
        raise ValueError(f"conv_nd: {n} spatial axes are not supported")
    y = jax.lax.conv_general_dilated(
        x, kernel.astype(x.dtype), window_strides=tuple(stride), padding=tuple(padding),
        rhs_dilation=tuple(dilation), dimension_numbers=(f"N{spatial}C", f"{spatial}IO", f"N{spatial}C"),
        feature_group_count=groups, preferred_element_type=jnp.float32)
    if bias is not None:
        y = y + bias.astype(jnp.float32)
    return y.astype(x.dtype)


class Conv(nnx.Module):
    """torch ``nn.ConvNd`` on channel-last input with explicit ``(before, after)`` zero padding per spatial axis
    (torch's symmetric ``padding=p`` is ``((p, p),) * n``; a causal axis is ``(k - 1, 0)``).

    Parameters ``kernel`` (*k, in / groups, out) and ``bias`` (out,) (None when ``bias=False``), zeros until loaded.
    """

    def __init__(self, cin: int, cout: int, kernel: Sequence[int], *, stride: Sequence[int] | int = 1,
                 padding: Sequence[tuple[int, int]] | None = None, dilation: Sequence[int] | int = 1,
                 groups: int = 1, bias: bool = True, dtype=jnp.float32):
        kernel = tuple(kernel)
        n = len(kernel)
        self.stride = (stride,) * n if isinstance(stride, int) else tuple(stride)
        self.dilation = (dilation,) * n if isinstance(dilation, int) else tuple(dilation)
        self.padding = tuple((0, 0) for _ in kernel) if padding is None else tuple(tuple(p) for p in padding)
        self.groups = groups
        if cin % groups or cout % groups:
            raise ValueError(f"Conv: {cin} -> {cout} channels do not split into {groups} groups")
        self.kernel = nnx.Param(jnp.zeros((*kernel, cin // groups, cout), dtype))
        self.bias = nnx.Param(jnp.zeros((cout,), dtype)) if bias else None

    def __call__(self, x: jax.Array) -> jax.Array:
        return conv_nd(x, self.kernel[...], None if self.bias is None else self.bias[...], stride=self.stride,
                       padding=self.padding, dilation=self.dilation, groups=self.groups)


class ConvTranspose1d(nnx.Module):
    """torch ``nn.ConvTranspose1d(cin, cout, k, stride, padding, output_padding)`` on (B, L, C): output length
    ``(L - 1) * stride - 2 * padding + k + output_padding``.

    Computed as the equivalent forward conv: the input dilated by ``stride``, padded with ``k - 1 - padding`` zeros
    before and ``k - 1 - padding + output_padding`` after, correlated with the time-flipped kernel. Parameters
    ``kernel`` (k, in, out) (torch's (in, out, k) through ``vidax_core.io.convert.conv_transpose``) and ``bias``.
    """

    def __init__(self, cin: int, cout: int, kernel: int, *, stride: int = 1, padding: int = 0,
                 output_padding: int = 0, bias: bool = True, dtype=jnp.float32):
        if padding > kernel - 1:
            raise ValueError(f"ConvTranspose1d: padding {padding} exceeds kernel - 1 = {kernel - 1}")
        self.k, self.stride, self.pad, self.output_padding = kernel, stride, padding, output_padding
        self.kernel = nnx.Param(jnp.zeros((kernel, cin, cout), dtype))
        self.bias = nnx.Param(jnp.zeros((cout,), dtype)) if bias else None

    def __call__(self, x: jax.Array) -> jax.Array:
        lo = self.k - 1 - self.pad
        y = jax.lax.conv_general_dilated(
            x, self.kernel[...][::-1].astype(x.dtype), window_strides=(1,),
            padding=((lo, lo + self.output_padding),), lhs_dilation=(self.stride,),
            dimension_numbers=("NWC", "WIO", "NWC"), preferred_element_type=jnp.float32)
        if self.bias is not None:
            y = y + self.bias[...].astype(jnp.float32)
        return y.astype(x.dtype)
