"""Host-side (numpy) sigma-schedule helpers shared by the samplers.

The arithmetic deliberately follows the precision diffusers uses at each stage (float64 numpy for
schedule construction, float32 where diffusers works on float32 tensors) so plans match bit for bit.
"""

from __future__ import annotations

import math

import numpy as np


def shift_sigmas(sigmas: np.ndarray, shift: float) -> np.ndarray:
    """SD3-style static shift ``s' = shift*s / (1 + (shift-1)*s)`` in the dtype of ``sigmas``."""
    return shift * sigmas / (1 + (shift - 1) * sigmas)


def time_shift(sigmas: np.ndarray, mu: float, kind: str = "exponential", power: float = 1.0) -> np.ndarray:
    """Resolution-dependent shift: ``e^mu / (e^mu + (1/t - 1)^power)`` (exponential) or the linear variant."""
    if kind == "exponential":
        e = math.exp(mu)
        return e / (e + (1 / sigmas - 1) ** power)
    if kind == "linear":
        return mu / (mu + (1 / sigmas - 1) ** power)
    raise ValueError(f"time_shift_type must be 'exponential' or 'linear', got {kind!r}")


def stretch_to_terminal(sigmas: np.ndarray, shift_terminal: float) -> np.ndarray:
    """Rescale ``1 - s`` so that the last sigma equals ``shift_terminal`` (LTX-Video).

    When the last sigma is exactly 1 (a single-step schedule) the stretch is 0/0; diffusers returns
    NaN there, vidax keeps the sigmas (the limit of the stretch, every sigma being 1).
    """
    one_minus = 1 - sigmas
    if one_minus[-1] == 0:
        return sigmas
    scale = one_minus[-1] / (1 - shift_terminal)
    return 1 - (one_minus / scale)


def karras(sigma_min: float, sigma_max: float, n: int, rho: float = 7.0) -> np.ndarray:
    ramp = np.linspace(0, 1, n)
    lo = sigma_min ** (1 / rho)
    hi = sigma_max ** (1 / rho)
    return (hi + ramp * (lo - hi)) ** rho


def exponential(sigma_min: float, sigma_max: float, n: int) -> np.ndarray:
    return np.exp(np.linspace(math.log(sigma_max), math.log(sigma_min), n))


def beta(sigma_min: float, sigma_max: float, n: int, a: float = 0.6, b: float = 0.6) -> np.ndarray:
    try:
        import scipy.stats
    except ImportError as e:  # pragma: no cover - scipy is optional
        raise ImportError("beta sigmas need scipy (pip install scipy)") from e
    ppf = [scipy.stats.beta.ppf(t, a, b) for t in 1 - np.linspace(0, 1, n)]
    return np.array([sigma_min + p * (sigma_max - sigma_min) for p in ppf])


def convert_sigmas(kind: str | None, in_sigmas: np.ndarray, n: int,
                   sigma_min: float | None = None, sigma_max: float | None = None) -> np.ndarray:
    """Re-space a decreasing sigma array as Karras / exponential / beta (diffusers' ``_convert_to_*``)."""
    if kind is None:
        return in_sigmas
    lo = sigma_min if sigma_min is not None else in_sigmas[-1].item()
    hi = sigma_max if sigma_max is not None else in_sigmas[0].item()
    if kind == "karras":
        return karras(lo, hi, n)
    if kind == "exponential":
        return exponential(lo, hi, n)
    if kind == "beta":
        return beta(lo, hi, n)
    raise ValueError(f"unknown sigma spacing {kind!r}")


def sigma_kind(use_karras: bool, use_exponential: bool, use_beta: bool) -> str | None:
    if sum(map(bool, (use_karras, use_exponential, use_beta))) > 1:
        raise ValueError("only one of use_karras_sigmas / use_exponential_sigmas / use_beta_sigmas may be set")
    if use_karras:
        return "karras"
    if use_exponential:
        return "exponential"
    if use_beta:
        return "beta"
    return None
