"""The cosmos family's hook implementations: vidax's core finds this module through the ``vidax`` entry point."""

from __future__ import annotations

from vidax_core.hookspecs import hookimpl

FAMILY = "cosmos"


@hookimpl
def register_models(register):
    """No model ids yet: the family's models are being ported."""
