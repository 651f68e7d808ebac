"""Which expert runs each step of a model with several denoisers (Wan2.2 A14B), and at which timestep its
guidance scale is read.

By default each step goes to the expert whose timestep range (``DitBuild.t_min`` / ``t_max``) holds the step's
timestep. ``sampling.boundary_step_index = k`` switches by step instead, as the few-step distilled recipes state it
(lightx2v's ``boundary_step_index``): steps ``0 .. k-1`` run the first expert, the rest the second. A step given
to an expert outside its range reads its guidance scale at the nearest timestep of that range, so per-expert
guidance (Wan2.2's ``guidance_scale_2``) follows the expert, not the timestep; the model still sees the real one.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from vidax_core.errors import UserError


def check_switch_step(step: int | None, builds: Sequence[Any], num_steps: int | None, model_id: str) -> None:
    """``sampling.boundary_step_index`` fits the model (two experts) and the run (at most ``num_steps``)."""
    if step is None:
        return
    if len(builds) != 2:
        raise UserError(f"sampling.boundary_step_index={step}: {model_id} has {len(builds)} denoiser"
                        f"{'s' if len(builds) != 1 else ''}; it applies to a model with two experts: remove it")
    if num_steps is not None and not 0 <= step <= num_steps:
        raise UserError(f"sampling.boundary_step_index={step} is past the run's {num_steps} steps: "
                        f"use 0..{num_steps}")


def schedule(builds: Sequence[Any], timesteps: Any, step: int | None) -> list[int]:
    """The expert index of every step."""
    ts = [float(t) for t in np.asarray(timesteps)]
    if step is not None:
        return [0 if i < step else 1 for i in range(len(ts))]
    out = []
    for t in ts:
        hit = next((k for k, b in enumerate(builds) if b.active(t)), None)
        if hit is None:
            raise UserError(f"no denoiser of this model covers timestep {t}: check the checkpoint's boundary_ratio")
        out.append(hit)
    return out


def guidance_timesteps(builds: Sequence[Any], timesteps: Any, chosen: Sequence[int]) -> np.ndarray:
    """The timesteps guidance scales are read at: each step's own, clamped into its expert's range."""
    out = np.asarray(timesteps, np.float32).copy()
    for i, k in enumerate(chosen):
        b = builds[k]
        t = float(out[i])
        if not b.active(t):  # the float32 just inside the range (timesteps are float32)
            hi = np.nextafter(np.float32(b.t_max), np.float32(-np.inf)) if math.isfinite(b.t_max) else np.inf
            lo = np.float32(b.t_min) if math.isfinite(b.t_min) else -np.inf
            out[i] = min(max(out[i], lo), hi)
    return out
