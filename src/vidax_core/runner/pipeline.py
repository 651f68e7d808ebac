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

from vidax_core.parallel import distributed
from vidax_core import attention
from vidax_core.parallel import mesh as meshlib
from vidax_core.parallel import offload as offloadlib
from vidax_core.io import outputs
from vidax_core.parallel import sharding
from vidax_core.io import video
from vidax_core.io.checkpoint import Checkpoint, checkpoint_for_run
from vidax_core.config import RunConfig
from vidax_core.errors import UserError
from vidax_core.model_api import Conditioning, DitBuild
from vidax_core.nn.state import abstract_model, materialize
from vidax_core.plugins import Plugins
from vidax_core.runner.preflight import preflight
from vidax_core.runner.progress import Reporter, Timer
from vidax_core.registry import ModelSpec
from vidax_core.schedulers import base as sched_base


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
    """A .npy array of exactly ``shape``, real numbers, all finite; memory-mapped until its shape is checked."""
    try:
        noise = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise UserError(f"sampling.initial_noise {path} cannot be read as .npy (save a float32 array with numpy.save)") from exc
    if not isinstance(noise, np.ndarray) or noise.dtype.kind not in "fiu":
        raise UserError(f"sampling.initial_noise {path} must hold a real-valued numeric array (save a float32 array)")
    if tuple(noise.shape) != tuple(shape):
        raise UserError(
            f"sampling.initial_noise {path} has shape {tuple(noise.shape)}, this run needs {tuple(shape)} "
            "(batch, channels, frames, height, width)"
        )
    out = np.asarray(noise, dtype=np.float32)
    if not np.isfinite(out).all():
        raise UserError(f"sampling.initial_noise {path} holds NaN or infinite values: every entry must be finite")
    return out


def build_dit(spec: ModelSpec, ckpt: Checkpoint, cfg: RunConfig, plugins: Plugins) -> DitBuild:
    build: DitBuild | None = plugins.call("build_dit", spec, ckpt=ckpt, run=cfg)
    if build is None:
        raise UserError(f"no installed plugin builds the denoiser of {spec.id}")
    return build


def load_dit(
    spec: ModelSpec,
    ckpt: Checkpoint,
    cfg: RunConfig,
    plugins: Plugins,
    reporter: Reporter,
    build: DitBuild | None = None,
    put: Callable[[tuple, np.ndarray], Any] | None = None,
) -> tuple[DitBuild, nnx.Module]:
    """Build the denoiser abstractly, convert its checkpoint, and place every array with ``put(path, array)``."""
    build = build or build_dit(spec, ckpt, cfg, plugins)
    graphdef, abstract_state, flat = abstract_model(build.ctor)
    values = plugins.call("convert_checkpoint", spec, component=build.component, tensors=ckpt.tensors(build.component),
                          abstract=flat)
    if values is None:
        raise UserError(f"no installed plugin converts the {build.component} checkpoint of {spec.id}")
    return build, materialize(graphdef, abstract_state, values, put=put)


@dataclass
class Placement:
    """Where the DiT's weights live: the mesh, the logical rules, per-param PartitionSpecs, offloaded groups."""

    mesh: Any
    plan: meshlib.MeshPlan
    rules: dict[str, Any]
    specs: dict[tuple, Any]
    offload_groups: tuple[str, ...] = ()

    def sharding(self, path: tuple):
        from jax.sharding import NamedSharding

        return NamedSharding(self.mesh, self.specs.get(path, jax.sharding.PartitionSpec()))

    def put(self, path: tuple, array: np.ndarray) -> Any:
        if path and path[0] in self.offload_groups:
            return np.asarray(array)  # stays on the host; streamed by the offload executor
        return sharding.put(np.asarray(array), self.sharding(path))

    def replicated(self):
        from jax.sharding import NamedSharding, PartitionSpec

        return NamedSharding(self.mesh, PartitionSpec())


