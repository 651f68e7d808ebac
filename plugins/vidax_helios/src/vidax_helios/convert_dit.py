"""diffusers ``HeliosTransformer3DModel`` checkpoint -> :class:`vidax_helios.dit.HeliosDiT` parameters: the Wan DiT's
key table (the same module names for the embedders, blocks and projection) plus the history patch embeddings, the
amplified-history key scales and the output norm's table."""

from __future__ import annotations

from vidax_core.io.convert import KeyRule, conv, squeeze
from vidax_core.io.load import dit_loader
from vidax_core.wan_dit.keys import DIT_IGNORE, DIT_RULES as WAN_RULES

from .dit import SCALES, HeliosDiT

DIT_RULES: list[KeyRule] = [
    *WAN_RULES,
    KeyRule(r"norm_out\.scale_shift_table", "scale_shift_table", squeeze),
    KeyRule(r"blocks\.(\d+)\.attn1\.history_key_scale", "blocks/history_key_scale", None, 1),
    *(rule for name in SCALES for rule in (KeyRule(rf"patch_{name}\.weight", f"patch_{name}_kernel", conv),
                                           KeyRule(rf"patch_{name}\.bias", f"patch_{name}_bias"))),
]

load_dit = dit_loader(HeliosDiT, DIT_RULES, component="Helios DiT (transformer)", ignore=DIT_IGNORE)
