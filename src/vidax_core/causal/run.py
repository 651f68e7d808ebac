"""The KV cache of one causal call (or of a session a later call continues), and the model call that writes a
finished chunk into it.

:class:`CausalCache` allocates the family's :class:`~.kv.CacheSpec` once, for the call's model batch (one row per
guidance branch: each branch attends to the past as that branch's prompt made it), placed on the denoiser's mesh.
The steps of every window read it (:meth:`CausalCache.read`: the cache under the window's view, a keyword input of
the step's model calls, each call taking its branches' rows); after a window :meth:`CausalCache.fill` runs the
family's cache-writing call (:class:`vidax_core.windows.CacheFill`): the model at the fill's latents, timestep and
keyword inputs, every branch with its own prompt, the cache donated and written in place. With resident weights
that is one jitted program per fill shape; with blocks streamed from the host the cache rides through the block
groups in the carry (:class:`vidax_core.runner.offload_step.OffloadedCall`).
"""

from __future__ import annotations

from typing import Any, Sequence

import jax
import numpy as np
from flax import nnx

from vidax_core.parallel import sharding

from .kv import CacheSpec, KVCache, View, allocate


class CausalCache:
    """The cache of a causal run over ``experts[0]`` (a causal family has one denoiser); ``guide``: the call's
    guidance (its branches are the cache's rows), ``contexts``: the host prompt contexts, by the guide's prompts."""

    def __init__(self, spec: CacheSpec, guide: Any, contexts: Sequence[Any], experts: list, tracker: Any) -> None:
        if len(experts) != 1:
            raise ValueError("a causal run has one denoiser")
        self.spec, self.expert, self.tracker = spec, experts[0], tracker
        pl = self.expert.placement
        self._repl = pl.replicated()
        self.use(guide, contexts)
        self.cache = allocate(spec, len(guide.branches), pl.mesh, pl.rules)
        self.fills = 0

    def use(self, guide: Any, contexts: Sequence[Any]) -> None:
        """Write later fills with these prompt contexts (a continuation may change the prompt; the branches, one
        cache row each, stay: :class:`vidax_core.causal.session.CausalSession` checks them)."""
        from vidax_core.runner.sampling import _context_to_device
        from vidax_core.runner.step import plan_batches

        names = [b.name for b in guide.branches]
        batches, prompt_index = plan_batches(guide, contexts)
        self.calls = [(tuple(names.index(n) for n in call), tuple(prompt_index[n] for n in call)) for call in batches]
        self.contexts = tuple(_context_to_device(c, self.expert.build.param_dtype, self._repl) for c in contexts)

    @property
    def bytes(self) -> int:
        return self.spec.bytes(self.cache.batch)

    def read(self, view: View) -> KVCache:
        """The cache as a window's steps read it."""
        return self.cache.with_view(view)

    def fill(self, fill: Any) -> None:
        """Run ``fill`` (:class:`vidax_core.windows.CacheFill`): the model writes its tokens into the cache."""
        put = lambda a: sharding.put_value(a, self._repl)  # noqa: E731
        x = put(np.asarray(fill.latents, np.float32))
        t = put(np.full((1,), fill.timestep, np.float32))
        kw = {k: put(v) for k, v in dict(fill.arrays).items()}
        starts = put(np.asarray(fill.starts, np.int32).reshape(-1)) if fill.view.write else None
        cache = self.cache.with_view(fill.view, starts)
        e = self.expert
        if e.model is None:
            key = ("causal-fill", fill.view, tuple(self.calls))
            fn = e.finalizers.get(key)
            if fn is None:
                fn = e.finalizers[key] = _resident_fill(e.graphdef, self.calls, e.placement.mesh, e.placement.rules)
            self.cache = fn(e.params, cache, x, t, self.contexts, kw)
        else:
            call = _offloaded_call(e, self.tracker)
            for rows, prompts in self.calls:
                args = _call_inputs(x, t, self.contexts, kw, rows, prompts)
                out = call(*args[:3], kv_cache=cache.rows(rows), **args[3])
                cache = cache.put_rows(rows, out)
            call.release()  # the next window's steps stream the blocks again
            self.cache = cache
        self.cache = KVCache(self.cache.arrays)
        self.fills += 1

    def close(self) -> None:
        self.cache = None


def _call_inputs(x, t, contexts, kw, rows, prompts):
    """One model call's (x, t, context, keyword inputs) for the branches ``rows`` reading ``prompts``."""
    from vidax_core.runner.step import _bcast, _concat

    b = len(rows) * x.shape[0]
    ctx = _concat([jax.tree.map(lambda a: _bcast(a, x.shape[0]), contexts[p]) for p in prompts])
    return _bcast(x, b), _bcast(t, b), ctx, {k: _bcast(v, b) for k, v in kw.items()}


def _resident_fill(graphdef: Any, calls: list, mesh: Any, rules: Any):
    def fill(params, cache, x, t, contexts, kw):
        with sharding.activate(mesh, rules):
            model = nnx.merge(graphdef, params)
            for rows, prompts in calls:
                xb, tb, ctx, kwb = _call_inputs(x, t, contexts, kw, rows, prompts)
                cache = cache.put_rows(rows, model(xb, tb, ctx, kv_cache=cache.rows(rows), **kwb))
            return cache

    return jax.jit(fill, donate_argnums=(1,))


def _offloaded_call(expert: Any, tracker: Any) -> Any:
    """The expert's streamed model call for cache writes (built once, kept beside its steps)."""
    from vidax_core.runner.offload_step import OffloadedCall

    call = expert.finalizers.get("causal-offloaded-call")
    if call is None:
        call = expert.finalizers["causal-offloaded-call"] = OffloadedCall(
            expert.model, expert.placement, expert.host, tracker, donate=("kv_cache",))
    return call
