"""diffusers ``AnyFlowTransformer3DModel`` / ``AnyFlowFARTransformer3DModel`` checkpoints -> :class:`.dit.AnyFlowDiT`:
Wan's key table (the backbone is Wan2.1's, key for key) plus the flow-map ``delta_embedder`` and FAR's
``far_patch_embedding``."""

from __future__ import annotations

from vidax_core.io.convert import KeyRule, conv
from vidax_core.io.diffusers_rules import linear_rules
from vidax_core.wan_dit.keys import DIT_IGNORE, DIT_RULES as WAN_RULES

DIT_RULES: list[KeyRule] = [
    *WAN_RULES,
    *linear_rules(r"condition_embedder\.delta_embedder\.linear_1", "delta_linear_1"),
    *linear_rules(r"condition_embedder\.delta_embedder\.linear_2", "delta_linear_2"),
    KeyRule(r"far_patch_embedding\.weight", "far_patch_kernel", conv),
    KeyRule(r"far_patch_embedding\.bias", "far_patch_bias"),
]

__all__ = ["DIT_RULES", "DIT_IGNORE", "load_dit"]


def load_dit(cfg, tensors, **kwargs):
    """An :class:`.dit.AnyFlowDiT` from diffusers-named tensors (:func:`vidax_core.io.load.dit_loader`)."""
    from vidax_core.io.load import dit_loader

    from .dit import AnyFlowDiT

    return dit_loader(AnyFlowDiT, DIT_RULES, component="AnyFlow DiT (transformer)", ignore=DIT_IGNORE)(
        cfg, tensors, **kwargs)
