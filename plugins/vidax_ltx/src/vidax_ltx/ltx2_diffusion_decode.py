"""Decoding LTX-2.x video latents with the diffusion decoder (diffusers ``LTX2VideoDiffusionDecodePipeline``).

:func:`decode` is the pipeline's call with ``denormalize=False`` on what ``LTX2Pipeline(output_type="latent")``
returns: raw latents (B, 128, F, h, w) -> pixels (B, 3, frames, H, W) in [-1, 1] (the caller maps them to [0, 1]).
Each stage is one compiled unit called from Python (its blocks a ``lax.scan``), so the compile time is that of one
block per stage and the activations of a stage are freed before the next runs.

Placement (:class:`Placement`, from the run's ``parallel`` and ``offload`` settings): the weights are split over
``tp`` (attention heads and MLP width; the largest divisor of ``parallel.tp`` that divides every stage's heads),
the frame axis of every activation volume over ``sp`` (GSPMD inserts the exchanges the windows need), and with
``offload.enabled`` the weights stay in host memory and each unit's are placed just before it runs and dropped
after (a unit at a time on the device, as the DiT's offload streams its blocks).

Noise: the decoder draws the pixels it denoises. ``noise(k, shape)`` gives the ``k``-th draw in the reference's
order (one draw for an untiled decode: the (B, 3, frames, H, W) canvas); the run passes the ``decoder_k`` arrays of
an ``.npz`` ``sampling.initial_noise`` or its seeded draws (:func:`noise_source`).

The component is the checkpoint's ``diffusion_decoder/`` folder (``config.json`` + safetensors, diffusers' names).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.errors import UserError
from vidax_core.io.convert import convert
from vidax_core.nn.state import abstract_model, materialize
from vidax_core.parallel import sharding

from .ltx2_diffusion_decoder import (DECODER_IGNORED, DECODER_RULES, LTX2DiffusionDecoder,
                                     LTX2DiffusionDecoderConfig, diffusion_step, pixel_shape, stage, unit_parts)

COMPONENT = "diffusion_decoder"
NOISE_PREFIX = "decoder_"
RULES = {"batch": None, "seq": "sp", "heads": "tp", "mlp": "tp", "embed": None, "layers": None}

Noise = Callable[[int, tuple[int, ...]], np.ndarray]


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where the decoder runs: ``mesh`` (axes dp, sp, tp; None = one device) and whether its weights are streamed
    from host memory a unit at a time (``offload``)."""

    mesh: Any = None
    offload: bool = False

    def put(self, state: nnx.State) -> nnx.State:
        """Host (or device) parameters -> device arrays laid out by their logical axes."""
        if self.mesh is None:
            return jax.tree.map(jnp.asarray, state)
        specs = sharding.param_specs(state, RULES, self.mesh)
        flat = [(tuple(p), v.replace(sharding.put(np.asarray(v.get_value()),
                                                   jax.sharding.NamedSharding(self.mesh, specs[tuple(p)]))))
                for p, v in nnx.to_flat_state(state)]
        return nnx.from_flat_state(flat)

    def describe(self) -> str:
        if self.mesh is None:
            return "one device" + (", weights streamed a stage at a time" if self.offload else "")
        shape = dict(self.mesh.shape)
        return f"tp={shape['tp']} sp={shape['sp']}" + (", weights streamed a stage at a time" if self.offload else "")


