"""The Wan DiT's diffusers key table as the Wan plugin names it (:mod:`vidax_core.wan_dit.keys`)."""

from vidax_core.wan_dit.keys import DIT_IGNORE, DIT_RULES, load_dit  # noqa: F401
