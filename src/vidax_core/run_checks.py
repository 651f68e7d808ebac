"""The run checks most families share, as one-line problems for their ``check_run`` hook: a frame count the VAE's
temporal compression accepts, and a size its spatial compression times the DiT's patch divides."""

from __future__ import annotations

from typing import Any


def frame_count_problems(sampling: Any, step: int, who: str, why: str = "", hint: str = "") -> list[str]:
    """``sampling.num_frames`` (``sampling`` the run's ``sampling`` section, as :func:`size_problems` takes it, or
    the frame count itself) must be ``step * k + 1``; ``why`` says the reason. The message names the nearest such
    count, then ``hint``."""
    num_frames = int(getattr(sampling, "num_frames", sampling))
    if not (num_frames - 1) % step:
        return []
    k = max(-(-(num_frames - 1) // step), 0)  # the nearest valid count above
    reason = f" ({why})" if why else ""
    return [f"sampling.num_frames must be {step}k+1 for {who}{reason}, got {num_frames}: use {step * k + 1}{hint}"]


def size_problems(sampling: Any, multiple: int, who: str) -> list[str]:
    """``sampling.height`` and ``width`` must be multiples of ``multiple``; each message names the size to use."""
    out = []
    for key in ("height", "width"):
        v = getattr(sampling, key)
        if v % multiple:
            out.append(f"sampling.{key} must be a multiple of {multiple} for {who}, got {v}: use "
                       f"{max(multiple, v // multiple * multiple)}")
    return out
