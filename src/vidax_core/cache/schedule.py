"""Skip schedules known before the first step, computed on the host: MagCache from calibrated magnitude ratios,
TeaCache from the rescaled relative L1 change of the timestep embedding.

Both return one bool per step, True where the block stack runs. Each follows its reference's state machine
exactly (diffusers' ``MagCacheHeadHook``; TeaCache4Wan2.1's ``teacache_forward`` for one guidance branch), so the
compiled step can take the flags as data instead of deciding on the host every step.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def nearest_interp(src: Sequence[float], length: int) -> np.ndarray:
    """diffusers' ``nearest_interp``: ``src`` resampled to ``length`` by rounding the scaled index."""
    src = np.asarray(src, np.float64)
    if length == 1:
        return src[-1:]
    scale = (len(src) - 1) / (length - 1)
    idx = np.round(np.arange(length, dtype=np.float32) * np.float32(scale)).astype(np.int64)
    return src[idx]


def mag_flags(ratios: Sequence[float], num_steps: int, *, threshold: float, max_skip_steps: int,
              retention_ratio: float, num_inference_steps: int | None = None) -> np.ndarray:
    """The steps MagCache computes for one cache context (``ratios`` already at the run's length or resampled).

    ``num_steps`` calls are made; the step index counts those calls and restarts after ``num_inference_steps``
    as the reference's ``_advance_step`` does."""
    n_inf = num_inference_steps or num_steps
    ratios = np.asarray(ratios, np.float64)
    if len(ratios) != n_inf:
        ratios = nearest_interp(ratios, n_inf)
    retention = int(retention_ratio * n_inf + 0.5)
    out = np.ones(num_steps, bool)
    acc_ratio, acc_steps, acc_err, have_residual, step = 1.0, 0, 0.0, False, 0
    for k in range(num_steps):
        compute = True
        if step >= retention:
            scale = ratios[step] if step < len(ratios) else 1.0
            acc_ratio *= float(scale)
            acc_steps += 1
            acc_err += abs(1.0 - acc_ratio)
            if have_residual and acc_err <= threshold and acc_steps <= max_skip_steps:
                compute = False
            else:
                acc_ratio, acc_steps, acc_err = 1.0, 0, 0.0
        out[k] = compute
        have_residual |= compute
        step += 1
        if step >= n_inf:  # the end of the reference's inference loop: its state resets
            step, acc_ratio, acc_steps, acc_err, have_residual = 0, 1.0, 0, 0.0, False
    return out


def teacache_flags(distances: Sequence[float], coefficients: Sequence[float], *, threshold: float,
                   use_ret_steps: bool) -> np.ndarray:
    """The steps TeaCache4Wan2.1 computes for one guidance branch. ``distances[k]`` is the relative L1 change
    ``mean|m_k - m_{k-1}| / mean|m_{k-1}|`` of the modulated input (``distances[0]`` is unused); the polynomial
    and the accumulation run in float64 as the reference's ``np.poly1d`` on ``.item()`` does."""
    n = len(distances)
    ret, cutoff = (5, n) if use_ret_steps else (1, n - 1)  # in steps; the reference counts calls (2 per step)
    poly = np.poly1d(np.asarray(coefficients, np.float64))
    out = np.ones(n, bool)
    acc = 0.0
    for k in range(n):
        if k < ret or k >= cutoff:
            acc = 0.0
            continue
        acc += float(poly(float(distances[k])))
        if acc < threshold:
            out[k] = False
        else:
            acc = 0.0
    return out
