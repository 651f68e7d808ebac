"""The denoising step: every guidance branch through the denoiser, conditioning, guidance, sampler update.

One step is ONE jitted function (resident weights), or jit(pre) -> the block groups -> jit(post) when blocks are
streamed from the host; either way it compiles once per run shape and the Python loop passes the step index as a
traced value. Latents, predictions and text contexts may be pytrees (video + audio latents; text hidden states
with masks and pooled vectors).

Branches whose inputs have the same shapes and no branch-only static inputs are stacked on the batch axis into one
model call (the batch is then split over ``dp``); the others run as separate calls inside the same step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.guidance import Guidance
from vidax_core.model_api import Conditioning
from vidax_core.parallel import sharding
from vidax_core.schedulers import base as sched_base


@dataclass(frozen=True)
class StepPlan:
    """Everything static about a run's step: the sampler, the guidance strategy, the conditioning, and how the
    branches are grouped into model calls (``batches``: tuples of branch names) and which prompt each reads."""

    sampler: sched_base.Sampler
    guidance: Guidance
    cond: Conditioning | None
    batches: tuple[tuple[str, ...], ...]
    prompt_index: Mapping[str, int] = field(default_factory=dict)
    cache: Any = None  # a vidax_core.cache.plan.CachePlan: the state is then {"sampler": ..., "cache": ...}


def plan_batches(guidance: Guidance, contexts: Sequence[Any], together: bool = True
                 ) -> tuple[tuple[tuple[str, ...], ...], dict[str, int]]:
    """Group the branches into model calls: branches whose contexts have the same structure and shapes and that
    the strategy lets share a call (:meth:`~vidax_core.guidance.Guidance.shares_call`) share one (``together``;
    else each branch is its own call: ``runtime.batch_branches``). Returns (batches, branch name -> prompt
    index)."""
    prompt_index = {b.name: guidance.prompts.index(b.prompt) for b in guidance.branches}

    def shape_of(tree):
        return jax.tree.map(lambda a: (tuple(np.shape(a)[1:]), str(np.asarray(a).dtype)), tree)

    def key(name):
        ctx = contexts[prompt_index[name]]
        return jax.tree.structure(ctx), jax.tree.leaves(shape_of(ctx))

    return group_branches(guidance, together, key), prompt_index


def group_branches(guidance: Guidance, together: bool, key: Callable[[str], Any] = lambda name: None
                   ) -> tuple[tuple[str, ...], ...]:
    """The branches in calls, in order: each joins the first call whose ``key`` (its context's shapes) it shares
    and whose branches the strategy lets it join."""
    batches: list[list[str]] = []
    keys: list[Any] = []
    for b in guidance.branches:
        k = key(b.name)
        join = next((j for j, (kj, names) in enumerate(zip(keys, batches))
                     if together and kj == k and guidance.shares_call([*names, b.name])), None)
        if join is None:
            keys.append(k)
            batches.append([b.name])
        else:
            batches[join].append(b.name)
    return tuple(tuple(x) for x in batches)


def _concat(trees: Sequence[Any]) -> Any:
    return trees[0] if len(trees) == 1 else jax.tree.map(lambda *xs: jnp.concatenate(xs, axis=0), *trees)


def _split(tree: Any, n: int) -> list[Any]:
    if n == 1:
        return [tree]
    parts = jax.tree.map(lambda a: jnp.split(a, n, axis=0), tree)
    return [jax.tree.map(lambda p: p[k], parts, is_leaf=lambda x: isinstance(x, list)) for k in range(n)]


def _bcast(a: jax.Array, b: int) -> jax.Array:
    return jnp.broadcast_to(a, (b,) + a.shape[1:])


@dataclass
class BranchInput:
    x: Any
    t: Any
    kwargs: dict = field(default_factory=dict)  # the conditioning's per-step model inputs (``step_kwargs``)


def step_values(plan_arrays, i) -> dict[str, jax.Array]:
    """This step's noise level, model timestep and the next step's model timestep (0 after the last)."""
    ts = plan_arrays["timesteps"]
    n = ts.shape[0]
    nxt = jnp.where(i + 1 < n, ts[jnp.minimum(i + 1, n - 1)], 0)
    return {"sigma": plan_arrays["sigmas"][i].astype(jnp.float32), "timestep": ts[i].astype(jnp.float32),
            "next_timestep": nxt.astype(jnp.float32)}


def _latent_batch(latents: Any) -> int:
    return jax.tree.leaves(latents)[0].shape[0]


def branch_inputs(plan: StepPlan, plan_arrays, i, latents, cond_arrays) -> dict[str, BranchInput]:
    """Each branch's denoiser input and timesteps (``Conditioning.prepare`` with the branch's arrays)."""
    sampler, cond = plan.sampler, plan.cond
    x0 = jax.tree.map(lambda a: sampler.scale_model_input(plan_arrays, i, a), latents)
    t0 = sampler.model_timesteps(plan_arrays, i).astype(jnp.float32)
    values = step_values(plan_arrays, i)
    kwargs = cond.step_kwargs(values) if cond is not None and cond.step_kwargs is not None else {}
    out = {}
    for b in plan.guidance.branches:
        x, t = x0, t0
        if cond is not None and cond.prepare is not None:
            step_arrays = {"sigma": values["sigma"]}  # models fed the noise level
            x, t = cond.prepare(x, t, {**step_arrays, **cond_arrays})
        t = jnp.broadcast_to(t, (_latent_batch(latents),) + jnp.shape(t)[1:]).astype(jnp.float32)
        out[b.name] = BranchInput(x, t, kwargs)
    return out


def batch_call_inputs(plan: StepPlan, inputs: dict[str, BranchInput], contexts, cond_arrays,
                      scales_i) -> list[tuple[Any, Any, Any, dict]]:
    """(x, t, context, kwargs) of each model call: the batch's branches stacked on axis 0."""
    calls = []
    for names in plan.batches:
        xs, ts, ctxs, kws = [], [], [], []
        sizes = [_latent_batch(inputs[n].x) for n in names]
        statics, guided = plan.guidance.call_inputs(names, scales_i, sizes)
        for n, bsz, own in zip(names, sizes, guided):
            inp = inputs[n]
            kw = {k: _bcast(cond_arrays[k], bsz) for k in (plan.cond.model_kwargs if plan.cond else ())}
            kw.update({k: _bcast(jnp.reshape(v, (1,)) if jnp.ndim(v) == 0 else v, bsz) for k, v in inp.kwargs.items()})
            kw.update(own)
            xs.append(inp.x)
            ts.append(inp.t)
            ctxs.append(jax.tree.map(lambda a: _bcast(a, bsz), contexts[plan.prompt_index[n]]))
            kws.append(kw)
        if "kv_cache" in cond_arrays:  # a causal run's KV cache: one row per guidance branch (vidax_core.causal)
            branches = [b.name for b in plan.guidance.branches]
            statics["kv_cache"] = cond_arrays["kv_cache"].rows([branches.index(n) for n in names])
        x = jax.tree.map(lambda a: sharding.constrain(a, ("batch",)), _concat(xs))
        calls.append((x, _concat(ts), _concat(ctxs), {**_concat(kws), **statics}))
    return calls


