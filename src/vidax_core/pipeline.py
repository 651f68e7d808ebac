"""The one generic text-to-video runner: encode -> sample loop -> decode -> write.

Nothing here knows a model family: the DiT, its checkpoint conversion, the prompt encoder, the VAE and the
default sampler all come from plugin hooks. The denoising step (model call for both guidance halves, guidance,
sampler update) is ONE jitted function called from a Python loop with the step index as a traced value, so it
compiles once per run shape and the loop can report progress.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import psutil
from flax import nnx

from . import outputs, video
from .checkpoint import Checkpoint, resolve_checkpoint
from .config import RunConfig
from .errors import UserError
from .model_api import DitBuild
from .nnx_util import abstract_model, materialize
from .plugins import Plugins
from .preflight import preflight
from .progress import Reporter, Timer
from .registry import ModelSpec
from .schedulers import base as sched_base


@dataclass
class RunResult:
    latents: np.ndarray
    frames: np.ndarray | None
    metrics: dict[str, Any] = field(default_factory=dict)


def peak_rss_mb() -> float:
    try:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    except Exception:  # pragma: no cover - non-POSIX
        return psutil.Process().memory_info().rss / 2**20


def setup_runtime(cfg: RunConfig) -> None:
    """Process-wide JAX settings from the config (persistent compilation cache)."""
    if cfg.runtime.compilation_cache:
        path = os.path.expanduser(cfg.runtime.compilation_cache_dir)
        os.makedirs(path, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", path)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def select_sampler(spec: ModelSpec, ckpt: Checkpoint, cfg: RunConfig, plugins: Plugins) -> sched_base.Sampler:
    """``sampling.scheduler`` if set, else the plugin's choice, else the checkpoint's scheduler_config.json."""
    choice = cfg.sampling.scheduler
    try:
        if choice is not None:
            if isinstance(choice, str):
                return sched_base.get_sampler(choice)
            opts = dict(choice)
            name = opts.pop("name", None)
            if not name:
                raise UserError("sampling.scheduler needs a name, e.g. {name: unipc, flow_shift: 3.0}")
            return sched_base.get_sampler(name, **opts)
        picked = plugins.call("scheduler", spec, ckpt=ckpt, run=cfg)
        if picked is not None:
            return picked
        return sched_base.sampler_from_scheduler_config(ckpt.config("scheduler"))
    except (ValueError, TypeError) as exc:
        where = "sampling.scheduler" if choice is not None else f"{ckpt.source}/scheduler/scheduler_config.json"
        raise UserError(f"{where}: {str(exc).splitlines()[0]}") from exc


def load_initial_noise(path: str, shape: tuple[int, ...]) -> np.ndarray:
    try:
        noise = np.load(path)
    except (OSError, ValueError) as exc:
        raise UserError(f"sampling.initial_noise {path} cannot be read as .npy (save a float32 array with numpy.save)") from exc
    if tuple(noise.shape) != tuple(shape):
        raise UserError(
            f"sampling.initial_noise {path} has shape {tuple(noise.shape)}, this run needs {tuple(shape)} "
            "(batch, channels, frames, height, width)"
        )
    return noise.astype(np.float32)


def load_dit(spec: ModelSpec, ckpt: Checkpoint, cfg: RunConfig, plugins: Plugins, reporter: Reporter) -> tuple[DitBuild, nnx.Module]:
    build: DitBuild | None = plugins.call("build_dit", spec, ckpt=ckpt, run=cfg)
    if build is None:
        raise UserError(f"no installed plugin builds the denoiser of {spec.id}")
    graphdef, abstract_state, flat = abstract_model(build.ctor)
    tensors = ckpt.tensors(build.component)
    total = sum(tensors.nbytes(k) for k in tensors)
    bar = reporter.bar(total, f"load {build.component}", unit="B", unit_scale=True, unit_divisor=1024)
    wrapped = _ProgressTensors(tensors, lambda n: bar.update(n))
    values = plugins.call("convert_checkpoint", spec, component=build.component, tensors=wrapped, abstract=flat)
    bar.close()
    if values is None:
        raise UserError(f"no installed plugin converts the {build.component} checkpoint of {spec.id}")
    return build, materialize(graphdef, abstract_state, values)


class _ProgressTensors(dict):
    """Tensor mapping that reports bytes as each tensor is read."""

    def __init__(self, source: Any, on_bytes: Callable[[int], None]) -> None:
        super().__init__()
        self._source, self._on = source, on_bytes
        for k in source:
            dict.__setitem__(self, k, None)

    def __getitem__(self, key: str) -> np.ndarray:
        arr = self._source[key]
        self._on(arr.nbytes)
        return arr


def make_step(graphdef: nnx.GraphDef, sampler: sched_base.Sampler, guided: bool) -> Callable:
    """The jitted denoising step: both guidance halves in one batch, guidance, then the sampler update."""

    def step(params, latents, sampler_state, i, context, plan_arrays, guidance, noise):
        model = nnx.merge(graphdef, params)
        b = latents.shape[0]
        x = sampler.scale_model_input(plan_arrays, i, latents)
        t = jnp.broadcast_to(plan_arrays["timesteps"][i], (b,)).astype(jnp.float32)
        if guided:
            pred = model(jnp.concatenate([x, x]), jnp.concatenate([t, t]), context)
            cond, uncond = pred[:b], pred[b:]
            pred = uncond + guidance * (cond - uncond)
        else:
            pred = model(x, t, context)
        pred = pred.astype(jnp.float32)
        return sampler.step(plan_arrays, sampler_state, i, pred, latents, noise)

    return jax.jit(step, donate_argnums=(1, 2))


def run(cfg: RunConfig, plugins: Plugins, reporter: Reporter | None = None) -> RunResult:
    """Generate one video as configured; returns latents, frames and metrics (outputs are written too)."""
    reporter = reporter or Reporter()
    timer = Timer()
    spec = plugins.registry.get(cfg.model.id)
    preflight(cfg, spec, plugins)
    out = cfg.output
    setup_runtime(cfg)

    t0 = time.perf_counter()
    ckpt = resolve_checkpoint(
        cfg.model.checkpoint,
        revision=cfg.model.revision,
        find_builtin=lambda name: plugins.call("builtin_checkpoint", spec, name=name),
        builtin_key=spec.id,
    )
    reporter.log(f"model {spec.id} ({spec.family}) from {ckpt.source}")
    sampler = select_sampler(spec, ckpt, cfg, plugins)
    build, model = load_dit(spec, ckpt, cfg, plugins, reporter)
    vae = plugins.call("build_vae", spec, ckpt=ckpt, run=cfg)
    encoder = plugins.call("build_text_encoder", spec, ckpt=ckpt, run=cfg)
    if vae is None or encoder is None:
        raise UserError(f"the plugin of {spec.id} provides no {'VAE' if vae is None else 'text encoder'}")
    timer.add("load_s", time.perf_counter() - t0)

    t0 = time.perf_counter()
    guided = cfg.sampling.guidance_scale > 1.0
    prompts = [cfg.prompt] + ([cfg.negative_prompt] if guided else [])
    context = np.asarray(plugins.call("encode_prompt", spec, encoder=encoder, prompts=prompts, run=cfg))
    del encoder
    timer.add("encode_s", time.perf_counter() - t0)

    s = cfg.sampling
    lat_f, lat_h, lat_w = vae.latent_shape(s.num_frames, s.height, s.width)
    shape = (1, build.in_channels, lat_f, lat_h, lat_w)
    if s.initial_noise:
        latents = load_initial_noise(s.initial_noise, shape)
    else:
        latents = np.asarray(jax.random.normal(jax.random.key(s.seed), shape, jnp.float32))

    plan = sampler.plan(s.num_steps)
    plan_arrays = plan.arrays()
    graphdef, params = nnx.split(model)
    step = make_step(graphdef, sampler, guided)
    x = jnp.asarray(latents)
    state = sampler.init_state(plan, x)
    ctx = jnp.asarray(context, dtype=build.param_dtype)
    g = jnp.float32(s.guidance_scale)
    noise_key = jax.random.fold_in(jax.random.key(s.seed), 1)

    step_times: list[float] = []
    bar = reporter.bar(plan.num_steps, "sampling", unit="step")
    for i in range(plan.num_steps):
        t_step = time.perf_counter()
        noise = jax.random.normal(jax.random.fold_in(noise_key, i), shape, jnp.float32) if sampler.needs_noise else None
        x, state = step(params, x, state, jnp.int32(i), ctx, plan_arrays, g, noise)
        x.block_until_ready()
        step_times.append(time.perf_counter() - t_step)
        bar.update(1)
    bar.close()
    final = np.asarray(x)
    compile_s = step_times[0] - (float(np.median(step_times[1:])) if len(step_times) > 1 else 0.0)
    per_step = float(np.median(step_times[1:])) if len(step_times) > 1 else step_times[0]
    timer.add("compile_s", max(compile_s, 0.0))
    timer.add("sampling_s", float(sum(step_times)))
    if out.save_latents:
        outputs.save_npy(out.save_latents, final)

    t0 = time.perf_counter()
    dbar = reporter.bar(lat_f, "decoding", unit="chunk")
    frames = vae.decode_video(final, on_chunk=lambda done, total: dbar.update(1))
    dbar.close()
    timer.add("decode_s", time.perf_counter() - t0)
    if out.save_frames:
        outputs.save_npy(out.save_frames, frames.astype(np.float32))
    if out.path:
        video.write_mp4(out.path, frames[0], out.fps)

    metrics = {
        "model": spec.id,
        "load_s": timer.phases.get("load_s", 0.0),
        "encode_s": timer.phases.get("encode_s", 0.0),
        "compile_s": timer.phases.get("compile_s", 0.0),
        "sampling_s": timer.phases.get("sampling_s", 0.0),
        "per_step_s": per_step,
        "num_steps": plan.num_steps,
        "decode_s": timer.phases.get("decode_s", 0.0),
        "total_s": timer.total(),
        "peak_rss_mb": peak_rss_mb(),
        "latent_shape": list(shape),
        "sampler": getattr(sampler, "name", type(sampler).__name__),
        "backend": jax.default_backend(),
    }
    if out.metrics:
        outputs.save_json(out.metrics, metrics)
    return RunResult(final, frames, metrics)


def summary(metrics: dict[str, Any]) -> str:
    return (
        f"done in {metrics['total_s']:.1f}s: load {metrics['load_s']:.1f}s, encode {metrics['encode_s']:.1f}s, "
        f"compile {metrics['compile_s']:.1f}s, sampling {metrics['sampling_s']:.1f}s "
        f"({metrics['per_step_s']:.3f} s/step steady), decode {metrics['decode_s']:.1f}s, "
        f"peak RSS {metrics['peak_rss_mb']:.0f} MB"
    )

