"""One denoising pass over the loaded experts: conditioning, start latents, the step loop, the final latents.

The denoising step (all guidance branches, conditioning, guidance, sampler update) is ONE jitted function
(:mod:`vidax_core.runner.step`) called from a Python loop with the step index as a traced value, so it compiles
once per call structure and the loop can report progress and be cancelled between steps.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from vidax_core.config import RunConfig
from vidax_core.errors import UserError
from vidax_core.guidance import Guidance
from vidax_core.io.noise import load_initial_noise, load_npz_noise
from vidax_core.model_api import Conditioning, SamplingPass
from vidax_core.parallel import sharding
from vidax_core.plugins import Plugins
from vidax_core.cache import run as cache_run
from vidax_core.runner import finite
from vidax_core.runner import experts as expert_plan
from vidax_core.runner.denoiser import Expert
from vidax_core.runner.plan import sampling_plan
from vidax_core.report.progress import Reporter, Timer
from vidax_core.runner.step import StepPlan, init_state, plan_batches


KEPT_FINALIZERS = 8  # compiled conditioning finalizers a loaded pipe keeps, as it keeps 8 compiled steps


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
    cache: dict | None = None  # the step cache's report (vidax_core.cache.plan.report)
    window: int | None = None  # a chunked run's window this pass sampled


def sample_pass(spec, ckpt, p: SamplingPass, plugins: Plugins, reporter: Reporter, timer: Timer,
                experts: list[Expert], tracker, vae, sampler, guide: Guidance, grid, contexts: list[Any], given: Any,
                *, cond: Conditioning | None, label: str, splan: Any = None, progress: Any = None,
                step_key: Any = None, step_noise: Callable[[int], Any] | None = None,
                device_arrays: dict | None = None) -> PassResult:
    """One denoising pass over the loaded experts with the pass's conditioning ``cond`` (the
    ``prepare_conditioning`` hook's, or a chunked run's window's; None for none): plan, the step loop; the final
    latents on the host (after the conditioning's ``finalize``). ``step_key`` names the call structure: a step
    compiled for the same key (and the same grouping of guidance branches) is reused; ``progress`` is told of every
    step and may cancel between steps. ``step_noise(i)``: the conditioning's step noise (None: the seeded draw).
    ``device_arrays``: step inputs already on the devices, beside the conditioning's (a causal run's ``kv_cache``)."""
    cfg = p.run
    batches, prompt_index = plan_batches(guide, contexts, cfg.runtime.batch_branches)
    dp = experts[0].placement.plan.dp
    batch = max(len(b) for b in batches)
    if batch % dp:
        raise UserError(f"parallel.dp={dp} must divide the model batch of {batch} guidance branches of this run: "
                        "change parallel.dp")
    t0 = time.perf_counter()
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

    def put(tree):
        return jax.tree.map(lambda a: sharding.put_value(a, repl), tree)

    plan_arrays = put(splan.arrays())
    scales = put(guide.scales(expert_plan.guidance_timesteps([e.build for e in experts], splan.timesteps, schedule)))
    cond_arrays = put(dict(cond.arrays)) if cond is not None else {}
    if device_arrays:
        cond_arrays = {**cond_arrays, **device_arrays}
    x = put(latents)
    state = put(init_state(sampler, splan, latents, guide))
    ctxs = tuple(_context_to_device(c, build0.param_dtype, repl) for c in contexts)
    noise_key = jax.random.fold_in(jax.random.key(cfg.sampling.seed), 1)
    cond_key = jax.random.fold_in(jax.random.key(cfg.sampling.seed), 5)
    step_shape = cond.step_noise_shape if cond is not None else None
    caches = cache_run.initial_states(cache_plan, experts, plan, splan.num_steps, (
        x, np.int32(0), ctxs, plan_arrays, scales, cond_arrays)) if cache_plan is not None else None

    finite.check_start(latents, label)
    guard = finite.StepGuard(label, splan.num_steps)  # NaN latents stop the run, read without an extra sync
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
            x, state = e.step(e.params, x, state, np.int32(i), ctxs, plan_arrays, scales, noise, arrays_i)
        else:
            carried = {"sampler": state, "cache": caches[schedule[i]]}
            if e.model is not None and cache_plan.schedule:
                carried["host_flags"] = cache_run.host_flags(cache_plan, schedule[i], i)
            x, both = e.step(e.params, x, carried, np.int32(i), ctxs, plan_arrays, scales, noise, arrays_i)
            state, caches[schedule[i]] = both["sampler"], both["cache"]
        jax.block_until_ready(x)
        guard.after(i, x)
        step_times.append(time.perf_counter() - t_step)
        bar.update(1)
        if progress is not None:
            progress.step()
    bar.close()
    guard.end()
    for e in experts:
        e.release()
    if cond is not None and cond.finalize is not None:
        finalize = experts[0].finalizers.get(key) if key is not None else None
        if finalize is None:
            finalize = jax.jit(cond.finalize)
            if key is not None:  # kept as the steps are: the last few call structures (a server sees many)
                kept = experts[0].finalizers
                while len(kept) >= KEPT_FINALIZERS:
                    kept.pop(next(iter(kept)))
                kept[key] = finalize
        x = finalize(x, cond_arrays)
    final = jax.tree.map(_to_host, x)
    cache_report = cache_run.pass_report(cache_plan, caches, schedule, [b.name for b in guide.branches]) \
        if cache_plan is not None else None
    return PassResult(final, shapes, splan, guide, batches, schedule, step_times, compiled, contexts, cache_report)


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


def initial_latents(cfg: RunConfig, shapes: Any) -> Any:
    """``sampling.initial_noise`` (a .npy, or a .npz with one array per latent stream) or a seeded draw."""
    path = cfg.sampling.initial_noise
    if not path:
        return _draw_noise(jax.random.key(cfg.sampling.seed), shapes)
    if not isinstance(shapes, dict):
        return load_initial_noise(path, shapes)
    return load_npz_noise(path, shapes)


def _draw_noise(key, shapes: Any) -> Any:
    if isinstance(shapes, dict):
        return {k: np.asarray(jax.random.normal(jax.random.fold_in(key, n), tuple(s), jnp.float32))
                for n, (k, s) in enumerate(sorted(shapes.items()))}
    return np.asarray(jax.random.normal(key, tuple(shapes), jnp.float32))


def _context_to_device(ctx: Any, dtype: Any, repl) -> Any:
    def put(a):
        a = np.asarray(a)
        if np.issubdtype(a.dtype, np.floating):
            a = a.astype(dtype)
        return sharding.put(a, repl)

    return jax.tree.map(put, ctx)


def _check_per_token(sampler, cond: Conditioning | None) -> None:
    if cond is not None and cond.per_token_update:
        import inspect

        if "per_token_timesteps" not in inspect.signature(sampler.step).parameters:
            raise UserError(f"sampler {sampler.name} has no per-token update, which this model's conditioning needs: "
                            "use sampling.scheduler=flow_euler")


def _to_host(x: jax.Array) -> np.ndarray:
    """A (replicated) result as numpy on every process."""
    if jax.process_count() > 1 and not x.is_fully_addressable:
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(x)
