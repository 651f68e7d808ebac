"""The dry run's check of the prompt encoder, as the run builds it: the family's ``build_text_encoder`` under
:func:`vidax_core.io.lazy.check_only`, so its config.json is parsed, its module built shape-only and every key and
shape of its weight files checked against their headers, with no weight read. A broken text-encoder config (a
Gemma-4 ``rms_norm_eps`` of -1, a layer count the connectors do not read) is then refused by ``--dry-run`` with
the line the run would print, not only once a run has started.

Only where the encoder's weight files are at hand: a dry run of a hub checkpoint fetches JSON files only."""

from __future__ import annotations

from typing import Any

from vidax_core.placement.memory_plan import ENCODER_COMPONENTS


def weights_at_hand(ckpt: Any, component: str) -> bool:
    """The component's weight files can be opened (their headers read)."""
    try:
        return bool(ckpt.has(component)) and ckpt.read_tensors(component) is not None
    except Exception:  # noqa: BLE001 - no local weights (a hub dry run), or unreadable: the run reports those
        return False


def check_text_encoder(spec: Any, ckpt: Any, cfg: Any, plugins: Any) -> bool:
    """Build the prompt encoder with nothing read (its refusals raise as in a run); False when its weights are
    not at hand and nothing was checked."""
    from vidax_core.io.lazy import check_only

    encoders = [c for c in ENCODER_COMPONENTS if c.startswith("text_encoder") and ckpt.has(c)]
    if not encoders or not all(weights_at_hand(ckpt, c) for c in encoders):
        return False
    with check_only():
        plugins.call("build_text_encoder", spec, ckpt=ckpt, run=cfg, mesh=None)
    return True
