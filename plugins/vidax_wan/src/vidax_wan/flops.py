"""The Wan DiT's FLOP count as the Wan plugin names it (:mod:`vidax_core.wan_dit.flops`)."""

from vidax_core.wan_dit.flops import CLIP_TOKENS, counter, dit_flops  # noqa: F401
