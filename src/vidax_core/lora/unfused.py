"""Adapters unfused (``lora_mode: unfused``): the low-rank factors are parameters of the step, not part of W.

Each adapted Linear of the model gets four parameters beside its kernel (:class:`vidax_core.nn.layers.Linear`):
``lora_down`` (in, R), ``lora_up`` (R, out), ``lora_scale`` (R,) and, where an adapter has a bias delta,
``lora_bias`` (out,), stacked on the layer axis like the kernel, so ``y = x @ W + ((x @ down) * scale) @ up``.
R is the sum of the ranks of the adapters on that layer; each adapter's columns carry its ``scale * alpha / rank``.
These are ordinary parameters of the jitted step: another scale, or another adapter that fits the same slots
(same layers, rank at most R, zeros padding the rest), is new values of the same shapes, so the compiled step is
reused; nothing is fused into W.

The factors reach the model's layout through the family's own conversion table (:func:`vidax_core.io.convert.route`
gives each checkpoint tensor's parameter path and layer): a weight whose rule is the Linear transpose
(``(out, in) -> (in, out)``) takes ``down.T`` and ``up.T``. What cannot be mapped that way is refused in one line,
every case listed: a ``.diff`` full delta, a module the checkpoint holds split (HunyuanVideo's fused ``qkv`` /
``linear1`` in the original layout), a convolution or other reshaped weight, a family that converts with its own
code instead of a key table (HunyuanVideo), and block offload.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

import numpy as np

from vidax_core.errors import UserError
from vidax_core.lora.check import SHOWN, Target

PARTS = ("lora_down", "lora_up", "lora_scale", "lora_bias")
FUSED_HINT = "use lora_mode: fused (the default)"


@dataclass(frozen=True)
class Slot:
    """The factor parameters of one Linear: its model path, stacked layers (None: not stacked), sizes, rank R."""

    module: tuple
    layers: int | None
    d_in: int
    d_out: int
    rank: int
    bias: bool


@dataclass
class Factors:
    """One component's mapped factors: per (module, layer) the low-rank pieces [(down (in, r), up (r, out),
    column scale)] and the summed bias delta."""

    lowrank: dict[tuple, list] = field(default_factory=dict)
    bias: dict[tuple, np.ndarray] = field(default_factory=dict)

    def ranks(self) -> dict[tuple, int]:
        out: dict[tuple, int] = {}
        for (module, layer), pieces in self.lowrank.items():
            out[(module, layer)] = sum(d.shape[1] for d, _, _ in pieces)
        return out


def _is_transpose(transform: Any) -> bool:
    """Whether a rule's transform turns a torch Linear weight (out, in) into its kernel (in, out), by a probe."""
    if transform is None:
        return False
    probe = np.arange(15, dtype=np.float64).reshape(3, 5)
    try:
        got = np.asarray(transform(probe))
    except Exception:  # noqa: BLE001 - a transform that cannot take a plain matrix is not the transpose
        return False
    return got.shape == (5, 3) and bool((got == probe.T).all())


def rules_for(plugins: Any, spec: Any, component: str) -> Sequence[Any]:
    """The family's conversion table of ``component``, or one error when it converts with its own code."""
    from vidax_core.family import FamilyPlugin

    obj = plugins.family_object(spec) if hasattr(plugins, "family_object") else None
    rules = obj.conversion_rules(component) if obj is not None else None
    if obj is None or rules is None or type(obj).convert_checkpoint is not FamilyPlugin.convert_checkpoint:
        raise UserError(f"lora_mode=unfused: the {spec.family} plugin converts its checkpoint with its own code, "
                        f"not a key table, so adapter factors cannot be mapped onto {spec.id}'s layers; {FUSED_HINT}")
    return rules


def _linear_of(path: tuple, abstract: Mapping[tuple, Any]) -> tuple | None:
    """The module path of a Linear's ``kernel`` / ``bias`` parameter (None: not a Linear parameter)."""
    if not path or path[-1] not in ("kernel", "bias") or path[:-1] + ("kernel",) not in abstract:
        return None
    return path[:-1]


