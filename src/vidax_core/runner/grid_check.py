"""The latent grid against the denoiser's own limits, before any weight loads: one line naming the key to change.

A size or frame count can pass every rule of the family's ``check_run`` (multiples of the VAE and patch factors)
and still be one the denoiser cannot take: its latent grid is not a multiple of the patch the checkpoint's config
sets, or it has more tokens along an axis than the position embedding covers (a RoPE table's length, a learned
table's fixed size: ``DitBuild.grid_limit``). Each family states its numbers; this module checks them for every
entry point (``vidax run`` and its dry run, ``vidax.load`` and its calls, ``vidax serve``'s requests) and names the
nearest value of ``sampling.num_frames`` / ``height`` / ``width`` that fits, found through the family's own
``vae_latent_shape`` and ``check_run`` (no formula of the VAE is repeated here).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

from vidax_core.errors import UserError

# grid axis -> (the sampling key that sets it, what it is called)
AXES = (("num_frames", "frames"), ("height", "height"), ("width", "width"))
SEARCH = 512  # values tried for a suggestion (on each side of the given one, or from a limit's edge)
TOP = 1 << 16  # above every size and frame count the config's bounds allow


def check_grid(spec: Any, ckpt: Any, plugins: Any, builds: Sequence[Any], run: Any, grid: Sequence[int]) -> None:
    """Raise a :class:`UserError` when ``grid`` (the latent (frames, height, width) of ``run``) does not fit every
    denoiser of ``builds``: a patch that does not divide it, or more (or other) tokens than ``grid_limit``."""
    latent = _latent_of(spec, ckpt, plugins, run)
    for build in builds:
        patch = tuple(build.patch_size or (1, 1, 1))
        for axis, (key, name) in enumerate(AXES):
            p = patch[axis]
            if grid[axis] % p and not build.pads_to_patch:
                fits = lambda g, a=axis, p=p: g[a] % p == 0  # noqa: E731
                raise UserError(f"sampling.{key}={getattr(run.sampling, key)} makes a latent {name} of {grid[axis]}, "
                                f"which the denoiser's patch of {p} along it (patch_size in {build.component}/"
                                f"config.json) does not divide{_use(latent, spec, plugins, run, key, fits)}")
        limit = build.grid_limit
        if limit is None:
            continue
        for axis, (key, name) in enumerate(AXES):
            most = limit.most[axis]
            if most is None:
                continue
            tokens = grid[axis] // patch[axis]
            value = getattr(run.sampling, key)
            if limit.exact and tokens != most:
                reach = lambda g, a=axis, p=patch[axis], m=most: g[a] // p >= m  # noqa: E731
                fits = lambda g, a=axis, p=patch[axis], m=most: g[a] // p == m  # noqa: E731
                start = _first(latent, key, reach)
                raise UserError(f"sampling.{key}={value} makes {tokens} tokens along the {name}; {limit.what} fixes "
                                f"it at {most}{_use(latent, spec, plugins, run, key, fits, start, +1)}")
            if tokens > most:
                over = lambda g, a=axis, p=patch[axis], m=most: g[a] // p > m  # noqa: E731
                fits = lambda g, a=axis, p=patch[axis], m=most: g[a] // p <= m and g[a] % p == 0  # noqa: E731
                start = _first(latent, key, over)
                raise UserError(f"sampling.{key}={value} makes {tokens} tokens along the {name}, more than the {most} "
                                f"of {limit.what}{_use(latent, spec, plugins, run, key, fits, start - 1 if start else None, -1)}")


def _latent_of(spec: Any, ckpt: Any, plugins: Any, run: Any) -> Callable[[str, int], tuple[int, ...] | None]:
    """``(key, value) -> the latent grid of run with sampling.<key>=value`` (None where the plugin gives none)."""

    def latent(key: str, value: int) -> tuple[int, ...] | None:
        r = dataclasses.replace(run, sampling=dataclasses.replace(run.sampling, **{key: value}))
        try:
            g = plugins.call("vae_latent_shape", spec, ckpt=ckpt, run=r)
        except Exception:  # noqa: BLE001 - a value the plugin's formula cannot take is simply no suggestion
            return None
        return tuple(int(v) for v in g) if g is not None else None

    return latent


def _first(latent: Callable, key: str, reached: Callable) -> int | None:
    """The smallest value of ``key`` whose grid has ``reached`` (a property that, once true, stays true as the
    value grows), by bisection; None when no value up to ``TOP`` has it or the plugin gives no grid."""
    lo, hi = 1, TOP
    g = latent(key, hi)
    if g is None or not reached(g):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        g = latent(key, mid)
        if g is None:
            return None
        if reached(g):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _use(latent: Callable, spec: Any, plugins: Any, run: Any, key: str, fits: Callable, start: int | None = None,
         step: int = 0) -> str:
    """``": use sampling.<key>=N"`` with the value nearest ``start`` (default: the run's own) in the direction of
    ``step`` (0: both ways) whose grid ``fits`` and that the family's checks accept; ``""`` when none is near."""
    value = int(getattr(run.sampling, key))
    if start is None:
        start, step = value, 0
        order = [v for d in range(1, SEARCH + 1) for v in (value - d, value + d)]
    else:
        order = [start + step * d for d in range(SEARCH)]
    for v in order:
        if v < 1 or v > TOP:
            continue
        g = latent(key, v)
        if g is None or not fits(g):
            continue
        r = dataclasses.replace(run, sampling=dataclasses.replace(run.sampling, **{key: v}))
        try:
            if plugins.call("check_run", spec, run=r):
                continue
        except Exception:  # noqa: BLE001 - not a value to suggest
            continue
        return f": use sampling.{key}={v}" + (" or less" if step < 0 else "")
    return f": change sampling.{key}"