def plan_placement(spec: ModelSpec, build: DitBuild, cfg: RunConfig, plugins: Plugins, latent_shape, batch: int,
                   model_for_groups: Any = None) -> Placement:
    """Check the parallel config against the model and the run (before any weight is read) and build the mesh."""
    pt, ph, pw = build.patch_size or (1, 1, 1)
    f, h, w = latent_shape
    tokens = (f // pt) * (h // ph) * (w // pw) if build.patch_size else None
    groups: tuple[str, ...] = ()
    if cfg.offload.enabled:
        names = plugins.call("offload_block_groups", spec, model=model_for_groups)
        if not names:
            raise UserError(f"offload.enabled: the plugin of {spec.id} names no block groups to offload; set offload.enabled=false")
        groups = tuple(names)
    counts = {g: n for g, n in (build.block_counts or {}).items() if g in groups}
    plan = meshlib.plan_mesh(cfg.parallel, n_devices=jax.device_count(), heads=build.heads, video_tokens=tokens,
                             batch=batch, block_groups=counts, offload=cfg.offload)
    mesh = meshlib.make_mesh(plan)
    rules = sharding.make_rules(plugins.call("shard_rules", spec))
    _, abstract_state, _ = abstract_model(build.ctor)
    specs = sharding.param_specs(abstract_state, rules, mesh)
    return Placement(mesh, plan, rules, specs, groups)


def _guide(pred: jax.Array, b: int, guided: bool, guidance: jax.Array) -> jax.Array:
    if guided:
        cond, uncond = pred[:b], pred[b:]
        pred = uncond + guidance * (cond - uncond)
    return pred.astype(jnp.float32)


def _model_inputs(sampler, plan_arrays, i, latents, guided: bool, cond: Conditioning | None, cond_arrays):
    """The denoiser's inputs for step ``i``: latents, timesteps and conditioning kwargs, CFG halves batched."""
    b = latents.shape[0]
    x = sampler.scale_model_input(plan_arrays, i, latents)
    t = plan_arrays["timesteps"][i].astype(jnp.float32)
    if cond is not None and cond.prepare is not None:
        x, t = cond.prepare(x, t, cond_arrays)
    t = jnp.broadcast_to(t, (b,) + jnp.shape(t)[1:]).astype(jnp.float32)
    kwargs = {k: jnp.broadcast_to(cond_arrays[k], (b,) + cond_arrays[k].shape[1:]) for k in (cond.model_kwargs if cond else ())}
    if guided:  # both guidance halves in one batch; batch -> dp puts them on different devices when dp = 2
        x, t = jnp.concatenate([x, x]), jnp.concatenate([t, t])
        kwargs = {k: jnp.concatenate([v, v]) for k, v in kwargs.items()}
    return sharding.constrain(x, ("batch",)), t, kwargs


def make_step(graphdef: nnx.GraphDef, sampler: sched_base.Sampler, guided: bool, placement: Placement | None = None,
              cond: Conditioning | None = None) -> Callable:
    """The jitted denoising step: both guidance halves in one batch, guidance, then the sampler update."""
    mesh, rules = (placement.mesh, placement.rules) if placement is not None else (None, None)

    def step(params, latents, sampler_state, i, context, plan_arrays, guidance, noise, cond_arrays=None):
        with sharding.activate(mesh, rules):
            model = nnx.merge(graphdef, params)
            x, t, kwargs = _model_inputs(sampler, plan_arrays, i, latents, guided, cond, cond_arrays)
            pred = _guide(model(x, t, context, **kwargs), latents.shape[0], guided, guidance)
            return sampler.step(plan_arrays, sampler_state, i, pred, latents, noise)

    return jax.jit(step, donate_argnums=(1, 2))


class OffloadedStep:
    """The denoising step with streamed block groups: jit(pre) -> each group's chunk programs -> jit(post)."""

    def __init__(self, model: nnx.Module, sampler, guided: bool, placement: Placement, chunk_size: int,
                 tracker: offloadlib.ResidentTracker, cond: Conditioning | None = None) -> None:
        groups = placement.offload_groups
        mesh, rules = placement.mesh, placement.rules
        filters = [nnx.PathContains(g) for g in groups]
        graphdef, *parts = nnx.split(model, *filters, ...)
        group_states, rest = parts[:-1], parts[-1]
        self.rest = rest
        abstract_groups = [jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), st) for st in group_states]
        run_group = type(model).run_block_group
        self.pools = []
        for name, st in zip(groups, group_states):
            sub = getattr(model, name)
            gdef, _ = nnx.split(sub)
            # ``st`` is the group's state at model level (path prefix = group name): take the sub-tree.
            host = st[name]
            pool = offloadlib.BlockPool(
                name, gdef, host, chunk_size,
                lambda n, gd, s, x, aux: _in_mesh(mesh, rules, run_group, n, gd, s, x, aux),
                specs=placement.specs, mesh=mesh, path_prefix=(name,), tracker=tracker)
            self.pools.append(pool)

        def full_model(rest_state):
            return nnx.merge(graphdef, *abstract_groups, rest_state)

        def pre(rest_state, latents, i, context, plan_arrays, cond_arrays):
            with sharding.activate(mesh, rules):
                x, t, kwargs = _model_inputs(sampler, plan_arrays, i, latents, guided, cond, cond_arrays)
                return full_model(rest_state).pre(x, t, context, **kwargs)

        def post(rest_state, h, aux, latents, sampler_state, i, plan_arrays, guidance, noise):
            with sharding.activate(mesh, rules):
                pred = full_model(rest_state).post(h, aux, latents.shape)
                pred = _guide(pred, latents.shape[0], guided, guidance)
                return sampler.step(plan_arrays, sampler_state, i, pred, latents, noise)

        self._pre = jax.jit(pre)
        self._post = jax.jit(post, donate_argnums=(3, 4))

    def __call__(self, params, latents, sampler_state, i, context, plan_arrays, guidance, noise, cond_arrays=None):
        h, aux = self._pre(self.rest, latents, i, context, plan_arrays, cond_arrays)
        for k, pool in enumerate(self.pools):
            nxt = self.pools[k + 1] if k + 1 < len(self.pools) else self.pools[0]  # next group, or next step
            h = pool.run(h, aux, prefetch_after=nxt)
        return self._post(self.rest, h, aux, latents, sampler_state, i, plan_arrays, guidance, noise)

    def release(self) -> None:
        for pool in self.pools:
            pool.release()


