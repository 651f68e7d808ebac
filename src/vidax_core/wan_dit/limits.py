"""The token grid a Wan DiT's RoPE table covers (a :class:`vidax_core.GridLimit` for ``DitBuild.grid_limit``):
``rope_max_seq_len`` positions along each axis. Wan and SkyReels-V2 state it; importing it imports no JAX."""

from __future__ import annotations


def grid_limit(cfg, component: str = "transformer"):
    from vidax_core import GridLimit

    n = cfg.rope_max_seq_len
    return GridLimit((n, n, n), f"rope_max_seq_len={n} in {component}/config.json (the DiT's RoPE table)")
