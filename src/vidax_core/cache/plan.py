"""A run's step-cache plan, made on the host before the first step: the cache contexts of every model call,
the per-step decisions known ahead (MagCache, TeaCache) as a table the jitted step indexes, the carried state,
and what the metrics report once the video is done (one device-to-host transfer of the step record).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from vidax_core.cache import schedule, tables
from vidax_core.cache.layout import CacheLayout
from vidax_core.cache.stack import CallCache, init_state
from vidax_core.config import cache as cache_key
from vidax_core.errors import UserError


@dataclass(frozen=True)
class Context:
    name: str  # a guidance branch, or "cond+uncond" for a batched call
    branches: tuple[str, ...]
    call: int
    slot: int  # the context's block of rows in its call (its branch's place), or -1 for the whole call


@dataclass(frozen=True)
class CachePlan:
    """Static (hashable) part, read while tracing the step."""

    method: str
    kind: str
    layout: CacheLayout
    contexts: tuple[Context, ...]
    threshold: float = 0.0
    calibrate: bool = False
    schedule: tuple = field(default=(), compare=False)  # per expert: (N, contexts) bool; () when decided on device
    coefficients: tuple = ()  # kind "teacache": the polynomial
    num_steps: int = 0

    def call_cache(self, call: int, names: Sequence[str], batch: int) -> CallCache:
        per = batch // len(names)
        ctx = [(k, c) for k, c in enumerate(self.contexts) if c.call == call]
        rows = tuple((0, batch) if c.slot < 0 else (c.slot * per, (c.slot + 1) * per) for _, c in ctx)
        return CallCache(self.kind, rows, tuple(k for k, _ in ctx), self.threshold, self.calibrate,
                         self.coefficients, self.num_steps)


def contexts_of(batches: Sequence[Sequence[str]], layout: CacheLayout) -> tuple[Context, ...]:
    out = []
    for j, names in enumerate(batches):
        if layout.contexts == "call" or len(names) == 1:
            out.append(Context("+".join(names), tuple(names), j, -1 if len(names) > 1 else 0))
        else:
            out += [Context(n, (n,), j, k) for k, n in enumerate(names)]
    return tuple(out)


def _ratios_file(path: str) -> Any:
    try:
        with open(os.path.expanduser(path)) as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        raise UserError(f"cache.mag_ratios: cannot read {path} ({type(exc).__name__}): give a list of ratios or a "
                        "file written by cache.calibrate=true") from None
    ratios = data.get("mag_ratios") if isinstance(data, dict) else None
    if not isinstance(ratios, (list, dict)):
        raise UserError(f"cache.mag_ratios: {path} holds no mag_ratios (write one with cache.calibrate=true)")
    return ratios


def mag_ratios_for(cfg: cache_key.MagCache, model_id: str) -> Any:
    """A list (every context) or {branch: list}: the run key's, a calibration file's, or the shipped table's."""
    if isinstance(cfg.mag_ratios, str):
        return _ratios_file(cfg.mag_ratios)
    if cfg.mag_ratios is not None:
        return list(cfg.mag_ratios)
    if model_id in tables.MAG_RATIOS:
        return tables.MAG_RATIOS[model_id]
    raise UserError(f"cache.mag_ratios: no published MagCache ratios are shipped for {model_id} "
                    f"(shipped: {', '.join(tables.MAG_RATIOS)}): run once with cache.calibrate=true and name its "
                    "file in cache.mag_ratios")


def _pick(ratios: Any, ctx: Context) -> Any:
    if isinstance(ratios, dict):
        for b in ctx.branches:
            if b in ratios:
                return ratios[b]
        return ratios.get("cond", next(iter(ratios.values())))
    return ratios


