"""The denoising step with block groups streamed from host memory: jit(pre) -> every block group -> jit(post).

Every stacked group the model declares in ``block_groups`` runs, in order: the offloaded ones chunk by chunk from
the host (:class:`vidax_core.parallel.offload.BlockPool`), the others from device memory in one jitted call.
A model may define ``between_groups(before, after, x, aux)`` for the transition between two groups (HunyuanVideo
concatenates text and video tokens between its double- and single-stream blocks); the carry may be any pytree.
``pre`` and ``post`` hold the rest of the step (branch inputs, guidance, sampler update), as in
:func:`vidax_core.runner.step.make_step`.
"""

from __future__ import annotations

from typing import Any, Mapping

import jax
import numpy as np
from flax import nnx

from vidax_core.parallel import offload as offloadlib
from vidax_core.parallel import sharding
from vidax_core.parallel.static_aux import StaticOutputs, jit_aux
from vidax_core.parallel.host_chunks import HostChunks
from vidax_core.runner.step import StepPlan, _scales_at, batch_call_inputs, branch_inputs, finish


def _top_level(name: str):
    return lambda path, _value: bool(path) and path[0] == name


class ResidentGroup:
    """A block group whose weights stay on the devices: one jitted call over the whole stack."""

    def __init__(self, name: str, graphdef: Any, state: Any, run_group) -> None:
        self.name, self.state = name, state
        self.chunk_bytes = 0
        self._fn = jit_aux(lambda st, x, aux: run_group(name, graphdef, st, x, aux), 2)

    def prefetch(self) -> None:
        pass

    def run(self, x: Any, aux: Any, *, prefetch_after=None) -> Any:
        if prefetch_after is not None and prefetch_after is not self:
            prefetch_after.prefetch()
        return self._fn(self.state, x, aux)

    def release(self) -> None:
        pass

    def drop(self) -> None:
        self.state = None


def _first_block_parts(cache: Any, batches: Any, head_group: str, head_def: Any, run_group, mesh, rules):
    """The jitted halves of an offloaded FirstBlockCache call: ``head(call, weights, cst, x, aux)`` (the first
    block of ``weights``, a chunk or a resident stack, then the decision) and ``combine(call, cst, head_out,
    out_full, r, compute, i)``."""
    from vidax_core.cache.stack import first_block_combine, first_block_decide

    def cc_of(call, x):
        return cache.call_cache(call, batches[call], next(a.shape[0] for a in jax.tree.leaves(x) if a.ndim))

    def head(call, weights, cst, x, aux):
        out = run_group(head_group, head_def, jax.tree.map(lambda a: a[:1], weights), x, aux)
        with sharding.activate(mesh, rules):
            r, compute = first_block_decide(cache.layout, cc_of(call, x), x, out, cst["calls"][call])
        return out, r, compute

    def combine(call, cst, head_out, out_full, r, compute, i):
        cc = cc_of(call, head_out)
        with sharding.activate(mesh, rules):
            out, st, did, _ = first_block_combine(cc, head_out, out_full, cst["calls"][call], r, compute)
        calls = list(cst["calls"])
        calls[call] = st
        return out, dict(cst, calls=calls, computed=cst["computed"].at[i, jax.numpy.asarray(cc.columns)].set(did))

    return jit_aux(head, 4, static_argnums=(0,)), jax.jit(combine, static_argnums=(0,))


