"""Decoding LTX-2.x video latents with the diffusion decoder (diffusers ``LTX2VideoDiffusionDecodePipeline``).

:func:`decode` is the pipeline's call with ``denormalize=False`` on what ``LTX2Pipeline(output_type="latent")``
returns: raw latents (B, 128, F, h, w) -> pixels (B, 3, frames, H, W) in [-1, 1] (the caller maps them to [0, 1]).
Each stage is one compiled unit called from Python (its blocks a ``lax.scan``), so the compile time is that of one
block per stage and the activations of a stage are freed before the next runs.

Noise: the decoder draws the pixels it denoises. ``noise(k, shape)`` gives the ``k``-th draw in the reference's
order (one draw for an untiled decode: the (B, 3, frames, H, W) canvas); the run passes the ``decoder_k`` arrays of
an ``.npz`` ``sampling.initial_noise`` or its seeded draws (:func:`noise_source`).

The component is the checkpoint's ``diffusion_decoder/`` folder (``config.json`` + safetensors, diffusers' names).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.errors import UserError
from vidax_core.io.convert import convert
from vidax_core.nn.state import abstract_model, materialize

from .ltx2_diffusion_decoder import (DECODER_IGNORED, DECODER_RULES, LTX2DiffusionDecoder,
                                     LTX2DiffusionDecoderConfig, diffusion_step, pixel_shape, stage)

COMPONENT = "diffusion_decoder"
NOISE_PREFIX = "decoder_"

Noise = Callable[[int, tuple[int, ...]], np.ndarray]


def load(cfg: LTX2DiffusionDecoderConfig, tensors: Mapping[str, Any], *, put=None) -> LTX2DiffusionDecoder:
    """A diffusers ``LTX2VideoDiffusionDecoderModel`` state dict -> a live decoder; every key must be used."""
    graphdef, abstract, flat = abstract_model(lambda: LTX2DiffusionDecoder(cfg))
    values = convert(tensors, DECODER_RULES, flat, component=COMPONENT, ignore=DECODER_IGNORED)
    return materialize(graphdef, abstract, values, put=put)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _stage(graphdef, index, state, x):
    return stage(nnx.merge(graphdef, state), index, x)


@functools.partial(jax.jit, static_argnums=(0,))
def _step(graphdef, state, context, x_t, t):
    return diffusion_step(nnx.merge(graphdef, state), context, x_t, t)


def timesteps(n: int) -> np.ndarray:
    """The decoder's own schedule: ``linspace(1, 1/N, N)`` in float32."""
    return np.linspace(1.0, 1.0 / n, n, dtype=np.float32)


def context_volume(model: LTX2DiffusionDecoder, latents: Any, on_stage: Callable[[], None] | None = None) -> jax.Array:
    """Stages 1-4: raw latents (B, C, F, h, w) -> the context (B, T5, H5, W5, C5) stage 5 is conditioned on."""
    graphdef, state = nnx.split(model)
    x = jnp.asarray(latents)
    for i in range(len(model.cfg.decoder_upsample_strides)):
        x = _stage(graphdef, i, state, x)
        if on_stage is not None:
            on_stage()
    return x


def denoise(model: LTX2DiffusionDecoder, context: jax.Array, x_t: Any, steps: int) -> jax.Array:
    """Stage 5 from the noise ``x_t`` (B, 3, T, H, W): one x0 prediction (one step, ``x0`` model), else Euler steps
    over :func:`timesteps` (an ``x0`` prediction converted to a velocity, ``(x - x0) / t``)."""
    graphdef, state = nnx.split(model)
    cfg = model.cfg
    b = context.shape[0]
    ts = timesteps(steps)
    x = jnp.asarray(x_t, jnp.dtype(cfg.dtype))
    if steps == 1 and cfg.decoder_model_output_type == "x0":
        return _step(graphdef, state, context, x, jnp.full((b,), ts[0], jnp.float32))
    for i, t in enumerate(ts):
        t_next = ts[i + 1] if i + 1 < steps else np.float32(0.0)
        out = _step(graphdef, state, context, x, jnp.full((b,), t, jnp.float32)).astype(jnp.float32)
        xf = x.astype(jnp.float32)
        if cfg.decoder_model_output_type == "x0":
            out = (xf - out) / t
        x = (xf - (t - t_next) * out).astype(x.dtype)
    return x


