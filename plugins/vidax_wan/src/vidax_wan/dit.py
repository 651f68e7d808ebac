"""The Wan DiT as the Wan plugin names it: the module lives in :mod:`vidax_core.wan_dit.model` (SkyReels-V2 and
Helios are built on it too)."""

from vidax_core.wan_dit.model import *  # noqa: F401,F403