def _in_mesh(mesh, rules, run_group, name, graphdef, state, x, aux):
    with sharding.activate(mesh, rules):
        return run_group(name, graphdef, state, x, aux)


@dataclass
class Expert:
    """One loaded denoiser (a model has one, Wan2.2 A14B has two switched by timestep) and its compiled step."""

    build: DitBuild
    placement: Placement
    step: Any
    params: Any
    guidance: float


def _plan_experts(spec, ckpt, cfg, plugins, reporter, latent_hw, guided) -> list[tuple[DitBuild, Placement]]:
    """Build each denoiser's description and check its mesh and offload rules, before any weight is read."""
    built = build_dit(spec, ckpt, cfg, plugins)
    builds = list(built) if isinstance(built, (list, tuple)) else [built]
    placements = [plan_placement(spec, b, cfg, plugins, latent_hw, batch=2 if guided else 1) for b in builds]
    p = placements[0].plan
    reporter.log(f"mesh dp={p.dp} tp={p.tp} sp={p.sp} over {p.size} of {jax.device_count()} devices"
                 + (f", offloading {', '.join(placements[0].offload_groups)} in chunks of {cfg.offload.chunk_size}"
                    if placements[0].offload_groups else "")
                 + (f"; {len(builds)} experts switched by timestep" if len(builds) > 1 else ""))
    return list(zip(builds, placements))


def _guidance(cfg: RunConfig, build: DitBuild) -> float:
    value = getattr(cfg.sampling, build.guidance_key)
    return float(cfg.sampling.guidance_scale if value is None else value)