def decode(model: LTX2DiffusionDecoder, latents: Any, noise: Noise, *, steps: int | None = None,
           on_stage: Callable[[], None] | None = None) -> np.ndarray:
    """Raw latents (B, C, F, h, w) -> pixels (B, 3, frames, H, W) float32 in the model's [-1, 1] range."""
    cfg = model.cfg
    steps = int(steps or cfg.decoder_num_inference_steps)
    context = context_volume(model, latents, on_stage)
    shape = pixel_shape(cfg, context.shape[0], context.shape[1:4])
    x_t = np.asarray(noise(0, shape), np.float32)
    if x_t.shape != shape:
        raise UserError(f"the diffusion decoder's noise draw 0 must be {shape}, got {x_t.shape}")
    return np.asarray(denoise(model, context, x_t, steps), np.float32)


def draw_problems(path: str | None, shapes: list[tuple[int, ...]]) -> list[str]:
    """Before anything loads: when the ``.npz`` at ``path`` replays the decoder's draws, it holds one
    ``decoder_k`` of each expected shape (``shapes``, in draw order) and no other."""
    from vidax_core.io.noise import npz_shapes

    found = {k: v for k, v in (npz_shapes(path) if path else {}).items() if k.startswith(NOISE_PREFIX)}
    if f"{NOISE_PREFIX}0" not in found:
        return []
    want = {f"{NOISE_PREFIX}{k}": tuple(s) for k, s in enumerate(shapes)}
    for name, shape in want.items():
        if name not in found:
            return [f"sampling.initial_noise {path} holds {NOISE_PREFIX}0 but not {name}: the diffusion decoder "
                    f"draws {len(want)} times here, give {', '.join(want)}"]
        if tuple(found[name]) != shape:
            return [f"sampling.initial_noise {path}: {name} has shape {tuple(found[name])}, this run's decoder draws "
                    f"{shape} (batch, 3, frames, height, width)"]
    extra = sorted(set(found) - set(want))
    return [f"sampling.initial_noise {path} holds {', '.join(extra)}, but the diffusion decoder draws only "
            f"{', '.join(want)} here"] if extra else []


def noise_source(seed: int, path: str | None = None) -> Noise:
    """The decoder's draws: member ``decoder_k`` of the ``.npz`` at ``path`` (the run's ``sampling.initial_noise``)
    for draw ``k`` when the archive holds ``decoder_0``, else normal draws from ``fold_in(key(seed), 100 + k)``."""
    from vidax_core.io.noise import load_npz_draw, npz_shapes

    replay = path is not None and f"{NOISE_PREFIX}0" in npz_shapes(path)

    def draw(k: int, shape: tuple[int, ...]) -> np.ndarray:
        if replay:
            arr = load_npz_draw(path, f"{NOISE_PREFIX}{k}", shape)
            if arr is None:
                raise UserError(f"sampling.initial_noise {path} holds {NOISE_PREFIX}0 but not {NOISE_PREFIX}{k}: "
                                f"the diffusion decoder draws {NOISE_PREFIX}0, {NOISE_PREFIX}1, ... in order, "
                                "give every draw or none")
            return arr
        key = jax.random.fold_in(jax.random.key(seed), 100 + k)
        return np.asarray(jax.random.normal(key, shape, jnp.float32))
    return draw


__all__ = ["COMPONENT", "NOISE_PREFIX", "context_volume", "decode", "denoise", "load", "noise_source", "timesteps"]