class _Streamed:
    """A model's block groups ready to run in order (the streamed ones a chunk at a time from ``host``, the others
    resident), the rest of its weights (``rest``) and ``full_model(rest)``: the module with shape-only groups, for
    the jitted stages before and after them. :meth:`_stream` runs every group over a carry."""

    def __init__(self, model: nnx.Module, placement: Any, host: Mapping[str, HostChunks],
                 tracker: offloadlib.ResidentTracker) -> None:
        groups = tuple(model.block_groups)
        mesh, rules = placement.mesh, placement.rules
        graphdef, *parts = nnx.split(model, *[_top_level(g) for g in groups], ...)
        group_states, rest = parts[:-1], parts[-1]
        self.rest = rest
        abstract_groups = [jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), st) for st in group_states]
        run_group = type(model).run_block_group

        def in_mesh(n, gd, s, x, aux):
            with sharding.activate(mesh, rules):
                return run_group(n, gd, s, x, aux)

        self._in_mesh = in_mesh
        self.groups: list[Any] = []
        for name, st in zip(groups, group_states):
            gdef, _ = nnx.split(getattr(model, name))
            if name in host:
                self.groups.append(offloadlib.BlockPool(name, gdef, host[name], in_mesh, tracker=tracker))
            else:
                self.groups.append(ResidentGroup(name, gdef, st[name], in_mesh))
        self.pools = [g for g in self.groups if isinstance(g, offloadlib.BlockPool)]
        self.group_names = groups
        self.full_model = lambda rest_state: nnx.merge(graphdef, *abstract_groups, rest_state)
        self._between = None
        if hasattr(model, "between_groups"):
            def between(rest_state, before, after, x, aux):
                with sharding.activate(mesh, rules):
                    return self.full_model(rest_state).between_groups(before, after, x, aux)

            self._between = jit_aux(between, 4, static_argnums=(1, 2))

    def _stream(self, h: Any, aux: Any) -> Any:
        """Every group over ``h`` (donated), each streamed group prefetching the next one (the last group the
        first one again, for the next call or step)."""
        first_pool = self.pools[0] if self.pools else None
        for k, group in enumerate(self.groups):
            if k and self._between is not None:
                h = self._between(self.rest, self.group_names[k - 1], self.group_names[k], h, aux)
            later = [g for g in self.groups[k + 1:] if isinstance(g, offloadlib.BlockPool)]
            h = group.run(h, aux, prefetch_after=later[0] if later else first_pool)
        return h

    def release(self) -> None:
        for g in self.groups:
            g.release()

    def drop_weights(self) -> None:
        """Free every weight this step holds (the groups' and the rest's); what the metrics read stays."""
        for g in self.groups:
            g.drop()
        self.rest = None


class OffloadedCall(_Streamed):
    """One model call with its blocks streamed: ``call(x, t, context, **kwargs)`` -> what the model's ``post``
    returns (jit(pre) -> the groups -> jit(post)); ``donate``: keyword inputs ``pre`` may consume (a causal run's
    KV cache, carried through the blocks and returned)."""

    def __init__(self, model: nnx.Module, placement: Any, host: Mapping[str, HostChunks],
                 tracker: offloadlib.ResidentTracker, donate: tuple[str, ...] = ()) -> None:
        super().__init__(model, placement, host, tracker)
        mesh, rules = placement.mesh, placement.rules

        def pre(rest_state, x, t, ctx, kwargs, donated):
            with sharding.activate(mesh, rules):
                return self.full_model(rest_state).pre(x, t, ctx, **kwargs, **donated)

        def post(rest_state, h, aux, shape):
            with sharding.activate(mesh, rules):
                return self.full_model(rest_state).post(h, aux, shape)

        self.donate = donate
        self._pre = StaticOutputs(pre, key_from=1, donate_argnums=(5,))
        self._post = jit_aux(post, 2, static_argnums=(3,))

    def __call__(self, x: Any, t: Any, ctx: Any, **kwargs: Any) -> Any:
        donated = {k: kwargs.pop(k) for k in self.donate if k in kwargs}
        h, aux = self._pre(self.rest, x, t, ctx, kwargs, donated)
        return self._post(self.rest, self._stream(h, aux), aux, tuple(x.shape))


