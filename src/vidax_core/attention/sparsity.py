"""How much of the dense attention work a sparse attention call really does: its *density*, the (query, key) pairs
of the tiles its kernel runs over all Sq x Sk pairs, kept in the call site's record (:func:`vidax_core.attention.
calls`, the metrics' ``attention_calls``) beside the backend that ran.

A mask fixed by the shapes (3-D neighbourhoods) has its density when it is traced (:func:`set_density`); a mask made
from the call's inputs (NABLA) is measured when the program runs (:func:`measure`: a host callback adds each
execution's pairs to the record; ``density`` is their running ratio). The FLOP count of a step multiplies each
sparse kind's dense attention FLOPs by :func:`densities`' figure, so MFU counts the work actually computed, and
the dense-equivalent figures say what the sparsity saved (:mod:`vidax_core.report.throughput`).
"""

from __future__ import annotations

from typing import Any

import jax

Where = tuple[dict, str]  # (a call record, a call site in it): what attention._record returns


def set_density(where: Where, kind: str, density: float) -> None:
    """Record a traced call's fixed density (the mask depends on shapes only)."""
    records, site = where
    records[site].update(sparse=kind, density=float(density))


def measure(where: Where, kind: str, computed: Any, dense: float) -> None:
    """Record, each time the program runs, ``computed`` (a traced count of (query, key) pairs the kernel's tiles
    cover) against ``dense`` (the pairs of dense attention) at this call site."""
    records, site = where
    records[site].update(sparse=kind)

    def add(c) -> None:
        rec = records.get(site)
        if rec is None:
            return
        rec["computed_pairs"] = rec.get("computed_pairs", 0.0) + float(c)
        rec["dense_pairs"] = rec.get("dense_pairs", 0.0) + float(dense)
        rec["density"] = rec["computed_pairs"] / rec["dense_pairs"]

    jax.debug.callback(add, computed)


def densities(calls: dict[str, dict] | None) -> dict[str, float]:
    """{sparse kind: density} over the call sites of an ``attention_calls`` record that have one (several sites of a
    kind: weighted by their dense pairs when measured, else their plain mean). Call ``jax.effects_barrier()`` first
    so that every measurement of the programs that ran has arrived."""
    by_kind: dict[str, list[tuple[float, float]]] = {}
    for rec in (calls or {}).values():
        if rec.get("density") is None or not rec.get("sparse"):
            continue
        by_kind.setdefault(rec["sparse"], []).append((float(rec["density"]), float(rec.get("dense_pairs", 1.0))))
    return {k: sum(d * w for d, w in v) / sum(w for _, w in v) for k, v in by_kind.items()}
