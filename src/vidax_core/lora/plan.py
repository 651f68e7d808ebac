"""A run's adapters: each ``lora:`` entry read, normalised, routed to its denoiser (expert) and checked against
that denoiser's checkpoint tensors, before any weight is read (:func:`prepare`); the load then fuses them
(``Prepared.fused``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from vidax_core.errors import UserError
from vidax_core.lora import check, files, formats, fuse, names


@dataclass(frozen=True)
class Summary:
    """What one adapter does, for ``--dry-run``, the metrics and ``vidax lora inspect``."""

    index: int
    path: str
    layout: str
    component: str
    scale: float
    modules: int
    ranks: tuple[int, ...]
    alphas: tuple[float, ...]

    def line(self) -> str:
        ranks = "/".join(map(str, self.ranks)) or "none"
        alphas = "/".join(f"{a:g}" for a in self.alphas) or "none (factor 1)"
        return (f"lora[{self.index}] {self.path}: {self.layout} layout, {self.modules} modules of {self.component}, "
                f"rank {ranks}, alpha {alphas}, scale {self.scale:g}")


@dataclass
class Prepared:
    """Deltas by denoiser component (tensor key -> [(scale, delta)]), the checked targets of each adapter by
    component ([(scale, targets)], for the unfused mode) and one summary per adapter. ``unfused`` (set by
    :func:`vidax_core.lora.unfused.plan`) holds the factors instead: nothing is then fused."""

    deltas: dict[str, dict[str, list]] = field(default_factory=dict)
    summaries: list[Summary] = field(default_factory=list)
    targets: dict[str, list] = field(default_factory=dict)
    unfused: Any = None

    def fused(self, component: str, tensors: Mapping[str, Any]) -> Mapping[str, Any]:
        if self.unfused is not None:
            return tensors
        return fuse.fused(tensors, self.deltas.get(component))

    def slot_values(self, component: str, abstract: Mapping[tuple, Any]) -> dict[tuple, Any]:
        """The unfused factors' parameter values of ``component`` (none when fused)."""
        return {} if self.unfused is None else self.unfused.values(component, abstract)

    def convertible(self, abstract: Mapping[tuple, Any]) -> Mapping[tuple, Any]:
        """The parameters the checkpoint's conversion fills: all but the unfused factor slots."""
        if self.unfused is None:
            return abstract
        from vidax_core.lora.unfused import PARTS

        return {p: v for p, v in abstract.items() if p[-1] not in PARTS}

    @property
    def mode(self) -> str:
        return "fused" if self.unfused is None else "unfused"


def family_lora(plugins: Any, spec: Any) -> tuple[Any, Mapping[str, str]]:
    """(the family's ``lora_key_map``, its expert name -> component map) from its plugin object."""
    obj = plugins.family_object(spec) if hasattr(plugins, "family_object") else None
    fn = getattr(obj, "lora_key_map", None)
    key_map = (lambda layout: fn(spec, layout)) if fn is not None else None
    return key_map, dict(getattr(obj, "lora_experts", {}) or {})


def component_for(entry: Any, where: str, spec: Any, components: Sequence[str], experts: Mapping[str, str]) -> str:
    """The denoiser component an entry's adapter goes to: its ``expert`` on a model with several denoisers."""
    if len(components) == 1:
        if entry.expert is not None:
            raise UserError(f"{where}.expert={entry.expert}: {spec.id} has one denoiser; remove {where}.expert")
        return components[0]
    by_name = {n: c for n, c in experts.items() if c in components}
    if entry.expert is None:
        raise UserError(f"{spec.id} has {len(components)} experts ({', '.join(by_name) or ', '.join(components)}): "
                        f"set {where}.expert to the one this adapter is for")
    if entry.expert not in by_name:
        raise UserError(f"{where}.expert={entry.expert} is not an expert of {spec.id} "
                        f"(its experts: {', '.join(by_name)})")
    return by_name[entry.expert]


def shape_of(src: Mapping[str, Any]):
    def shape(key: str) -> tuple:
        if hasattr(src, "shape"):
            return tuple(src.shape(key))
        value = src[key]
        return tuple(getattr(value, "shape", None) or value().shape)

    return shape


def read_adapter(path: str, weight_name: str | None, where: str, key_map: Any, src: Mapping[str, Any],
                 model: str) -> tuple[formats.Adapter, list[check.Target]]:
    """One adapter file checked against the tensors ``src`` of the denoiser it is fused into."""
    adapter = formats.normalise(files.read(path, weight_name, where))
    keys = set(src)
    layout, mapped = names.resolve(adapter.layout, adapter.records, names.modules_of(keys), key_map)
    adapter.layout = layout if adapter.layout == "plain" else adapter.layout
    return adapter, check.targets(adapter, mapped, keys, shape_of(src), where=where, model=model)


def prepare(cfg: Any, spec: Any, ckpt: Any, builds: Sequence[Any], plugins: Any, *,
            weights_optional: bool = False) -> Prepared:
    """Every ``lora:`` entry of ``cfg`` read and checked (one ``error:`` line for the first bad adapter).
    ``weights_optional`` (``--dry-run`` of a hub checkpoint, whose weights were not fetched): an adapter is then
    checked by itself only, and its summary says so."""
    entries = list(getattr(cfg, "lora", None) or ())
    out = Prepared()
    if not entries:
        return out
    key_map, experts = family_lora(plugins, spec)
    components = [b.component for b in builds]
    sources: dict[str, Mapping[str, Any]] = {}
    for i, entry in enumerate(entries):
        where = f"lora[{i}]"
        comp = component_for(entry, where, spec, components, experts)
        if comp not in sources:
            try:
                sources[comp] = ckpt.read_tensors(comp)
            except UserError:
                if not weights_optional:
                    raise
                sources[comp] = None
        if sources[comp] is None:
            out.summaries.append(self_checked(i, entry, where, comp))
            continue
        adapter, targets = read_adapter(entry.path, entry.weight_name, where, key_map, sources[comp], spec.id)
        check.check_multiplier([(t.record.name, t.factor) for t in targets], float(entry.scale), where)
        out.targets.setdefault(comp, []).append((float(entry.scale), targets))
        for key, items in fuse.terms(targets, float(entry.scale)).items():
            out.deltas.setdefault(comp, {}).setdefault(key, []).extend(items)
        recs = list({id(t.record): t.record for t in targets}.values())
        out.summaries.append(Summary(
            i, adapter.path, adapter.layout, comp, float(entry.scale), len(recs),
            tuple(sorted({r.rank for r in recs if r.rank})),
            tuple(sorted({r.alpha for r in recs if r.alpha is not None}))))
    return out


def self_checked(i: int, entry: Any, where: str, comp: str) -> Summary:
    """The summary of an adapter checked without the checkpoint's tensors (each record by itself)."""
    adapter = formats.normalise(files.read(entry.path, entry.weight_name, where))
    problems = adapter.problems + [p for r in adapter.records.values() for p in check.record_problems(r)]
    if problems:
        raise UserError(f"{where} ({adapter.path}): {len(problems)} problems: " + "; ".join(problems[:check.SHOWN]))
    check.check_multiplier([(n, adapter.factor(r)) for n, r in adapter.records.items()], float(entry.scale), where)
    recs = list(adapter.records.values())
    return Summary(i, adapter.path, adapter.layout + " (keys not checked: the checkpoint's weights are not here)",
                   comp, float(entry.scale), len(recs), tuple(sorted({r.rank for r in recs if r.rank})),
                   tuple(sorted({r.alpha for r in recs if r.alpha is not None})))
