"""diffusers ``SkyReelsV2Transformer3DModel`` checkpoint -> :class:`vidax_skyreels.dit.SkyReelsDiT` parameters: the
Wan DiT's key table (the same module names) plus the fps embedding."""

from __future__ import annotations

from vidax_core.io.convert import KeyRule
from vidax_core.io.diffusers_rules import linear_rules
from vidax_core.io.load import dit_loader
from vidax_core.wan_dit.keys import DIT_IGNORE, DIT_RULES as WAN_RULES

from .dit import SkyReelsDiT

DIT_RULES: list[KeyRule] = [
    *WAN_RULES,
    KeyRule(r"fps_embedding\.weight", "fps_embedding"),
    *linear_rules(r"fps_projection\.net\.0\.proj", "fps_linear_1"),
    *linear_rules(r"fps_projection\.net\.2", "fps_linear_2"),
]

load_dit = dit_loader(SkyReelsDiT, DIT_RULES, component="SkyReels-V2 DiT (transformer)", ignore=DIT_IGNORE)