def factors(items: Sequence[tuple[float, Sequence[Target]]], rules: Sequence[Any], abstract: Mapping[tuple, Any],
            model: str) -> Factors:
    """Every adapter's targets (``[(scale, targets)]``) mapped into the model's layout; one error listing every
    target that cannot be applied unfused."""
    from vidax_core.io.convert import route

    out, problems = Factors(), []
    for scale, targets in items:
        for t in targets:
            rec, first = t.record, next(iter(t.record.keys.values()))
            if "diff" in rec.parts:
                problems.append(f"{rec.keys['diff']}: a full weight delta (.diff) has no low-rank factors")
                continue
            if t.src is not None:
                problems.append(f"{first}: {rec.name} lands on part of {t.module} (a module the checkpoint holds "
                                "split)")
                continue
            if "down" in rec.parts:
                hit = route(t.weight_key, rules) if t.weight_key else None
                module = _linear_of(hit[1], abstract) if hit else None
                if hit is None or module is None or hit[1][-1] != "kernel" or not _is_transpose(hit[0].transform) \
                        or np.ndim(rec.parts["down"]) != 2:
                    problems.append(f"{first}: {t.weight_key} is not a plain Linear weight in {model}'s layout "
                                    "(its conversion reshapes it)")
                    continue
                down = np.asarray(rec.parts["down"], np.float32)
                up = np.asarray(rec.parts["up"], np.float32).reshape(np.shape(rec.parts["up"])[0], -1)
                col = np.full(down.shape[0], scale * t.factor, np.float32)
                out.lowrank.setdefault((module, hit[2]), []).append((down.T, up.T, col))
            bias = [p for p in ("up_bias", "diff_b") if p in rec.parts]
            if bias:
                hit = route(t.bias_key, rules) if t.bias_key else None
                module = _linear_of(hit[1], abstract) if hit else None
                if hit is None or module is None or hit[1][-1] != "bias" or hit[0].transform is not None:
                    problems.append(f"{rec.keys[bias[0]]}: {t.bias_key} is not a Linear bias in {model}'s layout")
                    continue
                delta = np.zeros(np.shape(rec.parts[bias[0]]), np.float32)
                if "up_bias" in rec.parts:
                    delta += np.float32(t.factor) * np.asarray(rec.parts["up_bias"], np.float32)
                if "diff_b" in rec.parts:
                    delta += np.asarray(rec.parts["diff_b"], np.float32)
                key = (module, hit[2])
                out.bias[key] = out.bias.get(key, 0) + np.float32(scale) * delta
    if problems:
        shown = "; ".join(problems[:SHOWN]) + (f"; ... ({len(problems) - SHOWN} more)" if len(problems) > SHOWN else "")
        raise UserError(f"lora_mode=unfused cannot apply {len(problems)} part{'s' if len(problems) > 1 else ''} of "
                        f"the adapters on {model} ({shown}); {FUSED_HINT}")
    return out


def slots_of(f: Factors, abstract: Mapping[tuple, Any]) -> dict[tuple, Slot]:
    """The slots that hold ``f``: per Linear, the largest rank over its layers, a bias slot where one has a delta."""
    ranks: dict[tuple, int] = {}
    for (module, _), r in f.ranks().items():
        ranks[module] = max(ranks.get(module, 0), r)
    out = {}
    for module in set(ranks) | {m for m, _ in f.bias}:
        shape = tuple(abstract[module + ("kernel",)].shape)
        stacked = any(layer is not None for m, layer in list(f.lowrank) + list(f.bias) if m == module)
        out[module] = Slot(module, shape[0] if stacked else None, shape[-2], shape[-1], ranks.get(module, 0),
                           any(m == module for m, _ in f.bias))
    return out


def fit(f: Factors, slots: Mapping[tuple, Slot], where: str) -> None:
    """One error when ``f`` needs a layer, a rank or a bias delta the loaded slots do not have."""
    problems = []
    for (module, layer), r in f.ranks().items():
        s = slots.get(module)
        name = "/".join(map(str, module)) + ("" if layer is None else f" (layer {layer})")
        if s is None or s.rank == 0:
            problems.append(f"{name} has no adapter slot")
        elif r > s.rank:
            problems.append(f"{name} needs rank {r}, its slot has {s.rank}")
    for module, layer in f.bias:
        if module not in slots or not slots[module].bias:
            problems.append("/".join(map(str, module)) + " has no bias-delta slot")
    if problems:
        raise UserError(f"{where}: these adapters do not fit the slots the pipe was loaded with "
                        f"({'; '.join(problems[:SHOWN])}): load again with them in lora: (slots are sized by the "
                        "load's adapters)")


