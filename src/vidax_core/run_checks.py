"""The run checks most families share, as one-line problems for their ``check_run`` hook: a frame count the VAE's
temporal compression accepts, and a size its spatial compression times the DiT's patch divides."""

from __future__ import annotations

from typing import Any


def frame_count_problems(num_frames: int, step: int, who: str, why: str, hint: str = "") -> list[str]:
    """``num_frames`` must be ``step * k + 1`` (``why`` says the reason); the message names the nearest such
    count, then ``hint``."""
    if not (num_frames - 1) % step:
        return []
    k = max(round((num_frames - 1) / step), 0)
    return [f"sampling.num_frames must be {step}k+1 for {who} ({why}), got {num_frames}: use {step * k + 1}{hint}"]


def size_problems(sampling: Any, multiple: int, who: str) -> list[str]:
    """``sampling.height`` and ``width`` must be multiples of ``multiple``; each message names the size to use."""
    out = []
    for key in ("height", "width"):
        v = getattr(sampling, key)
        if v % multiple:
            out.append(f"sampling.{key} must be a multiple of {multiple} for {who}, got {v}: use "
                       f"{max(multiple, v // multiple * multiple)}")
    return out