def teacache_mode(cfg: cache_key.TeaCache, model_id: str) -> bool:
    """``use_ret_steps`` as the run uses it: the run key's, else the published mode for the model (retention steps
    where the table has them: Wan2.1), else true. A mode the model's reference does not have is refused."""
    table = tables.TEACACHE_COEFFICIENTS.get(model_id)
    if cfg.use_ret_steps is None:
        return table is None or True in table
    if table is not None and cfg.use_ret_steps not in table:
        raise UserError(f"cache.use_ret_steps={str(cfg.use_ret_steps).lower()}: the published TeaCache rule for "
                        f"{model_id} has no such mode: drop cache.use_ret_steps")
    return cfg.use_ret_steps


def teacache_coefficients(cfg: cache_key.TeaCache, model_id: str, use_ret_steps: bool) -> list[float]:
    if cfg.coefficients is not None:
        return list(cfg.coefficients)
    table = tables.TEACACHE_COEFFICIENTS.get(model_id)
    if table is None:
        raise UserError(f"cache.coefficients: no published TeaCache polynomial is shipped for {model_id} "
                        f"(shipped: {', '.join(tables.TEACACHE_COEFFICIENTS)}): give cache.coefficients")
    return table[use_ret_steps]


def make_plan(cfg_dict: Any, model_id: str, layout: CacheLayout, batches, expert_steps: Sequence[Sequence[int]],
              num_steps: int, signal: Any = None, device_signal: bool = False) -> CachePlan | None:
    """The plan of one pass. ``expert_steps[k]`` lists the steps expert ``k`` runs (each expert keeps its own
    cache, as each diffusers transformer has its own hooks); ``signal()`` gives TeaCache's (N,) relative L1
    distances of the modulated timestep input (one device-to-host transfer, before the first step)."""
    cfg = cache_key.parse_cache(cfg_dict, num_steps)
    if cfg is None:
        return None
    method = cache_key.method_of(cfg)
    contexts = contexts_of(batches, layout)
    n_ctx = len(contexts)
    if method == "first_block":
        return CachePlan(method, "first_block", layout, contexts, threshold=float(cfg.threshold))
    tables_: list[np.ndarray] = []
    if method == "mag":
        ratios = None if cfg.calibrate else mag_ratios_for(cfg, model_id)
        for steps in expert_steps:
            table = np.ones((num_steps, n_ctx), bool)
            if not cfg.calibrate:
                for c, ctx in enumerate(contexts):
                    table[list(steps), c] = schedule.mag_flags(
                        _pick(ratios, ctx), len(steps), threshold=cfg.threshold, max_skip_steps=cfg.max_skip_steps,
                        retention_ratio=cfg.retention_ratio, num_inference_steps=num_steps)
            tables_.append(table)
        return CachePlan(method, "residual", layout, contexts, calibrate=cfg.calibrate, schedule=tuple(tables_))
    if len(expert_steps) > 1:
        raise UserError("cache.method=teacache: TeaCache4Wan2.1's rule is for one denoiser; this model switches "
                        "experts: use cache.method=mag or first_block")
    if signal is None and device_signal:  # the signal depends on the latents: decided inside the step
        mode = bool(cfg.use_ret_steps)  # null: the reference's only mode
        if mode:
            raise UserError(f"cache.use_ret_steps=true: TeaCache's rule for {model_id} (decided on the first block's "
                            "input) has no retention steps: drop cache.use_ret_steps")
        coeffs = tuple(float(c) for c in teacache_coefficients(cfg, model_id, mode))
        return CachePlan(method, "teacache", layout, contexts, threshold=float(cfg.threshold), coefficients=coeffs,
                         num_steps=num_steps)
    if signal is None:
        raise UserError(f"cache.method=teacache needs the model's TeaCache signal (teacache_signal or "
                        f"teacache_modulated), which {model_id} does not give: use cache.method=first_block or mag")
    mode = teacache_mode(cfg, model_id)
    coeffs = teacache_coefficients(cfg, model_id, mode)
    flags = schedule.teacache_flags(signal(mode), coeffs, threshold=cfg.threshold, use_ret_steps=mode)
    table = np.repeat(flags[:, None], n_ctx, axis=1)
    return CachePlan(method, "residual", layout, contexts, schedule=(table,))