class OffloadedStep(_Streamed):
    """Same call signature as the resident step; ``host`` holds the chunks of the groups kept on the host (the
    module's arrays of those groups are shapes only)."""

    def __init__(self, model: nnx.Module, plan: StepPlan, placement: Any, host: Mapping[str, HostChunks],
                 tracker: offloadlib.ResidentTracker) -> None:
        super().__init__(model, placement, host, tracker)
        mesh, rules = placement.mesh, placement.rules
        full_model = self.full_model

        def pre(rest_state, latents, i, contexts, plan_arrays, scales, cond_arrays):
            with sharding.activate(mesh, rules):
                m = full_model(rest_state)
                inputs = branch_inputs(plan, plan_arrays, i, latents, cond_arrays)
                calls = batch_call_inputs(plan, inputs, contexts, cond_arrays, _scales_at(scales, i))
                return [m.pre(x, t, ctx, **kw) for x, t, ctx, kw in calls]

        def post(rest_state, hs, auxs, latents, state, i, contexts, plan_arrays, scales, noise, cond_arrays):
            with sharding.activate(mesh, rules):
                m = full_model(rest_state)
                s_i = _scales_at(scales, i)
                inputs = branch_inputs(plan, plan_arrays, i, latents, cond_arrays)
                calls = batch_call_inputs(plan, inputs, contexts, cond_arrays, s_i)
                preds = [m.post(h, aux, jax.tree.map(lambda a: a.shape, x))
                         for h, aux, (x, _, _, _) in zip(hs, auxs, calls)]
                return finish(plan, plan_arrays, i, latents, state, noise, cond_arrays, s_i, inputs,
                              preds)

        # aux leaves that are no arrays (a token grid) stay Python values across the stages (parallel/static_aux.py)
        self._pre = StaticOutputs(pre, key_from=1)
        self._post = jit_aux(post, 2, donate_argnums=(3, 4))
        self.cache = plan.cache
        self._batches = plan.batches
        if plan.cache is not None:
            from vidax_core.cache.stack import residual_combine

            cache = plan.cache

            def combine(call, cst, h_in, h_full, i):
                names = plan.batches[call]
                batch = next(a.shape[0] for a in jax.tree.leaves(h_in) if a.ndim)
                cc = cache.call_cache(call, names, batch)
                cols = jax.numpy.asarray(cc.columns)
                st = cst["calls"][call]
                compute = cst["flags"][i][cols] | ~st["has"]
                with sharding.activate(mesh, rules):
                    out, st, did, r = residual_combine(cache.layout, cc, h_in, h_full, st, compute)
                calls = list(cst["calls"])
                calls[call] = st
                new = dict(cst, calls=calls, computed=cst["computed"].at[i, cols].set(did))
                if "ratio" in cst:
                    new["ratio"] = cst["ratio"].at[i, cols].set(r)
                return out, new

            self._combine = jax.jit(combine, static_argnums=(0,))
            if cache.kind == "first_block":
                self._head, self._fb_combine = _first_block_parts(cache, plan.batches, self.group_names[0],
                                                                  nnx.split(getattr(model, self.group_names[0]))[0],
                                                                  self._in_mesh, mesh, rules)

    def __call__(self, params, latents, state, i, contexts, plan_arrays, scales, noise, cond_arrays):
        cst = host = None
        if self.cache is not None:  # {"sampler", "cache"} and, for a schedule, this step's row on the host
            cst, host, state = state["cache"], state.get("host_flags"), state["sampler"]
        outs = self._pre(self.rest, latents, i, contexts, plan_arrays, scales, cond_arrays)
        hs, auxs = [], []
        for b, (h, aux) in enumerate(outs):
            if cst is None:
                h = self._stream(h, aux)
            elif self.cache.kind == "first_block":
                h, cst = self._first_block_call(b, cst, h, aux, i)
            else:
                h, cst = self._scheduled_call(b, cst, host, h, aux, i)
            hs.append(h)
            auxs.append(aux)
        out = self._post(self.rest, hs, auxs, latents, state, i, contexts, plan_arrays, scales, noise, cond_arrays)
        return out if cst is None else (out[0], {"sampler": out[1], "cache": cst})

    def _scheduled_call(self, b, cst, host, h, aux, i):
        """MagCache / TeaCache: the host knows this step's schedule, so a call whose contexts all skip streams no
        block."""
        batch = next(a.shape[0] for a in jax.tree.leaves(h) if a.ndim)
        cols = list(self.cache.call_cache(b, self._batches[b], batch).columns)
        h_in = jax.tree.map(lambda a: a.copy(), h)  # the groups donate their input
        if not bool(host[cols].any()):
            return self._combine(b, cst, h_in, h_in, i)  # no block runs, none is streamed
        return self._combine(b, cst, h_in, self._stream(h, aux), i)

    def _first_block_call(self, b, cst, h, aux, i):
        """FirstBlockCache: the head block runs on chunk 0 of the first group (the chunk the stack starts from,
        so it is streamed once whatever the decision), the decision comes to the host (one (contexts,) bool read
        per call and step), and the groups are streamed only when a context computes."""
        first = self.groups[0]
        weights = first.first_chunk() if isinstance(first, offloadlib.BlockPool) else first.state
        head_out, r, compute = self._head(b, weights, cst, h, aux)
        if bool(np.asarray(jax.device_get(compute)).any()):
            return self._fb_combine(b, cst, head_out, self._stream(h, aux), r, compute, i)
        return self._fb_combine(b, cst, head_out, head_out, r, compute, i)
