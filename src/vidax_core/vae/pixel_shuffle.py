"""3-D pixel (un)shuffle on channel-last video ``(B, T, H, W, C)``: the space-to-depth / depth-to-space moves
of VAEs that resample by packing ``(ft, fh, fw)`` neighbourhoods into channels instead of striding or
interpolating (DC-AE style down/up sampling).

The packed channel order differs between references, so it is explicit: ``factor_major=True`` packs channel
``((i_t * fh + i_h) * fw + i_w) * C + c`` (the factors vary slowest, as HunyuanVideo-1.5's
``_dcae_downsample_rearrange``), ``factor_major=False`` packs ``((c * ft + i_t) * fh + i_h) * fw + i_w`` (the
channel varies slowest, as LTX-Video's ``rearrange(..., "b c (f p1) (h p2) (w p3) -> b (c p1 p2 p3) f h w")``).
"""

from __future__ import annotations

from typing import Sequence

import jax


def space_to_depth(x: jax.Array, factors: Sequence[int], *, factor_major: bool = True) -> jax.Array:
    """(B, T*ft, H*fh, W*fw, C) -> (B, T, H, W, ft*fh*fw*C), channels packed in the order ``factor_major`` names."""
    ft, fh, fw = (int(f) for f in factors)
    b, t, h, w, c = x.shape
    y = x.reshape(b, t // ft, ft, h // fh, fh, w // fw, fw, c)
    y = y.transpose(0, 1, 3, 5, 2, 4, 6, 7) if factor_major else y.transpose(0, 1, 3, 5, 7, 2, 4, 6)
    return y.reshape(b, t // ft, h // fh, w // fw, ft * fh * fw * c)


def depth_to_space(x: jax.Array, factors: Sequence[int], *, factor_major: bool = True) -> jax.Array:
    """The inverse of :func:`space_to_depth`: (B, T, H, W, ft*fh*fw*C) -> (B, T*ft, H*fh, W*fw, C)."""
    ft, fh, fw = (int(f) for f in factors)
    b, t, h, w, cc = x.shape
    c = cc // (ft * fh * fw)
    if factor_major:
        y = x.reshape(b, t, h, w, ft, fh, fw, c).transpose(0, 1, 4, 2, 5, 3, 6, 7)
    else:
        y = x.reshape(b, t, h, w, c, ft, fh, fw).transpose(0, 1, 5, 2, 6, 3, 7, 4)
    return y.reshape(b, t * ft, h * fh, w * fw, c)
