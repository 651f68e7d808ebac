"""The one generic runner: plan -> encode (then free the encoder) -> place the denoiser -> step loop -> decode -> write.

Nothing here knows a model family: the DiT, its checkpoint conversion, the prompt encoder, the VAE, the default
sampler, the guidance strategy and the conditioning all come from plugin hooks. Every parallel and offload rule is
checked before any weight is read. The denoising step (all guidance branches, conditioning, guidance, sampler
update) is ONE jitted function (:mod:`vidax_core.runner.step`) called from a Python loop with the step index as a
traced value, so it compiles once per run shape and the loop can report progress.
"""

from __future__ import annotations

import gc
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import psutil
from flax import nnx

from vidax_core.runner import cache_run
from vidax_core.parallel import mesh as meshlib
from vidax_core.parallel import offload as offloadlib
from vidax_core.io import outputs
from vidax_core.parallel import sharding
from vidax_core.io.checkpoint import Checkpoint
from vidax_core.io.noise import checked_noise, load_initial_noise, load_npz_noise  # noqa: F401 - importable here
from vidax_core.config import RunConfig
from vidax_core.errors import PluginError, UserError
from vidax_core.guidance import PROMPT, Guidance, default_guidance
from vidax_core.model_api import Conditioning, Decoded, DitBuild, SamplingPass
from vidax_core.runner.offload_step import OffloadedStep
from vidax_core.runner.step import StepPlan, init_state, make_step, plan_batches
from vidax_core.nn.state import abstract_model, materialize
from vidax_core.plugins import Plugins
from vidax_core import attention
from vidax_core.runner import experts as expert_plan
from vidax_core.runner import memory, throughput
from vidax_core import precision
from vidax_core.runner.preflight import preflight  # noqa: F401 - part of this module's interface
from vidax_core.runner.progress import Reporter, Timer
from vidax_core.registry import ModelSpec
from vidax_core.schedulers import base as sched_base


@dataclass
class RunResult:
    latents: np.ndarray
    frames: np.ndarray | None
    metrics: dict[str, Any] = field(default_factory=dict)
    audio: np.ndarray | None = None
    sample_rate: int | None = None


def peak_rss_mb() -> float:
    try:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    except Exception:  # pragma: no cover - non-POSIX
        return psutil.Process().memory_info().rss / 2**20


