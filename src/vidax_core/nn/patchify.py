"""3-D patchify / unpatchify between video latents and token sequences.

A latent video (B, C, F, H, W) — or CogVideoX's (B, F, C, H, W), ``layout="fchw"``, or a channel-last
(B, F, H, W, C), ``layout="fhwc"`` (Kandinsky 5) — is cut into non-overlapping
(pt, ph, pw) patches. Tokens are always in row-major (f, h, w) order; the features of one token are the patch's
C * pt * ph * pw values flattened in an ``order`` given as a string over ``c t h w`` (slowest first):

* ``"thwc"`` — Wan (its conv3d patch kernel flattened channel-last; also its output head);
* ``"cthw"`` — LTX-Video's ``_pack_latents``, HunyuanVideo's and CogVideoX's heads, Cosmos' patch embed;
* ``"hwtc"`` — Cosmos' output head (``unflatten(p_h, p_w, p_t, C)``).

(Kandinsky 5's patch embedding is ``"thwc"`` and its output head ``"cthw"``, on channel-last latents.)

A conv3d patch embedding with stride == kernel is then ``patchify(x) @ kernel`` with the kernel flattened in the
same order. Both functions are pure reshapes/transposes (exact, any dtype).
"""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp

_PATCH_AXIS = {"c": 1, "t": 3, "h": 5, "w": 7}  # in (B, C, f, pt, h, ph, w, pw)


def _check_order(order: str) -> None:
    if sorted(order) != sorted("cthw"):
        raise ValueError(f"patch order must be a permutation of 'cthw', got {order!r}")


def _check_layout(layout: str) -> None:
    if layout not in _TO_CFHW:
        raise ValueError(f"latent layout must be 'cfhw' (B, C, F, H, W), 'fchw' (B, F, C, H, W) or 'fhwc' "
                         f"(B, F, H, W, C), got {layout!r}")


# layout -> (to (B, C, F, H, W), back from it)
_TO_CFHW = {
    "cfhw": (lambda x: x, lambda x: x),
    "fchw": (lambda x: jnp.swapaxes(x, 1, 2), lambda x: jnp.swapaxes(x, 1, 2)),
    "fhwc": (lambda x: jnp.moveaxis(x, -1, 1), lambda x: jnp.moveaxis(x, 1, -1)),
}


def patchify(
    x: jax.Array, patch: Sequence[int], *, order: str = "thwc", layout: str = "cfhw"
) -> tuple[jax.Array, tuple[int, int, int]]:
    """(B, C, F, H, W) (or the ``layout`` the module docstring names) -> tokens (B, f*h*w, C*pt*ph*pw) and the
    token grid (f, h, w). F, H, W must be divisible by the patch."""
    _check_order(order)
    _check_layout(layout)
    x = _TO_CFHW[layout][0](x)
    b, c, f, h, w = x.shape
    pt, ph, pw = (int(p) for p in patch)
    if f % pt or h % ph or w % pw:
        raise ValueError(f"latent shape {(f, h, w)} is not divisible by the patch {(pt, ph, pw)}")
    grid = (f // pt, h // ph, w // pw)
    y = x.reshape(b, c, grid[0], pt, grid[1], ph, grid[2], pw)
    y = y.transpose((0, 2, 4, 6) + tuple(_PATCH_AXIS[a] for a in order))
    return y.reshape(b, grid[0] * grid[1] * grid[2], c * pt * ph * pw), grid


def unpatchify(
    tokens: jax.Array,
    grid: Sequence[int],
    patch: Sequence[int],
    *,
    order: str = "thwc",
    layout: str = "cfhw",
) -> jax.Array:
    """Inverse of :func:`patchify`: tokens (B, f*h*w, C*pt*ph*pw) -> (B, C, F, H, W) (or ``layout``'s)."""
    _check_order(order)
    _check_layout(layout)
    b, s, k = tokens.shape
    gf, gh, gw = (int(g) for g in grid)
    pt, ph, pw = (int(p) for p in patch)
    if s != gf * gh * gw or k % (pt * ph * pw):
        raise ValueError(f"tokens {tuple(tokens.shape)} do not match grid {(gf, gh, gw)} and patch {(pt, ph, pw)}")
    c = k // (pt * ph * pw)
    size = {"c": c, "t": pt, "h": ph, "w": pw}
    y = tokens.reshape((b, gf, gh, gw) + tuple(size[a] for a in order))
    # y axes: 0 b, 1 f, 2 h, 3 w, 4.. the patch axes in `order`; bring them to (B, C, f, pt, h, ph, w, pw)
    pos = {a: 4 + i for i, a in enumerate(order)}
    y = y.transpose(0, pos["c"], 1, pos["t"], 2, pos["h"], 3, pos["w"])
    return _TO_CFHW[layout][1](y.reshape(b, c, gf * pt, gh * ph, gw * pw))
