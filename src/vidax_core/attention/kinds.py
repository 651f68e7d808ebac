"""The attention kinds a denoiser's sequence-parallel layers use, and what each asks of ``parallel.sp``.

The video tokens are split over ``sp`` for the whole block; what an attention layer needs of the other shards
depends on its kind, and so does the divisibility rule a run must meet (checked before any weight loads,
:func:`vidax_core.parallel.mesh.plan_mesh`):

* ``softmax``: every query sees every key. Ulysses exchanges the sp-split tokens for 1/sp of the heads, so the
  heads of a tensor-parallel shard must split over sp (``heads / tp % sp == 0``) as well as the tokens.
* ``linear``: linear attention (SANA's ReLU kernel) over the whole sequence reads the keys and values only through
  their per-head summaries ``sum_j k_j^T v_j`` and ``sum_j k_j``, which are summed over the sp shards
  (:mod:`vidax_core.attention.linear`): no head moves, only the tokens must split.
* ``cross``: sequence-split queries against a replicated text; nothing is exchanged.

A family states the kinds its split layers use in ``DitBuild.attention_kinds`` (default ``("softmax",)``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AttentionKind:
    name: str
    exchanges_heads: bool  # sequence parallelism moves heads between the sp shards (the heads must split over sp)
    what: str


KINDS: dict[str, AttentionKind] = {k.name: k for k in (
    AttentionKind("softmax", True, "softmax self-attention: Ulysses exchanges tokens for heads over sp"),
    AttentionKind("linear", False, "linear attention: the per-head k^T v summaries are summed over sp"),
    AttentionKind("cross", False, "cross-attention of split queries to a replicated context"),
)}


def exchanges_heads(kinds: tuple[str, ...]) -> bool:
    """Whether any of ``kinds`` moves heads between sp shards; an unknown name is a ValueError."""
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ValueError(f"unknown attention kind(s) {unknown}: expected some of {sorted(KINDS)}")
    return any(KINDS[k].exchanges_heads for k in kinds)