def values(f: Factors, slots: Mapping[tuple, Slot],
           abstract: Mapping[tuple, Any] | None = None) -> dict[tuple, np.ndarray]:
    """The slot parameters holding ``f`` (zeros where it has nothing), cast to ``abstract``'s dtypes if given."""
    out: dict[tuple, np.ndarray] = {}
    for module, s in slots.items():
        lead = (s.layers,) if s.layers is not None else ()
        arrays = {"lora_down": np.zeros(lead + (s.d_in, s.rank), np.float32),
                  "lora_up": np.zeros(lead + (s.rank, s.d_out), np.float32),
                  "lora_scale": np.zeros(lead + (s.rank,), np.float32)}
        if s.bias:
            arrays["lora_bias"] = np.zeros(lead + (s.d_out,), np.float32)
        if s.rank == 0:
            del arrays["lora_down"], arrays["lora_up"], arrays["lora_scale"]
        for (m, layer), pieces in f.lowrank.items():
            if m != module:
                continue
            at = () if layer is None else (layer,)
            col = 0
            for down, up, scale in pieces:
                r = down.shape[1]
                arrays["lora_down"][at + (slice(None), slice(col, col + r))] = down
                arrays["lora_up"][at + (slice(col, col + r),)] = up
                arrays["lora_scale"][at + (slice(col, col + r),)] = scale
                col += r
        for (m, layer), delta in f.bias.items():
            if m == module:
                arrays["lora_bias"][() if layer is None else (layer,)] = delta
        for part, a in arrays.items():
            path = module + (part,)
            dtype = np.dtype(abstract[path].dtype) if abstract is not None and path in abstract else np.float32
            out[path] = a.astype(dtype)
    return out


def attach(model: Any, slots: Mapping[tuple, Slot]) -> Any:
    """``model`` with zero factor parameters on each slot's Linear (run under ``nnx.eval_shape`` by the build)."""
    import jax.numpy as jnp
    from flax import nnx

    from vidax_core.nn.layers import Linear, param

    linears = {tuple(p): n for p, n in nnx.iter_graph(model) if isinstance(n, Linear)}
    for module, s in slots.items():
        lin = linears.get(module)
        if lin is None:
            raise UserError(f"lora_mode=unfused: {'/'.join(map(str, module))} "
                            f"is not a vidax Linear layer; {FUSED_HINT}")
        k = lin.kernel
        names = tuple(k.get_metadata().get("out_sharding") or (None,) * k[...].ndim)
        lead, (n_in, n_out) = names[:-2], names[-2:]
        shape = (s.layers,) if s.layers is not None else ()
        dtype = lin.compute_dtype or k[...].dtype
        if s.rank:
            lin.lora_down = param(jnp.zeros(shape + (s.d_in, s.rank), dtype), lead + (n_in, None))
            lin.lora_up = param(jnp.zeros(shape + (s.rank, s.d_out), dtype), lead + (None, n_out))
            lin.lora_scale = param(jnp.zeros(shape + (s.rank,), jnp.float32), lead + (None,))
        if s.bias:
            lin.lora_bias = param(jnp.zeros(shape + (s.d_out,), jnp.float32), lead + (n_out,))
    return model


@dataclass
class Unfused:
    """A load's unfused adapters: per component its conversion table, slots and current factors."""

    rules: dict[str, Sequence[Any]]
    abstract: dict[str, Mapping[tuple, Any]]
    slots: dict[str, dict[tuple, Slot]]
    current: dict[str, Factors]
    model: str

    def values(self, component: str, abstract: Mapping[tuple, Any] | None = None) -> dict[tuple, np.ndarray]:
        return values(self.current.get(component, Factors()), self.slots.get(component, {}), abstract)

    def swap(self, prepared: Any, where: str = "lora") -> dict[str, dict[tuple, np.ndarray]]:
        """The new slot values of every component for the adapters of ``prepared`` (checked to fit)."""
        new = {}
        for comp in self.slots:
            f = factors(prepared.targets.get(comp, []), self.rules[comp], self.abstract[comp], self.model)
            fit(f, self.slots[comp], where)
            new[comp] = f
        self.current = new
        return {comp: self.values(comp) for comp in self.slots}


def plan(cfg: Any, spec: Any, builds: Sequence[Any], prepared: Any, plugins: Any) -> list:
    """Switch ``prepared`` to the unfused mode and return the builds whose models carry the factor slots."""
    from vidax_core.nn.state import abstract_model

    if cfg.offload.enabled:
        raise UserError(f"lora_mode=unfused does not combine with offload.enabled (streamed blocks would need their "
                        f"factors streamed and swapped too); {FUSED_HINT}, or turn offload off")
    rules, abstract, slots, current, out = {}, {}, {}, {}, []
    for b in builds:
        comp = b.component
        rules[comp] = rules_for(plugins, spec, comp)
        abstract[comp] = abstract_model(b.ctor)[2]
        current[comp] = factors(prepared.targets.get(comp, []), rules[comp], abstract[comp], spec.id)
        slots[comp] = slots_of(current[comp], abstract[comp])
        ctor, s = b.ctor, slots[comp]
        out.append(replace(b, ctor=lambda ctor=ctor, s=s: attach(ctor(), s)) if s else b)
    prepared.unfused = Unfused(rules, abstract, slots, current, spec.id)
    prepared.deltas = {}
    return out
