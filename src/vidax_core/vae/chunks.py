"""The jitted chunk programs of a VAE as :data:`vidax_core.vae.tiling.ChunkFn`\\ s, the channel-last layout they
run in and the posterior the encoders end in.

:func:`chunk_runner` is the one place a VAE's weights meet a unit of work: the program runs on the host's default
device, or, when :func:`vidax_core.vae.tiling.run_tiled` spreads units over several devices, with the weights
placed once per placement (replicated over the unit mesh) and the input placed like the unit group.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.errors import UserError
from vidax_core.vae.tiling import ChunkFn


def chunk_runner(vae: nnx.Module, program: Callable, *, streams: bool = True,
                 extra: Callable[[int], tuple] | None = None) -> ChunkFn:
    """A ChunkFn that runs ``program`` on one chunk, the input cast to ``vae.cfg.dtype``.

    ``streams``: the program carries a causal-conv cache, ``program(graphdef, state, x, caches, *extra,
    first=first) -> (y, caches)``; otherwise ``program(graphdef, state, x, *extra) -> y`` (the cache stays None).
    ``extra(batch)`` gives further arguments (e.g. a decode timestep) for a group of ``batch`` entries, placed like
    the weights. Under ``pad_tiles`` (:class:`vidax_core.vae.tiling.TiledStream`) the tile's ``area`` (B, 2) is
    placed like the input and passed on as ``program(..., area=area)``; without it the program is called as before.
    """
    graphdef, state = nnx.split(vae)
    placed: dict[Any, Any] = {}
    dtype = jnp.dtype(vae.cfg.dtype)

    def call(weights, x, caches, first, args, area):
        kw = {} if area is None else {"area": area}
        if streams:
            return program(graphdef, weights, x, caches, *args, first=first, **kw)
        return program(graphdef, weights, x, *args, **kw), None

    def run(x, caches, first, placement, area=None):
        data, where = placement
        args = extra(x.shape[0]) if extra is not None else ()
        if data is None:
            return call(state, jnp.asarray(x, dtype), caches, first, args, place_area(area, None))
        if where not in placed:
            placed[where] = jax.device_put(state, where)
        args = tuple(None if a is None else jax.device_put(a, where) for a in args)
        return call(placed[where], jax.device_put(np.asarray(x, dtype), data), caches, first, args,
                    place_area(area, data))

    return run


def place_area(area: Any, data: Any) -> Any:
    """A padded tile's (B, 2) real rows and columns as int32, placed like its input (``data`` None: the default
    device); None stays None."""
    return None if area is None else jax.device_put(np.asarray(area, np.int32), data)


def unit_runner(vae: nnx.Module, program: Callable, *, first_frames: int) -> ChunkFn:
    """A ChunkFn for a VAE whose chunks, the first included, run ONE program: ``program(graphdef, state, x, caches,
    first, area) -> (y, caches)`` with ``first`` a traced bool and ``area`` None or the (B, 2) real rows and columns
    of a padded tile (:class:`vidax_core.vae.tiling.TiledStream` with ``pad_tiles``). The first chunk's caches are
    zeros of the shapes the program gives (traced once per input shape, never compiled, placed from the host: no
    program besides the chunk's compiles); of its output only the ``first_frames`` leading frames are real, which
    the function states as its ``first_frames`` attribute (the tile runner keeps those on the host)."""
    graphdef, state = nnx.split(vae)
    placed: dict[Any, Any] = {}
    dtype = jnp.dtype(vae.cfg.dtype)
    shapes: dict[Any, Any] = {}

    def run(x, caches, first, placement, area=None):
        data, where = placement
        weights = state
        if data is None:
            x = jnp.asarray(x, dtype)
        else:
            if where not in placed:
                placed[where] = jax.device_put(state, where)
            weights = placed[where]
            x = jax.device_put(np.asarray(x, dtype), data)
        area = place_area(area, data)
        if caches is None:
            key = (x.shape, area is None)
            if key not in shapes:
                shapes[key] = jax.eval_shape(
                    lambda s, xx, a: program(graphdef, s, xx, None, np.bool_(True), a)[1], state, x, area)
            caches = [jax.device_put(np.zeros(sd.shape, sd.dtype), data) for sd in shapes[key]]
        return program(graphdef, weights, x, caches, np.bool_(first), area)

    run.first_frames = first_frames  # type: ignore[attr-defined]
    return run


def gaussian_posterior(moments: np.ndarray, channels: int) -> tuple[np.ndarray, np.ndarray]:
    """Channel-last encoder moments (..., 2 C) (or (..., C + 1): one shared log-variance) -> channel-first
    ``(mean, logvar)`` (B, C, T, H, W) float32, logvar clamped to [-30, 20] and broadcast to the mean's shape, as
    diffusers' ``DiagonalGaussianDistribution``."""
    mean = np.moveaxis(moments[..., :channels], -1, 1)
    logvar = np.moveaxis(np.clip(moments[..., channels:], -30.0, 20.0), -1, 1)
    return (np.ascontiguousarray(mean, np.float32),
            np.ascontiguousarray(np.broadcast_to(logvar, mean.shape), np.float32))


def channels_last(x: Any, channels: int, what: str, time: str = "T") -> np.ndarray:
    """A channel-first host array (B, C, T, H, W) as channel-last (B, T, H, W, C); a :class:`UserError` saying
    ``what`` the VAE wants (e.g. "HunyuanVideo VAE decode wants latents") when it is not 5-D with ``channels``."""
    a = np.asarray(x)
    if a.ndim != 5 or a.shape[1] != channels:
        raise UserError(f"{what} (B, {channels}, {time}, H, W), got {np.shape(x)}")
    return np.moveaxis(a, 1, -1)
