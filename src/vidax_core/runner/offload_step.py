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
from flax import nnx

from vidax_core.parallel import offload as offloadlib
from vidax_core.parallel import sharding
from vidax_core.parallel.host_chunks import HostChunks
from vidax_core.runner.step import StepPlan, _scales_at, batch_call_inputs, before_step, branch_inputs, finish


def _top_level(name: str):
    return lambda path, _value: bool(path) and path[0] == name


class ResidentGroup:
    """A block group whose weights stay on the devices: one jitted call over the whole stack."""

    def __init__(self, name: str, graphdef: Any, state: Any, run_group) -> None:
        self.name, self.state = name, state
        self.chunk_bytes = 0
        self._fn = jax.jit(lambda st, x, aux: run_group(name, graphdef, st, x, aux))

    def prefetch(self) -> None:
        pass

    def run(self, x: Any, aux: Any, *, prefetch_after=None) -> Any:
        if prefetch_after is not None and prefetch_after is not self:
            prefetch_after.prefetch()
        return self._fn(self.state, x, aux)

    def release(self) -> None:
        pass


class OffloadedStep:
    """Same call signature as the resident step; ``host`` holds the chunks of the groups kept on the host (the
    module's arrays of those groups are shapes only)."""

    def __init__(self, model: nnx.Module, plan: StepPlan, placement: Any, host: Mapping[str, HostChunks],
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

        self.groups: list[Any] = []
        for name, st in zip(groups, group_states):
            gdef, _ = nnx.split(getattr(model, name))
            if name in host:
                self.groups.append(offloadlib.BlockPool(name, gdef, host[name], in_mesh, tracker=tracker))
            else:
                self.groups.append(ResidentGroup(name, gdef, st[name], in_mesh))
        self.pools = [g for g in self.groups if isinstance(g, offloadlib.BlockPool)]
        self.group_names = groups

        def full_model(rest_state):
            return nnx.merge(graphdef, *abstract_groups, rest_state)

        def pre(rest_state, latents, i, contexts, plan_arrays, scales, cond_arrays, branch_arrays):
            with sharding.activate(mesh, rules):
                m = full_model(rest_state)
                latents = before_step(plan, plan_arrays, i, latents, cond_arrays)
                inputs = branch_inputs(plan, plan_arrays, i, latents, cond_arrays, branch_arrays)
                calls = batch_call_inputs(plan, inputs, contexts, cond_arrays, branch_arrays, _scales_at(scales, i))
                return [m.pre(x, t, ctx, **kw) for x, t, ctx, kw in calls]

        def post(rest_state, hs, auxs, latents, state, i, contexts, plan_arrays, scales, noise, cond_arrays,
                 branch_arrays):
            with sharding.activate(mesh, rules):
                m = full_model(rest_state)
                s_i = _scales_at(scales, i)
                latents = before_step(plan, plan_arrays, i, latents, cond_arrays)
                inputs = branch_inputs(plan, plan_arrays, i, latents, cond_arrays, branch_arrays)
                calls = batch_call_inputs(plan, inputs, contexts, cond_arrays, branch_arrays, s_i)
                preds = [m.post(h, aux, jax.tree.map(lambda a: a.shape, x))
                         for h, aux, (x, _, _, _) in zip(hs, auxs, calls)]
                return finish(plan, plan_arrays, i, latents, state, noise, cond_arrays, branch_arrays, s_i, inputs,
                              preds)

        self._between = None
        if hasattr(model, "between_groups"):
            def between(rest_state, before, after, x, aux):
                with sharding.activate(mesh, rules):
                    return full_model(rest_state).between_groups(before, after, x, aux)

            self._between = jax.jit(between, static_argnums=(1, 2))
        self._pre = jax.jit(pre)
        self._post = jax.jit(post, donate_argnums=(3, 4))

    def __call__(self, params, latents, state, i, contexts, plan_arrays, scales, noise, cond_arrays, branch_arrays):
        outs = self._pre(self.rest, latents, i, contexts, plan_arrays, scales, cond_arrays, branch_arrays)
        hs, auxs = [], []
        first_pool = self.pools[0] if self.pools else None
        for b, (h, aux) in enumerate(outs):
            for k, group in enumerate(self.groups):
                if k and self._between is not None:
                    h = self._between(self.rest, self.group_names[k - 1], self.group_names[k], h, aux)
                later = [g for g in self.groups[k + 1:] if isinstance(g, offloadlib.BlockPool)]
                nxt = later[0] if later else first_pool  # the next streamed group, or the first one again
                h = group.run(h, aux, prefetch_after=nxt)
            hs.append(h)
            auxs.append(aux)
        return self._post(self.rest, hs, auxs, latents, state, i, contexts, plan_arrays, scales, noise, cond_arrays,
                          branch_arrays)

    def release(self) -> None:
        for g in self.groups:
            g.release()