def init_carried(plan: CachePlan, expert: int, call_names, carry_shapes, num_steps: int) -> dict[str, Any]:
    """The cache state one expert's step carries: per call its residuals, plus the step record."""
    calls = []
    for j, (names, shape) in enumerate(zip(call_names, carry_shapes)):
        hidden = plan.layout.get(shape) if plan.layout.hidden is None or isinstance(shape, (tuple, list)) else None
        if not isinstance(hidden, jax.ShapeDtypeStruct) or len(hidden.shape) != 3:
            raise UserError("cache: this model's block stack carries no single (batch, tokens, width) hidden state "
                            "and its plugin declares no cache_layout saying which part is: set cache=null")
        batch = next(s.shape[0] for s in jax.tree.leaves(shape) if len(s.shape))
        calls.append(init_state(plan.call_cache(j, names, batch), plan.layout, shape))
    n_ctx = len(plan.contexts)
    st: dict[str, Any] = {"calls": calls, "computed": jnp.zeros((num_steps, n_ctx), bool)}
    if plan.schedule:
        st["flags"] = jnp.asarray(plan.schedule[expert])
    if plan.calibrate:
        st["ratio"] = jnp.ones((num_steps, n_ctx), jnp.float32)
    return st


def step_calls(model: Any, plan: CachePlan, batches, calls, cst: dict[str, Any], i: Any):
    """Every model call of one step through its cached stack: (predictions, new cache state)."""
    from vidax_core.cache.stack import cached_blocks

    preds, new_calls = [], []
    computed, ratio = cst["computed"], cst.get("ratio")
    for j, ((x, t, ctx, kw), names) in enumerate(zip(calls, batches)):
        h, aux = model.pre(x, t, ctx, **kw)
        batch = next(a.shape[0] for a in jax.tree.leaves(h) if jnp.ndim(a))
        cc = plan.call_cache(j, names, batch)
        cols = jnp.asarray(cc.columns)
        flags = cst["flags"][i][cols] if "flags" in cst else None
        h, st, did, r = cached_blocks(model, plan.layout, cc, h, aux, cst["calls"][j], flags, i)
        computed = computed.at[i, cols].set(did)
        if ratio is not None:
            ratio = ratio.at[i, cols].set(r)
        new_calls.append(st)
        preds.append(model.post(h, aux, jax.tree.map(lambda a: a.shape, x)))
    out = dict(cst, calls=new_calls, computed=computed)
    if ratio is not None:
        out["ratio"] = ratio
    return preds, out


def report(plan: CachePlan, records: Sequence[Any], expert_of_step: Sequence[int], branches: Sequence[str]) -> dict:
    """The metrics of one pass from each expert's step record (fetched in one transfer per expert)."""
    got = [jax.device_get({k: r[k] for k in ("computed", "ratio") if k in r}) for r in records]
    n = len(expert_of_step)
    comp = np.stack([got[expert_of_step[i]]["computed"][i] for i in range(n)]) if n else np.zeros((0, 0), bool)
    skipped_ctx = ~comp
    per_branch = {}
    for b in branches:
        cols = [c for c, ctx in enumerate(plan.contexts) if b in ctx.branches]
        sk = [i for i in range(n) if all(skipped_ctx[i, c] for c in cols)] if cols else []
        per_branch[b] = {"skipped_steps": sk, "saved_block_stack_evaluations": len(sk)}
    skipped = [i for i in range(n) if skipped_ctx[i].all()]
    out = {"method": plan.method, "computed_steps": [i for i in range(n) if i not in skipped],
           "skipped_steps": skipped, "branches": per_branch,
           "contexts": [c.name for c in plan.contexts]}
    if plan.kind == "first_block":
        out["note"] = "the head block runs on every step"
    if plan.calibrate:
        ratio = np.stack([got[expert_of_step[i]]["ratio"][i] for i in range(n)])
        mags: dict[str, list[float]] = {}
        for c, ctx in enumerate(plan.contexts):
            for b in ctx.branches:
                mags[b] = [round(float(v), 5) for v in ratio[:, c]]
        out["mag_ratios"] = mags
    return out