def finish(plan: StepPlan, plan_arrays, i, latents, state, noise, cond_arrays, scales_i,
           inputs: dict[str, BranchInput], batch_preds: Sequence[Any]):
    """Split the calls' predictions per branch, guidance, sampler update, the conditioning's ``select_update``."""
    cond, sampler = plan.cond, plan.sampler
    preds = {}
    for names, pred in zip(plan.batches, batch_preds):
        for n, p in zip(names, _split(pred, len(names))):
            preds[n] = jax.tree.map(lambda a: a.astype(jnp.float32), p)
    guide_state = None
    if plan.guidance.carries_state:
        state, guide_state = state["sampler"], state["guidance"]
    guided, guide_state = plan.guidance.combine_state(preds, scales_i, latents,
                                                      plan_arrays["sigmas"][i].astype(jnp.float32), guide_state)
    extra = {}
    per_token = cond.per_token_update if cond is not None else False
    if per_token:
        extra["per_token_timesteps"] = inputs[plan.guidance.branches[0].name].t
    if isinstance(latents, dict):
        new, new_state = {}, {}
        for k in latents:
            kw = extra if per_token is True or per_token == k else {}
            new[k], new_state[k] = sampler.step(plan_arrays, state[k], i, guided[k], latents[k],
                                                None if noise is None else noise[k], **kw)
    else:
        new, new_state = sampler.step(plan_arrays, state, i, guided, latents, noise, **extra)
    if cond is not None and cond.select_update is not None:
        new = cond.select_update(new, latents, plan_arrays["timesteps"][i].astype(jnp.float32), cond_arrays)
    if plan.guidance.carries_state:
        new_state = {"sampler": new_state, "guidance": guide_state}
    return new, new_state