def placement_for(cfg: LTX2DiffusionDecoderConfig, run: Any, devices=None) -> Placement:
    """The run's layout for the decoder: tp (reduced to a divisor of every stage's head count) x sp devices."""
    from vidax_core.parallel.mesh import MeshPlan, make_mesh

    heads = math.gcd(*(c // cfg.decoder_head_dim for c in cfg.decoder_stage_channels))
    tp = math.gcd(int(run.parallel.tp), heads)
    sp = int(run.parallel.sp)
    mesh = make_mesh(MeshPlan(dp=1, tp=tp, sp=sp), devices) if tp * sp > 1 else None
    return Placement(mesh, bool(run.offload.enabled))


def load(cfg: LTX2DiffusionDecoderConfig, tensors: Mapping[str, Any], placement: Placement = Placement()
         ) -> LTX2DiffusionDecoder:
    """A diffusers ``LTX2VideoDiffusionDecoderModel`` state dict -> the decoder, its parameters on the devices of
    ``placement`` (or as host arrays, to be streamed, when it offloads); every key must be used."""
    graphdef, abstract, flat = abstract_model(lambda: LTX2DiffusionDecoder(cfg))
    values = convert(tensors, DECODER_RULES, flat, component=COMPONENT, ignore=DECODER_IGNORED)
    if placement.offload:
        return materialize(graphdef, abstract, values, put=lambda _p, a: np.asarray(a))
    put = sharding.param_placer(abstract, placement.mesh, RULES) if placement.mesh is not None else None
    return materialize(graphdef, abstract, values, put=put)


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def _stage(cfg, graphdef, index, state, x):
    return stage(cfg, nnx.merge(graphdef, state), index, x)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _step(cfg, graphdef, state, context, x_t, t):
    return diffusion_step(cfg, nnx.merge(graphdef, state), context, x_t, t)


def _unit(model: LTX2DiffusionDecoder, unit: int, placement: Placement) -> tuple[Any, nnx.State]:
    graphdef, state = nnx.split(unit_parts(model, unit))
    return graphdef, placement.put(state) if placement.offload else state


def timesteps(n: int) -> np.ndarray:
    """The decoder's own schedule: ``linspace(1, 1/N, N)`` in float32."""
    return np.linspace(1.0, 1.0 / n, n, dtype=np.float32)


def context_volume(model: LTX2DiffusionDecoder, latents: Any, placement: Placement = Placement(),
                   on_stage: Callable[[], None] | None = None) -> jax.Array:
    """Stages 1-4: raw latents (B, C, F, h, w) -> the context (B, T5, H5, W5, C5) stage 5 is conditioned on."""
    cfg = model.cfg
    x = jnp.asarray(latents)
    with sharding.activate(placement.mesh, RULES):
        for i in range(len(cfg.decoder_upsample_strides)):
            graphdef, state = _unit(model, i, placement)
            x = _stage(cfg, graphdef, i, state, x)
            del state
            if on_stage is not None:
                on_stage()
    return x


def denoise(model: LTX2DiffusionDecoder, context: jax.Array, x_t: Any, steps: int,
            placement: Placement = Placement()) -> jax.Array:
    """Stage 5 from the noise ``x_t`` (B, 3, T, H, W): one x0 prediction (one step, ``x0`` model), else Euler steps
    over :func:`timesteps` (an ``x0`` prediction converted to a velocity, ``(x - x0) / t``)."""
    cfg = model.cfg
    graphdef, state = _unit(model, len(cfg.decoder_upsample_strides), placement)
    b = context.shape[0]
    ts = timesteps(steps)
    x = jnp.asarray(x_t, jnp.dtype(cfg.dtype))
    with sharding.activate(placement.mesh, RULES):
        if steps == 1 and cfg.decoder_model_output_type == "x0":
            return _step(cfg, graphdef, state, context, x, jnp.full((b,), ts[0], jnp.float32))
        for i, t in enumerate(ts):
            t_next = ts[i + 1] if i + 1 < steps else np.float32(0.0)
            out = _step(cfg, graphdef, state, context, x, jnp.full((b,), t, jnp.float32)).astype(jnp.float32)
            xf = x.astype(jnp.float32)
            if cfg.decoder_model_output_type == "x0":
                out = (xf - out) / t
            x = (xf - (t - t_next) * out).astype(x.dtype)
    return x


def decode(model: LTX2DiffusionDecoder, latents: Any, noise: Noise, *, steps: int | None = None,
           placement: Placement = Placement(), on_stage: Callable[[], None] | None = None) -> np.ndarray:
    """Raw latents (B, C, F, h, w) -> pixels (B, 3, frames, H, W) float32 in the model's [-1, 1] range."""
    cfg = model.cfg
    steps = int(steps or cfg.decoder_num_inference_steps)
    context = context_volume(model, latents, placement, on_stage)
    shape = pixel_shape(cfg, context.shape[0], context.shape[1:4])
    x_t = np.asarray(noise(0, shape), np.float32)
    if x_t.shape != shape:
        raise UserError(f"the diffusion decoder's noise draw 0 must be {shape}, got {x_t.shape}")
    return np.asarray(denoise(model, context, x_t, steps, placement), np.float32)


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


__all__ = ["COMPONENT", "NOISE_PREFIX", "Placement", "context_volume", "decode", "denoise", "draw_problems", "load",
           "noise_source", "placement_for", "timesteps"]
