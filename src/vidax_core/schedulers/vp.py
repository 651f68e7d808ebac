"""Discrete variance-preserving (beta) training schedules, built on the host like diffusers does.

diffusers builds these with float32 torch ops; the helpers below reproduce them in numpy:
``torch.linspace`` (float32, symmetric two-sided evaluation) and ``torch.cumprod`` (accumulated in
double on CPU, stored as float32).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

_F = np.float32


def torch_linspace(start: float, end: float, steps: int, dtype=np.float32) -> np.ndarray:
    """Bit-compatible CPU ``torch.linspace`` in ``dtype``.

    torch evaluates the first half as ``start + step * i`` and the second half as ``end - step * (steps - 1 - i)``
    with a fused multiply-add (``step`` rounded to ``dtype`` first). For float32 the fused result equals the
    float64 evaluation rounded to float32; for float64 it is emulated exactly with rationals.
    """
    dt = np.dtype(dtype).type
    if steps == 1:
        return np.array([start], dtype=dt)
    half = steps // 2
    if dt is np.float32:
        start_, end_ = np.float32(start), np.float32(end)
        step = np.float64((end_ - start_) / np.float32(steps - 1))
        idx = np.arange(steps, dtype=np.float64)
        out = np.empty(steps, dtype=np.float64)
        out[:half] = np.float64(start_) + step * idx[:half]
        out[half:] = np.float64(end_) - step * (steps - idx[half:] - 1)
        return out.astype(np.float32)
    from fractions import Fraction

    start_, end_ = float(start), float(end)
    step = Fraction((end_ - start_) / (steps - 1))
    fs, fe = Fraction(start_), Fraction(end_)
    return np.array([float(fs + step * i) if i < half else float(fe - step * (steps - i - 1)) for i in range(steps)],
                    dtype=np.float64)


def torch_linspace_f32(start: float, end: float, steps: int) -> np.ndarray:
    """Bit-compatible float32 ``torch.linspace`` (CPU)."""
    return torch_linspace(start, end, steps, np.float32)


def betas_for_alpha_bar(n: int, max_beta: float = 0.999, kind: str = "cosine") -> np.ndarray:
    if kind == "cosine":
        def f(t):
            return math.cos((t + 0.008) / 1.008 * math.pi / 2) ** 2
    elif kind == "exp":
        def f(t):
            return math.exp(t * -12.0)
    else:
        raise ValueError(f"unsupported alpha_transform_type {kind!r}")
    return np.array([min(1 - f((i + 1) / n) / f(i / n), max_beta) for i in range(n)], dtype=_F)


def rescale_zero_terminal_snr(betas: np.ndarray) -> np.ndarray:
    """Rescale betas to zero terminal SNR (Lin et al. 2023, Algorithm 1), float32 like diffusers."""
    alphas = _F(1) - betas
    abar = np.cumprod(alphas.astype(np.float64)).astype(_F)
    s = np.sqrt(abar)
    s0, sT = s[0].copy(), s[-1].copy()
    s = s - sT
    s = s * (s0 / (s0 - sT))
    abar = s ** 2
    alphas = np.concatenate([abar[0:1], abar[1:] / abar[:-1]])
    return (_F(1) - alphas).astype(_F)


@dataclass(frozen=True, eq=False)
class VPSchedule:
    betas: np.ndarray
    alphas_cumprod: np.ndarray  # float32

    @staticmethod
    def make(num_train_timesteps: int = 1000, beta_start: float = 0.0001, beta_end: float = 0.02,
             beta_schedule: str = "linear", trained_betas=None, rescale_zero_snr: bool = False,
             zero_snr_clamp: bool = True) -> "VPSchedule":
        T = num_train_timesteps
        if trained_betas is not None:
            betas = np.asarray(trained_betas, dtype=_F)
        elif beta_schedule == "linear":
            betas = torch_linspace_f32(beta_start, beta_end, T)
        elif beta_schedule == "scaled_linear":
            betas = torch_linspace_f32(beta_start ** 0.5, beta_end ** 0.5, T) ** 2
        elif beta_schedule == "squaredcos_cap_v2":
            betas = betas_for_alpha_bar(T)
        else:
            raise ValueError(f"unsupported beta_schedule {beta_schedule!r}")
        if rescale_zero_snr:
            betas = rescale_zero_terminal_snr(betas)
        alphas = _F(1) - betas
        abar = np.cumprod(alphas.astype(np.float64)).astype(_F)
        if rescale_zero_snr and zero_snr_clamp:
            abar[-1] = _F(2.0 ** -24)
        return VPSchedule(betas=betas, alphas_cumprod=abar)

    @property
    def sigmas(self) -> np.ndarray:
        """Karras-style sigmas ``sqrt((1-abar)/abar)`` (float32)."""
        a = self.alphas_cumprod
        return ((_F(1) - a) / a) ** _F(0.5)

    @property
    def sigma_first(self) -> np.float32:
        a = self.alphas_cumprod[0]
        return ((_F(1) - a) / a) ** _F(0.5)