def _scales_at(scales, i):
    return {k: v[i] for k, v in scales.items()}


def make_step(graphdef: nnx.GraphDef, plan: StepPlan, mesh=None, rules=None):
    """The jitted step with resident weights:
    ``step(params, latents, state, i, contexts, plan_arrays, scales, noise, cond_arrays)``."""

    def step(params, latents, state, i, contexts, plan_arrays, scales, noise, cond_arrays):
        with sharding.activate(mesh, rules):
            model = nnx.merge(graphdef, params)
            s_i = _scales_at(scales, i)
            inputs = branch_inputs(plan, plan_arrays, i, latents, cond_arrays)
            calls = batch_call_inputs(plan, inputs, contexts, cond_arrays, s_i)
            if plan.cache is None:
                preds = [model(x, t, ctx, **kw) for x, t, ctx, kw in calls]
                return finish(plan, plan_arrays, i, latents, state, noise, cond_arrays, s_i, inputs,
                              preds)
            from vidax_core.cache.plan import step_calls

            preds, cache = step_calls(model, plan.cache, plan.batches, calls, state["cache"], i)
            new, sampler_state = finish(plan, plan_arrays, i, latents, state["sampler"], noise, cond_arrays, s_i,
                                        inputs, preds)
            return new, {"sampler": sampler_state, "cache": cache}

    return jax.jit(step, donate_argnums=(1, 2))


def call_carries(model_fn, plan: StepPlan, latents, i, contexts, plan_arrays, scales, cond_arrays):
    """Shapes of each model call's block-stack carry (``model.pre``'s first output), traced only: what the step
    cache's state is shaped like. ``model_fn()`` gives the model inside the trace."""

    def carries(latents, i, contexts, plan_arrays, scales, cond_arrays):
        model = model_fn()
        s_i = _scales_at(scales, i)
        inputs = branch_inputs(plan, plan_arrays, i, latents, cond_arrays)
        calls = batch_call_inputs(plan, inputs, contexts, cond_arrays, s_i)
        return [model.pre(x, t, ctx, **kw)[0] for x, t, ctx, kw in calls]

    return jax.eval_shape(carries, latents, i, contexts, plan_arrays, scales, cond_arrays)


def init_state(sampler: sched_base.Sampler, sampler_plan, latents: Any, guidance: Guidance | None = None) -> Any:
    """The sampler's multistep state, one per latent stream; with a ``guidance`` that carries state,
    ``{"sampler": that, "guidance": guidance.init_state(latents)}``."""
    if isinstance(latents, dict):
        state = {k: sampler.init_state(sampler_plan, jnp.asarray(v)) for k, v in latents.items()}
    else:
        state = sampler.init_state(sampler_plan, jnp.asarray(latents))
    if guidance is not None and guidance.carries_state:
        return {"sampler": state, "guidance": guidance.init_state(latents)}
    return state
