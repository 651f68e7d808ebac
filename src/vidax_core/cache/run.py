"""The runner's side of step caching: the pass's plan (checked against the model and the run), each expert's
initial cache state, the TeaCache signal, and the pass's report. Keeps :mod:`vidax_core.runner.sampling` to a few
calls."""

from __future__ import annotations

from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.cache.layout import layout_for
from vidax_core.cache.plan import CachePlan, init_carried, make_plan, report
from vidax_core.errors import UserError


def _model_of(expert: Any) -> Any:
    return expert.model if expert.model is not None else nnx.merge(expert.graphdef, expert.params)


def host_flags(plan: CachePlan, expert: int, step: int) -> np.ndarray:
    """This step's schedule row on the host (an offloaded expert streams its blocks only when a context computes)."""
    return np.asarray(plan.schedule[expert][step])


def check_model(spec: Any, model_cls: type) -> None:
    """Refuse, in one line, a model the cache cannot run exactly."""
    missing = [n for n in ("pre", "post", "run_block_group", "block_groups") if not hasattr(model_cls, n)]
    if missing:
        raise UserError(f"cache: the denoiser of {spec.id} has no staged forward ({', '.join(missing)}): "
                        "set cache=null")
    if hasattr(model_cls, "between_groups"):
        raise UserError(f"cache: {spec.id} changes its carry between block groups, which the step cache does not "
                        "handle yet: set cache=null")


def teacache_signal(expert: Any, plan_timesteps: np.ndarray, batch: int = 1):
    """``signal(use_ret_steps)``: the (N,) relative L1 distances between consecutive steps' modulated timestep
    input (``e0`` with retention steps, ``e`` without), from the model's ``teacache_signal``; one transfer."""
    model = _model_of(expert)
    if not hasattr(type(model), "teacache_signal"):
        return None

    # the block groups stay out of the trace (they are unused, and streamed ones are shapes only); the rest of
    # the weights are arguments: closed over, each would come back to the host to be embedded as a constant
    groups = tuple(getattr(model, "block_groups", ()))
    graphdef, *parts = nnx.split(model, *[lambda path, _v, g=g: bool(path) and path[0] == g for g in groups], ...)
    abstract = [jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), st) for st in parts[:-1]]

    def signal(use_ret_steps: bool) -> np.ndarray:
        @jax.jit
        def dist(rest, t):
            m_ = nnx.merge(graphdef, *abstract, rest)

            def one(tk):
                return m_.teacache_signal(jnp.broadcast_to(tk, (batch,)).astype(jnp.float32), use_ret_steps)

            m = jax.vmap(one)(t).astype(jnp.float32)
            axes = tuple(range(1, m.ndim))
            prev = jnp.concatenate([m[:1], m[:-1]])
            return jnp.mean(jnp.abs(m - prev), axis=axes) / jnp.mean(jnp.abs(prev), axis=axes)

        return np.asarray(dist(parts[-1], jnp.asarray(plan_timesteps, jnp.float32)), np.float64)

    return signal


def pass_plan(spec: Any, plugins: Any, cfg: Any, experts: Sequence[Any], batches, schedule: Sequence[int],
              timesteps: np.ndarray) -> CachePlan | None:
    if cfg.cache is None:
        return None
    check_model(spec, type(_model_of(experts[0])))
    n = len(schedule)
    expert_steps = [[i for i in range(n) if schedule[i] == k] for k in range(len(experts))]
    signal, device = None, False
    if cfg.cache["method"] == "teacache":
        signal = teacache_signal(experts[0], timesteps)
        device = hasattr(type(_model_of(experts[0])), "teacache_modulated")
        if signal is None and device and cfg.offload.enabled:
            raise UserError(f"cache.method=teacache on {spec.id} decides on the device from the first block's input, "
                            "which vidax does not combine with streamed blocks: use cache.method=first_block with "
                            "offload.enabled=true")
    return make_plan(cfg.cache, spec.id, layout_for(spec, plugins), batches, expert_steps, n, signal, device)


def initial_states(plan: CachePlan, experts: Sequence[Any], step_plan: Any, num_steps: int, args: tuple) -> list:
    """Each expert's initial cache state; ``args`` = (latents, i, contexts, plan_arrays, scales, cond_arrays) as
    the step takes them."""
    from vidax_core.runner.step import call_carries

    out = []
    for k, e in enumerate(experts):
        shapes = call_carries(lambda e=e: _model_of(e), step_plan, *args)
        out.append(init_carried(plan, k, step_plan.batches, shapes, num_steps))
    return out


def pass_report(plan: CachePlan, states: Sequence[Any], schedule: Sequence[int], branches: Sequence[str]) -> dict:
    return report(plan, states, schedule, branches)


def calibration_path(cfg: Any) -> str | None:
    """Where ``calibrate: true`` writes the ratios: beside ``output.metrics`` (else beside ``output.path``) as
    ``<name>.mag_ratios.json``; None when the run writes neither."""
    import os

    base = cfg.output.metrics or cfg.output.path
    return None if not base else os.path.splitext(base)[0] + ".mag_ratios.json"


def write_calibration(cfg: Any, metrics: dict) -> None:
    """Write a calibration run's ratios to :func:`calibration_path` (a file ``cache.mag_ratios`` can name) and
    say where in the metrics."""
    cache = metrics.get("cache")
    if not isinstance(cache, dict) or "mag_ratios" not in cache:
        return
    path = calibration_path(cfg)
    if path is None:
        return
    from vidax_core.io import outputs

    outputs.save_json(path, {"model": metrics.get("model"), "num_inference_steps": metrics.get("num_steps"),
                             "mag_ratios": cache["mag_ratios"]})
    cache["mag_ratios_file"] = path