def run(cfg: RunConfig, plugins: Plugins, reporter: Reporter | None = None) -> RunResult:
    """Generate one video as configured; returns latents, frames and metrics (outputs are written too)."""
    reporter = reporter or Reporter()
    timer = Timer()
    spec = plugins.registry.get(cfg.model.id)
    preflight(cfg, spec, plugins)
    out = cfg.output
    distributed.initialize(cfg)  # before any device is touched: the mesh spans every process
    setup_runtime(cfg)
    backend = attention.set_backend(cfg.attention.backend)  # before anything that attends is traced

    t0 = time.perf_counter()
    ckpt = checkpoint_for_run(cfg, spec, plugins)
    ckpt.progress = reporter.byte_progress
    reporter.log(f"model {spec.id} ({spec.family}) from {ckpt.source}; attention backend {backend}")
    sampler = select_sampler(spec, ckpt, cfg, plugins)
    vae = plugins.call("build_vae", spec, ckpt=ckpt, run=cfg)
    if vae is None:
        raise UserError(f"the plugin of {spec.id} provides no VAE")
    s = cfg.sampling
    guided = s.guidance_scale > 1.0
    lat_f, lat_h, lat_w = vae.latent_shape(s.num_frames, s.height, s.width)
    tracker = offloadlib.ResidentTracker()
    # Every parallel/offload divisibility rule is checked here, before the DiT's weights are read.
    planned = _plan_experts(spec, ckpt, cfg, plugins, reporter, (lat_f, lat_h, lat_w), guided)
    cond: Conditioning | None = plugins.call("prepare_conditioning", spec, ckpt=ckpt, run=cfg, vae=vae,
                                             latent_shape=(lat_f, lat_h, lat_w))
    experts: list[Expert] = []
    for build, placement in planned:
        build, model = load_dit(spec, ckpt, cfg, plugins, reporter, build=build, put=placement.put)
        if placement.offload_groups:
            step = OffloadedStep(model, sampler, guided, placement, cfg.offload.chunk_size, tracker, cond)
            params = None
            tracker.base += sharding.per_device_bytes(step.rest)
        else:
            graphdef, params = nnx.split(model)
            step = make_step(graphdef, sampler, guided, placement, cond)
            tracker.base += sharding.per_device_bytes(params)
        experts.append(Expert(build, placement, step, params, _guidance(cfg, build)))
        del model
    tracker.peak = tracker.base
    encoder = plugins.call("build_text_encoder", spec, ckpt=ckpt, run=cfg)
    if encoder is None:
        raise UserError(f"the plugin of {spec.id} provides no text encoder")
    timer.add("load_s", time.perf_counter() - t0)

    t0 = time.perf_counter()
    prompts = [cfg.prompt] + ([cfg.negative_prompt] if guided else [])
    context = np.asarray(plugins.call("encode_prompt", spec, encoder=encoder, prompts=prompts, run=cfg))
    del encoder
    timer.add("encode_s", time.perf_counter() - t0)

    build0, placement0 = experts[0].build, experts[0].placement
    shape = (1, build0.in_channels, lat_f, lat_h, lat_w)
    if s.initial_noise:
        latents = load_initial_noise(s.initial_noise, shape)
    else:
        latents = np.asarray(jax.random.normal(jax.random.key(s.seed), shape, jnp.float32))

    plan = sampler.plan(s.num_steps)
    repl = placement0.replicated()
    plan_arrays = jax.tree.map(lambda a: sharding.put(np.asarray(a), repl), plan.arrays())
    cond_arrays = None
    if cond is not None:
        cond_arrays = {k: sharding.put(np.asarray(v), repl) for k, v in cond.arrays.items()}
    x = sharding.put(latents, repl)
    state = jax.tree.map(lambda a: sharding.put(np.asarray(a), repl), sampler.init_state(plan, jnp.asarray(latents)))
    ctx = sharding.put(np.asarray(context, dtype=build0.param_dtype), repl)
    noise_key = jax.random.fold_in(jax.random.key(s.seed), 1)
    schedule = [_expert_for(experts, float(t)) for t in np.asarray(plan.timesteps)]

    step_times: list[float] = []
    bar = reporter.bar(plan.num_steps, "sampling", unit="step")
    active = None
    for i in range(plan.num_steps):
        t_step = time.perf_counter()
        e = experts[schedule[i]]
        if active is not None and active is not e and active.placement.offload_groups:
            active.step.release()  # only the active expert's blocks are ever on the devices
        active = e
        noise = None
        if sampler.needs_noise:
            noise = sharding.put(np.asarray(jax.random.normal(jax.random.fold_in(noise_key, i), shape, jnp.float32)), repl)
        x, state = e.step(e.params, x, state, np.int32(i), ctx, plan_arrays, np.float32(e.guidance), noise, cond_arrays)
        x.block_until_ready()
        step_times.append(time.perf_counter() - t_step)
        bar.update(1)
    bar.close()
    for e in experts:
        if e.placement.offload_groups:
            e.step.release()
    if cond is not None and cond.finalize is not None:
        x = jax.jit(cond.finalize)(x, cond_arrays)
    final = _to_host(x)
    compile_s = step_times[0] - (float(np.median(step_times[1:])) if len(step_times) > 1 else 0.0)
    per_step = float(np.median(step_times[1:])) if len(step_times) > 1 else step_times[0]
    timer.add("compile_s", max(compile_s, 0.0))
    timer.add("sampling_s", float(sum(step_times)))
    writer = distributed.is_writer()  # under jax.distributed only process 0 writes
    if out.save_latents and writer:
        outputs.save_npy(out.save_latents, final)

    t0 = time.perf_counter()
    dbar = reporter.bar(lat_f, "decoding", unit="chunk")
    frames = vae.decode_video(final, on_chunk=lambda done, total: dbar.update(1))
    dbar.close()
    timer.add("decode_s", time.perf_counter() - t0)
    if out.save_frames and writer:
        outputs.save_npy(out.save_frames, frames.astype(np.float32))
    if out.path and writer:
        video.write_mp4(out.path, frames[0], out.fps)

    p = placement0.plan
    offloaded = [e for e in experts if e.placement.offload_groups]
    metrics = {
        "model": spec.id,
        "load_s": timer.phases.get("load_s", 0.0),
        "encode_s": timer.phases.get("encode_s", 0.0),
        "compile_s": timer.phases.get("compile_s", 0.0),
        "sampling_s": timer.phases.get("sampling_s", 0.0),
        "per_step_s": per_step,
        "step_times_s": step_times,
        "num_steps": plan.num_steps,
        "decode_s": timer.phases.get("decode_s", 0.0),
        "total_s": timer.total(),
        "peak_rss_mb": peak_rss_mb(),
        "latent_shape": list(shape),
        "sampler": getattr(sampler, "name", type(sampler).__name__),
        "experts": [e.build.component for e in experts],
        "expert_per_step": [experts[k].build.component for k in schedule],
        "backend": jax.default_backend(),
        "attention_backend": backend,
        "parallel": {"dp": p.dp, "tp": p.tp, "sp": p.sp, "devices": p.size, "processes": jax.process_count()},
        "offload": {"enabled": bool(offloaded), "chunk_size": cfg.offload.chunk_size,
                    "groups": list(placement0.offload_groups),
                    "non_block_weight_bytes": int(tracker.base) if offloaded else None,
                    "chunk_weight_bytes": {pl.name: int(pl.chunk_bytes) for pl in offloaded[0].step.pools}
                    if offloaded else None},
        # Largest per-device bytes of DiT weights resident on devices at any time during sampling (non-block
        # params + the at most two streamed chunks with offload; all params without).
        "peak_resident_weight_bytes": int(tracker.peak),
    }
    if out.metrics and writer:
        outputs.save_json(out.metrics, metrics)
    return RunResult(final, frames, metrics)


def _expert_for(experts: list[Expert], t: float) -> int:
    for k, e in enumerate(experts):
        if e.build.active(t):
            return k
    raise UserError(f"no denoiser of this model covers timestep {t}: check the checkpoint's boundary_ratio")


def _to_host(x: jax.Array) -> np.ndarray:
    """A (replicated) result as numpy on every process."""
    if jax.process_count() > 1 and not x.is_fully_addressable:
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(x)


def summary(metrics: dict[str, Any]) -> str:
    return (
        f"done in {metrics['total_s']:.1f}s: load {metrics['load_s']:.1f}s, encode {metrics['encode_s']:.1f}s, "
        f"compile {metrics['compile_s']:.1f}s, sampling {metrics['sampling_s']:.1f}s "
        f"({metrics['per_step_s']:.3f} s/step steady), decode {metrics['decode_s']:.1f}s, "
        f"peak RSS {metrics['peak_rss_mb']:.0f} MB"
    )