def setup_runtime(cfg: RunConfig) -> None:
    """Process-wide JAX settings from the config (persistent compilation cache). Every program is cached, however
    quickly it compiled: a run builds dozens of small ones (encoder pieces, VAE tiles, samplers) beside the DiT,
    and loading them is faster than compiling them again (a test file of tiny end-to-end runs: 15% less time on
    an empty cache than with a 0.5 s threshold)."""
    if cfg.runtime.compilation_cache:
        path = os.path.expanduser(cfg.runtime.compilation_cache_dir)
        os.makedirs(path, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", path)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def select_sampler(spec: ModelSpec, ckpt: Checkpoint, cfg: RunConfig, plugins: Plugins) -> sched_base.Sampler:
    """``sampling.scheduler`` if set, else the plugin's choice, else the checkpoint's scheduler_config.json."""
    choice = cfg.sampling.scheduler
    try:
        if choice is not None:
            if isinstance(choice, str):
                return sched_base.get_sampler(choice)
            opts, _ = sched_base.split_plan_lists(choice)  # the lists go to the plan (sampling_plan)
            name = opts.pop("name", None)
            if not name:
                raise UserError("sampling.scheduler needs a name, e.g. {name: unipc, flow_shift: 3.0}")
            return sched_base.get_sampler(name, **opts)
        picked = plugins.call("scheduler", spec, ckpt=ckpt, run=cfg)
        if picked is not None:
            return picked
        return sched_base.sampler_from_scheduler_config(ckpt.config("scheduler"))
    except (ValueError, TypeError, PluginError) as exc:
        cause = exc.__cause__ if isinstance(exc, PluginError) else exc  # a family's sampler of a bad config too
        if not isinstance(cause, (ValueError, TypeError)):
            raise
        where = "sampling.scheduler" if choice is not None else f"{ckpt.source}/scheduler/scheduler_config.json"
        raise UserError(f"{where}: {str(cause).splitlines()[0]}") from exc


def build_dit(spec: ModelSpec, ckpt: Checkpoint, cfg: RunConfig, plugins: Plugins) -> list[DitBuild]:
    """The denoiser builds of ``spec``: one, or several experts switched by timestep."""
    build = plugins.call("build_dit", spec, ckpt=ckpt, run=cfg)
    if build is None:
        raise UserError(f"no installed plugin builds the denoiser of {spec.id}")
    from vidax_core.quant import policy as quant_policy  # 8-bit block weights (model.weight_dtype or the file's)

    return quant_policy.builds_for_run(list(build) if isinstance(build, (list, tuple)) else [build], spec, ckpt, cfg,
                                       plugins)


def load_dit(
    spec: ModelSpec,
    ckpt: Checkpoint,
    cfg: RunConfig,
    plugins: Plugins,
    reporter: Reporter,
    build: DitBuild | None = None,
    put: Callable[[tuple, np.ndarray], Any] | None = None,
    adapters: Any = None,
) -> tuple[DitBuild, nnx.Module]:
    """Build the denoiser abstractly, convert its checkpoint, and place every array with ``put(path, array)``.
    ``adapters`` (:func:`vidax_core.lora.prepare`, checked earlier) are fused into the tensors before conversion,
    or with ``lora_mode: unfused`` (:mod:`vidax_core.lora.unfused`) fill the factor parameters of the build."""
    build = build or build_dit(spec, ckpt, cfg, plugins)[0]
    graphdef, abstract_state, flat = abstract_model(build.ctor)
    if adapters is None and getattr(cfg, "lora", None):
        from vidax_core import lora

        adapters = lora.prepare(cfg, spec, ckpt, [build], plugins)
    from vidax_core.quant import policy as quant_policy  # scales of an 8-bit file folded into their weights

    tensors = quant_policy.tensors_for_load(ckpt.tensors(build.component), f"{ckpt.source} ({build.component})",
                                            reporter.log)
    if adapters is not None:  # an 8-bit weight is read dequantised, the sum quantized again with fresh scales
        tensors = adapters.fused(build.component, tensors)
    values = plugins.call("convert_checkpoint", spec, component=build.component, tensors=tensors,
                          abstract=flat if adapters is None else adapters.convertible(flat),
                          config=ckpt.config(build.component))
    if values is None:
        raise UserError(f"no installed plugin converts the {build.component} checkpoint of {spec.id}")
    if adapters is not None:  # lora_mode=unfused: the factors are parameters of their own
        values = {**values, **adapters.slot_values(build.component, flat)}
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
            return array  # read into its host chunks (or disk cache) by the offload executor
        return sharding.put(array, self.sharding(path))

    def replicated(self):
        from jax.sharding import NamedSharding, PartitionSpec

        return NamedSharding(self.mesh, PartitionSpec())


def stacked_groups(abstract_state: Any) -> set[str]:
    """Top-level attributes of a model holding stacked blocks (parameters whose first logical axis is ``layers``)."""
    from vidax_core.nn.layers import LAYERS

    return {str(path[0]) for path, names in sharding.param_names(abstract_state).items()
            if names and names[0] == LAYERS and len(path) > 1}


def offload_groups(spec: ModelSpec, build: DitBuild, cfg: RunConfig, plugins: Plugins) -> tuple[str, ...]:
    """The groups to stream from the host, checked against the model: every stacked group must be one the model
    runs by name (``block_groups``), or offload would silently skip it."""
    model = nnx.eval_shape(build.ctor)
    names = plugins.call("offload_block_groups", spec, model=model, run=cfg) or list(build.block_counts or ())
    if not names:
        raise UserError(f"offload.enabled: the plugin of {spec.id} names no block groups to offload; set offload.enabled=false")
    runs = tuple(getattr(model, "block_groups", ()) or ())
    _, abstract_state = nnx.split(model)
    missing = sorted(stacked_groups(abstract_state) - set(runs))
    if missing or not set(names) <= set(runs):
        what = f"stacked block groups {', '.join(missing)} are" if missing else f"groups {', '.join(sorted(set(names) - set(runs)))} are"
        raise UserError(f"offload cannot run {spec.id}: its {what} not in the model's block_groups "
                        f"({', '.join(runs) or 'none'}); set offload.enabled=false (plugin bug: report it)")
    chunk = cfg.offload.chunk_size
    if isinstance(chunk, dict):
        unknown = sorted(map(str, set(chunk) - set(runs)))
        if unknown:
            raise UserError(f"offload.chunk_size names {', '.join(unknown)}, not a block group of {spec.id} "
                            f"(groups: {', '.join(runs)})")
    return tuple(names)


def video_tokens(build: DitBuild, latent_shape: tuple[int, int, int]) -> int | None:
    """Tokens of the patchified latent video (the sequence SP splits), or None when the build gives no patch."""
    if not build.patch_size:
        return None
    pt, ph, pw = build.patch_size
    f, h, w = latent_shape
    return (f // pt) * (h // ph) * (w // pw)


def plan_placement(spec: ModelSpec, build: DitBuild, cfg: RunConfig, plugins: Plugins, latent_shape, batch: int,
                   n_devices: int | None = None) -> Placement:
    """Check the parallel config against the model and the run (before any weight is read) and build the mesh."""
    groups = offload_groups(spec, build, cfg, plugins) if cfg.offload.enabled else ()
    counts = {g: n for g, n in (build.block_counts or {}).items() if g in groups}
    plan = meshlib.plan_mesh(cfg.parallel, n_devices=n_devices or jax.device_count(), heads=build.heads,
                             video_tokens=video_tokens(build, latent_shape), batch=batch, block_groups=counts,
                             offload=cfg.offload)
    mesh = meshlib.make_mesh(plan)
    rules = sharding.make_rules(plugins.call("shard_rules", spec))
    _, abstract_state, _ = abstract_model(build.ctor)
    specs = sharding.param_specs(abstract_state, rules, mesh)
    return Placement(mesh, plan, rules, specs, groups)


def expected_batch(guide: Guidance) -> int:
    """Model batch of the largest call, assuming the branches' contexts have equal shapes (checked after encoding)."""
    plain = [b for b in guide.branches if not b.model_kwargs]
    return max(len(plain), 1)


@dataclass
class Expert:
    """One loaded denoiser (a model has one, Wan2.2 A14B has two switched by timestep). Its weights are placed
    once; each distinct call structure compiles its own step over them (:meth:`make_step`), kept for reuse."""

    build: DitBuild
    placement: Placement
    model: Any  # the live module when its blocks are streamed from the host, else None
    graphdef: Any = None
    params: Any = None
    step: Any = None
    steps: dict = field(default_factory=dict)
    finalizers: dict = field(default_factory=dict)
    rest_counted: bool = False
    host: dict = field(default_factory=dict)  # streamed group -> its HostChunks

    def make_step(self, plan: StepPlan, cfg: RunConfig, tracker: offloadlib.ResidentTracker,
                  key: Any = None) -> bool:
        """Select the step for ``plan``: the one compiled for ``key`` earlier, or a new one. True when new."""
        if key is not None and key in self.steps:
            self.step = self.steps[key]
            return False
        pl = self.placement
        if self.model is not None:
            self.step = OffloadedStep(self.model, plan, pl, self.host, tracker)
        else:
            self.step = make_step(self.graphdef, plan, pl.mesh, pl.rules)
        if key is not None:
            if len(self.steps) >= 8:
                old = self.steps.pop(next(iter(self.steps)))
                if old is not self.step and self.model is not None:
                    old.release()
            self.steps[key] = self.step
        return True

    def release(self) -> None:
        if self.model is not None and self.step is not None:
            self.step.release()

    def close(self) -> None:
        """Free this expert's device arrays and compiled steps."""
        self.release()
        for st in self.steps.values():
            if self.model is not None:
                st.release()
        self.steps.clear()
        self.finalizers.clear()
        self.step = self.params = self.model = None
        self.host = {}


def select_guidance(spec: ModelSpec, ckpt: Checkpoint, cfg: RunConfig, plugins: Plugins) -> Guidance:
    picked = plugins.call("guidance", spec, ckpt=ckpt, run=cfg)
    return picked if picked is not None else default_guidance(cfg)


def sampling_plan(spec, ckpt, cfg: RunConfig, plugins: Plugins, sampler, latent_shape) -> sched_base.SamplerPlan:
    """``sampler.plan`` with the plugin's extra arguments (sigma lists, dynamic shift)."""
    kwargs = dict(plugins.call("sampling_plan", spec, ckpt=ckpt, run=cfg, sampler=sampler,
                               latent_shape=latent_shape) or {})
    strength = float(kwargs.pop("denoise_strength", 1.0))
    choice = cfg.sampling.scheduler
    lists = sched_base.split_plan_lists(choice)[1] if isinstance(choice, Mapping) else {}
    steps = None if ("sigmas" in kwargs or "timesteps" in kwargs) and not lists else cfg.sampling.num_steps
    try:
        if lists:  # the user's explicit lists replace the plugin's
            kwargs = {k: v for k, v in kwargs.items() if k not in sched_base.PLAN_LISTS}
        plan = sched_base.plan_with_lists(sampler, steps, lists, **kwargs)
        if strength < 1.0:  # diffusers' get_timesteps: the last int(N * strength) steps
            kept = min(int(plan.num_steps * strength), plan.num_steps)
            if kept < 1:
                raise ValueError(f"denoise strength {strength} keeps none of the {plan.num_steps} steps")
            plan = plan.tail(plan.num_steps - kept)
        return plan
    except (ValueError, TypeError) as exc:
        raise UserError(f"sampler {getattr(sampler, 'name', type(sampler).__name__)} cannot plan this run: "
                        f"{str(exc).splitlines()[0]}") from exc


def encode(spec, ckpt, cfg: RunConfig, plugins: Plugins, prompts: Sequence[str], mesh) -> dict[str, Any]:
    """Encode every prompt the guidance branches read (``PROMPT`` / ``NEGATIVE``): one context (array or dict of
    arrays) per prompt kind. The encoder is freed before returning, so the denoiser can use its memory."""
    encoder = plugins.call("build_text_encoder", spec, ckpt=ckpt, run=cfg, mesh=mesh)
    if encoder is None:
        raise UserError(f"the plugin of {spec.id} provides no text encoder")
    out = encode_with(spec, encoder, cfg, plugins, prompts, mesh)
    del encoder
    gc.collect()
    return out


def encode_with(spec, encoder, cfg: RunConfig, plugins: Plugins, prompts: Sequence[str], mesh) -> dict[str, Any]:
    """:func:`encode` with a given encoder (a loaded pipe keeps its encoder between calls)."""
    texts = [cfg.prompt if p == PROMPT else cfg.negative_prompt for p in prompts]
    with sharding.activate(mesh, dict(sharding.ENCODER_RULES)):
        out = plugins.call("encode_prompt", spec, encoder=encoder, prompts=texts, run=cfg)
    if isinstance(out, (list, tuple)):  # one context per prompt, each with batch 1 (lengths may differ)
        if len(out) != len(texts):
            raise ValueError(f"encode_prompt returned {len(out)} contexts for {len(texts)} prompts")
        found = [jax.tree.map(np.asarray, c) for c in out]
    elif isinstance(out, dict):
        found = [{k: np.asarray(v)[i:i + 1] for k, v in out.items()} for i in range(len(texts))]
    else:
        out = np.asarray(out)
        found = [out[i:i + 1] for i in range(len(texts))]
    return dict(zip(prompts, found))


def _context_to_device(ctx: Any, dtype: Any, repl) -> Any:
    def put(a):
        a = np.asarray(a)
        if np.issubdtype(a.dtype, np.floating):
            a = a.astype(dtype)
        return sharding.put(a, repl)

    return jax.tree.map(put, ctx)


def _draw_noise(key, shapes: Any) -> Any:
    if isinstance(shapes, dict):
        return {k: np.asarray(jax.random.normal(jax.random.fold_in(key, n), tuple(s), jnp.float32))
                for n, (k, s) in enumerate(sorted(shapes.items()))}
    return np.asarray(jax.random.normal(key, tuple(shapes), jnp.float32))


def initial_latents(cfg: RunConfig, shapes: Any) -> Any:
    """``sampling.initial_noise`` (a .npy, or a .npz with one array per latent stream) or a seeded draw."""
    path = cfg.sampling.initial_noise
    if not path:
        return _draw_noise(jax.random.key(cfg.sampling.seed), shapes)
    if not isinstance(shapes, dict):
        return load_initial_noise(path, shapes)
    return load_npz_noise(path, shapes)


def save_latents(path: str, final: Any) -> None:
    if isinstance(final, dict):
        outputs.write_atomic(path, lambda tmp: np.savez(open(tmp, "wb"), **{k: np.asarray(v) for k, v in final.items()}))
    else:
        outputs.save_npy(path, final)


def _check_per_token(sampler, cond: Conditioning | None) -> None:
    if cond is not None and cond.per_token_update:
        import inspect

        if "per_token_timesteps" not in inspect.signature(sampler.step).parameters:
            raise UserError(f"sampler {sampler.name} has no per-token update, which this model's conditioning needs: "
                            "use sampling.scheduler=flow_euler")


def sampling_passes(spec: ModelSpec, ckpt: Checkpoint, cfg: RunConfig, plugins: Plugins) -> list[SamplingPass]:
    """The run's denoising passes: the plugin's multi-pass recipe, or one pass of ``cfg``."""
    passes = plugins.call("sampling_passes", spec, ckpt=ckpt, run=cfg)
    return list(passes) if passes else [SamplingPass(cfg)]


def place_passes(spec: ModelSpec, builds: list[DitBuild], passes: list[SamplingPass], grids, guides,
                 plugins: Plugins) -> list[list[Placement]]:
    """Each pass's placements, one per expert: every pass's latent grid and model batch are checked against the
    parallel and offload rules (before any weight is read); the weights are placed with the first pass's."""
    return [[plan_placement(spec, b, p.run, plugins, grid, batch=expected_batch(guide)) for b in builds]
            for p, grid, guide in zip(passes, grids, guides)]


def start_latents(cfg: RunConfig, sampler, cond: Conditioning | None, shapes: Any, splan, given: Any) -> Any:
    """A pass's initial latents: the seeded draw (or ``given``, the run's ``sampling.initial_noise``) through the
    conditioning's ``latents``; or, for a conditioning with ``start``, the draw and ``given`` through it."""
    draw = lambda: _draw_noise(jax.random.key(cfg.sampling.seed), shapes)  # noqa: E731
    if cond is not None and cond.start is not None:
        return cond.start(draw(), given, float(splan.sigmas[0]))
    base = given if given is not None else draw()
    if sampler.init_noise_sigma != 1.0:
        base = jax.tree.map(lambda a: a * np.float32(sampler.init_noise_sigma), base)
    return cond.latents(base) if cond is not None and cond.latents is not None else base


@dataclass
class PassResult:
    """What one pass leaves: its final latents on the host (the layout ``output.save_latents`` writes) and what the
    metrics report of it."""

    final: Any
    shapes: Any
    splan: Any
    guide: Guidance
    batches: Any
    schedule: list[int]
    step_times: list[float]
    compiled: bool = True  # a new step program was built for this pass (not one kept from an earlier call)
    contexts: Sequence[Any] = ()  # the prompt contexts its steps read (their lengths size the FLOPs)
    cache: dict | None = None  # the step cache's report (vidax_core.runner.cache_plan.report)


def run_metrics(model: Any, cfg: RunConfig, plan: Any, results: list["PassResult"], timer: Timer,
                decoded: Decoded) -> dict[str, Any]:
    """The metrics record of one generated video (``output.metrics``)."""
    spec, experts, tracker = model.spec, model.experts, model.tracker
    passes, samplers = plan.passes, plan.samplers
    last = results[-1]
    step_times = [t for r in results for t in r.step_times]
    compile_s = sum(max(r.step_times[0] - _steady(r.step_times), 0.0) for r in results)
    timer.add("compile_s", compile_s)
    timer.add("sampling_s", float(sum(step_times)))
    offloaded = [e for e in experts if e.placement.offload_groups]
    placement0 = experts[0].placement
    p0 = placement0.plan
    metrics = {
        "model": spec.id,
        "load_s": timer.phases.get("load_s", 0.0),
        "encode_s": timer.phases.get("encode_s", 0.0),
        "compile_s": timer.phases.get("compile_s", 0.0),
        "sampling_s": timer.phases.get("sampling_s", 0.0),
        "per_step_s": _steady(last.step_times),
        "step_times_s": step_times,
        "num_steps": sum(r.splan.num_steps for r in results),
        "decode_s": timer.phases.get("decode_s", 0.0),
        "total_s": timer.total(),
        "peak_rss_mb": peak_rss_mb(),
        # anonymous memory only (the mapped checkpoint's pages are the OS's to drop), and the devices' own peak
        "peak_anon_mb": memory.peak_anon_mb(),
        # per phase of this load and call: the anonymous MiB at its start and the most seen during it
        "anon_mb_phases": {k: {"start": round(w.base, 1), "peak": round(w.peak, 1)}
                           for k, w in getattr(model, "memory_phases", {}).items()},
        "peak_device_mb": memory.peak_device_mb(),
        "matmul_precision": precision.effective(cfg),
        "text_encoder_on": getattr(getattr(model, "encode_on", None), "where", None),
        "latent_shape": _shape_list(last.shapes),
        "sampler": getattr(samplers[-1], "name", type(samplers[-1]).__name__),
        "guidance": last.guide.describe(),
        "guidance_branches": [b.name for b in last.guide.branches],
        "model_calls_per_step": [list(b) for b in last.batches],
        "experts": [e.build.component for e in experts],
        "expert_per_step": [experts[k].build.component for r in results for k in r.schedule],
        "backend": jax.default_backend(),
        "attention_backend": model.backend,
        "parallel": {"dp": p0.dp, "tp": p0.tp, "sp": p0.sp, "devices": p0.size, "processes": jax.process_count()},
        "offload": {"enabled": bool(offloaded), "chunk_size": cfg.offload.chunk_size,
                    "storage": cfg.offload.storage if offloaded else None,
                    "host_bytes": sum(pl.host.host_bytes() for e in offloaded for pl in e.step.pools)
                    if offloaded else None,
                    "groups": list(placement0.offload_groups),
                    "non_block_weight_bytes": int(tracker.base) if offloaded else None,
                    "chunk_weight_bytes": {pl.name: int(pl.chunk_bytes) for pl in offloaded[0].step.pools}
                    if offloaded else None,
                    # where the streamed chunks live (pinned_host: DMA-able) and, per group from its later steps,
                    # one chunk's transfer and compute timed apart vs streamed together, and the share hidden
                    "host_memory": offloaded[0].step.pools[0].host.memory if offloaded else None,
                    "overlap": {pl.name: pl.overlap for pl in offloaded[0].step.pools} if offloaded else None},
        # Largest per-device bytes of DiT weights resident on devices at any time during sampling (non-block
        # params + the at most two streamed chunks with offload; all params without).
        "peak_resident_weight_bytes": int(tracker.peak),
        "weight_storage": [e.build.weight_storage for e in experts],  # 8-bit block weights per expert, or None
        "audio": decoded.audio is not None,
        "passes": [{"name": p.name, "height": p.run.sampling.height, "width": p.run.sampling.width,
                    "num_steps": r.splan.num_steps, "latent_shape": _shape_list(r.shapes),
                    "per_step_s": _steady(r.step_times)} for p, r in zip(passes, results)],
        "compiled_step": any(r.compiled for r in results),
        "prompt_cache_hits": model.encoders.hits,
    }
    metrics.update(throughput.run_metrics(experts[last.schedule[-1]].build, last.batches, plan.grids[-1],
                                          last.contexts, metrics["per_step_s"], p0.size))
    metrics["attention_calls"] = attention.calls()
    if any(r.cache is not None for r in results):
        metrics["cache"] = results[-1].cache if len(results) == 1 else [r.cache for r in results]
    return metrics


def sample_pass(spec, ckpt, p: SamplingPass, plugins: Plugins, reporter: Reporter, timer: Timer,
                experts: list[Expert], tracker, vae, sampler, guide: Guidance, grid, contexts: list[Any], given: Any,
                *, first: bool, label: str, splan: Any = None, progress: Any = None,
                step_key: Any = None, cond: Any = ..., step_noise: Callable[[int], Any] | None = None
                ) -> PassResult:
    """One denoising pass over the loaded experts: conditioning, plan, the step loop; the final latents on the
    host (after the conditioning's ``finalize``). ``step_key`` names the call structure: a step compiled for the
    same key (and the same grouping of guidance branches) is reused; ``progress`` is told of every step and may
    cancel between steps. A chunked run's window hands its own ``cond`` (else the ``prepare_conditioning`` hook
    gives it) and ``step_noise(i)``, the conditioning's step noise (else the seeded draw)."""
    cfg = p.run
    batches, prompt_index = plan_batches(guide, contexts)
    dp = experts[0].placement.plan.dp
    batch = max(len(b) for b in batches)
    if batch % dp:
        raise UserError(f"parallel.dp={dp} must divide the model batch of {batch} guidance branches of this run: "
                        "change parallel.dp")
    t0 = time.perf_counter()
    if cond is ...:
        cond = plugins.call("prepare_conditioning", spec, ckpt=ckpt, run=cfg, vae=vae, latent_shape=grid)
    _check_per_token(sampler, cond)
    splan = splan if splan is not None else sampling_plan(spec, ckpt, cfg, plugins, sampler, grid)
    schedule = expert_plan.schedule([e.build for e in experts], splan.timesteps, cfg.sampling.boundary_step_index)
    cache_plan = cache_run.pass_plan(spec, plugins, cfg, experts, batches, schedule, np.asarray(splan.timesteps))
    plan = StepPlan(sampler, guide, cond, batches, prompt_index, cache_plan)
    key = None if step_key is None else (step_key, batches)
    compiled = False
    for e in experts:
        compiled |= e.make_step(plan, cfg, tracker, key)
        if e.model is not None and not e.rest_counted:
            tracker.base += sharding.per_device_bytes(e.step.rest)
            e.rest_counted = True
    tracker.peak = max(tracker.peak, tracker.base)
    timer.add("load_s", time.perf_counter() - t0)

    build0, placement0 = experts[0].build, experts[0].placement
    shapes = build0.latent_shape(1, grid)
    latents = start_latents(cfg, sampler, cond, shapes, splan, given)
    repl = placement0.replicated()
    put = lambda tree: jax.tree.map(lambda a: sharding.put(np.asarray(a), repl), tree)
    plan_arrays = put(splan.arrays())
    scales = put(guide.scales(expert_plan.guidance_timesteps([e.build for e in experts], splan.timesteps, schedule)))
    cond_arrays = put(dict(cond.arrays)) if cond is not None else {}
    branch_arrays = put({k: dict(v) for k, v in cond.branch_arrays.items()}) if cond is not None else {}
    x = put(latents)
    state = put(init_state(sampler, splan, latents))
    ctxs = tuple(_context_to_device(c, build0.param_dtype, repl) for c in contexts)
    noise_key = jax.random.fold_in(jax.random.key(cfg.sampling.seed), 1)
    cond_key = jax.random.fold_in(jax.random.key(cfg.sampling.seed), 5)
    step_shape = cond.step_noise_shape if cond is not None else None
    caches = cache_run.initial_states(cache_plan, experts, plan, splan.num_steps, (
        x, np.int32(0), ctxs, plan_arrays, scales, cond_arrays, branch_arrays)) if cache_plan is not None else None

    step_times: list[float] = []
    bar = reporter.bar(splan.num_steps, label, unit="step")
    active = None
    for i in range(splan.num_steps):
        if progress is not None:
            progress.check()
        t_step = time.perf_counter()
        e = experts[schedule[i]]
        if active is not None and active is not e:
            active.release()  # only the active expert's blocks are ever on the devices
        active = e
        noise = put(_draw_noise(jax.random.fold_in(noise_key, i), shapes)) if sampler.needs_noise else None
        arrays_i = cond_arrays if step_shape is None else {
            **cond_arrays, "step_noise": put(step_noise(i) if step_noise is not None else
                                             _draw_noise(jax.random.fold_in(cond_key, i), step_shape))}
        if caches is None:
            x, state = e.step(e.params, x, state, np.int32(i), ctxs, plan_arrays, scales, noise, arrays_i,
                              branch_arrays)
        else:
            carried = {"sampler": state, "cache": caches[schedule[i]]}
            if e.model is not None and cache_plan.schedule:
                carried["host_flags"] = cache_run.host_flags(cache_plan, schedule[i], i)
            x, both = e.step(e.params, x, carried, np.int32(i), ctxs, plan_arrays, scales, noise, arrays_i,
                             branch_arrays)
            state, caches[schedule[i]] = both["sampler"], both["cache"]
        jax.block_until_ready(x)
        step_times.append(time.perf_counter() - t_step)
        bar.update(1)
        if progress is not None:
            progress.step()
    bar.close()
    for e in experts:
        e.release()
    if cond is not None and cond.finalize is not None:
        finalize = experts[0].finalizers.get(key) if key is not None else None
        if finalize is None:
            finalize = jax.jit(cond.finalize)
            if key is not None:
                experts[0].finalizers[key] = finalize
        x = finalize(x, cond_arrays)
    final = jax.tree.map(_to_host, x)
    cache_report = cache_run.pass_report(cache_plan, caches, schedule, [b.name for b in guide.branches]) \
        if cache_plan is not None else None
    return PassResult(final, shapes, splan, guide, batches, schedule, step_times, compiled, contexts, cache_report)


def _follow(bar) -> Callable[[int, int], None]:
    """``on_chunk(done, total)`` for a bar: the VAE says how many chunks there are and how many are done."""

    def on_chunk(done: int, total: int) -> None:
        if total and bar.total != total:
            bar.total = total
        bar.update(max(done - bar.n, 0))

    return on_chunk


def _steady(times: list[float]) -> float:
    """Per-step seconds without the first step's compile: the median of the later steps."""
    return float(np.median(times[1:])) if len(times) > 1 else times[0]


def _shape_list(shapes: Any) -> Any:
    return jax.tree.map(list, shapes, is_leaf=lambda v: isinstance(v, tuple))


def _to_host(x: jax.Array) -> np.ndarray:
    """A (replicated) result as numpy on every process."""
    if jax.process_count() > 1 and not x.is_fully_addressable:
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(x)


def summary(metrics: dict[str, Any]) -> str:
    return (
        f"done in {metrics['total_s']:.1f}s: load {metrics['load_s']:.1f}s, encode {metrics['encode_s']:.1f}s, "
        f"sampling {metrics['sampling_s']:.1f}s (first step's compile {metrics['compile_s']:.1f}s, then "
        f"{metrics['per_step_s']:.3f} s/step), decode {metrics['decode_s']:.1f}s, "
        f"peak RSS {metrics['peak_rss_mb']:.0f} MB"
    )
