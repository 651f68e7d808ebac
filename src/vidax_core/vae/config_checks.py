"""Checks every diffusers ``AutoencoderKL*`` config of a GroupNorm + SiLU VAE needs before vidax builds it.

A family's VAE config collects the problems of its own fields and these shared ones, then raises one
:class:`vidax_core.errors.UserError` naming them all.
"""

from __future__ import annotations

from typing import Any


def block_problems(cfg: Any, down: str, up: str, family: str) -> list[str]:
    """Problems with ``down_block_types`` / ``up_block_types`` (every block ``down`` / ``up``), ``act_fn`` (SiLU)
    and ``block_out_channels`` against ``norm_num_groups``; ``family`` names the VAE in the messages."""
    n = len(cfg.block_out_channels)
    problems = []
    if tuple(cfg.down_block_types) != (down,) * n or tuple(cfg.up_block_types) != (up,) * n:
        problems.append(f"down/up_block_types must be {n} x {down} / {up}")
    if cfg.act_fn not in ("silu", "swish"):
        problems.append(f"act_fn {cfg.act_fn!r} is not supported ({family} uses silu)")
    if any(c % cfg.norm_num_groups for c in cfg.block_out_channels):
        problems.append(f"block_out_channels {cfg.block_out_channels} must divide into {cfg.norm_num_groups} groups")
    return problems
