"""What a family declares about its block stack for step caching (``FamilyPlugin.cache_layout``), with defaults.

The cached stack is every group of the model's ``block_groups`` in order; its head block (the one
FirstBlockCache always runs) is the first block of the first group, as diffusers' hooks take the first block of
the model's block lists. ``hidden`` says which part of the carry is the video hidden states the
residual and the first-block test are taken on: None when the carry is that array, else its index in a tuple
carry (CogVideoX carries ``(text, video)``). ``contexts`` is how diffusers' pipeline for the family keys its cache
state: ``"branch"`` (a ``cache_context`` per guidance branch: Wan, HunyuanVideo) or ``"call"`` (the branches
batched into one ``"cond_uncond"`` call: LTX, CogVideoX), where every statistic spans the whole batch.
This module imports no JAX: family plugins import it at load.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CacheLayout:
    hidden: int | None = None
    contexts: str = "branch"

    def __post_init__(self) -> None:
        if self.contexts not in ("branch", "call"):
            raise ValueError(f"CacheLayout.contexts must be 'branch' or 'call', got {self.contexts!r}")

    def get(self, carry: Any) -> Any:
        return carry if self.hidden is None else carry[self.hidden]

    def put(self, carry: Any, hidden: Any) -> Any:
        if self.hidden is None:
            return hidden
        parts = list(carry)
        parts[self.hidden] = hidden
        return type(carry)(parts)


def layout_for(spec: Any, plugins: Any) -> CacheLayout:
    """The layout the owner plugin of ``spec`` declares, or the defaults."""
    return plugins.declared(spec, "cache_layout") or CacheLayout()
