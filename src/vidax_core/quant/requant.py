"""Fresh 8-bit values and scales for a weight that changed: the hook a LoRA merge onto an 8-bit base calls.

A merged weight ``W' = dequantize(q, scale) + delta`` has its own range; reusing the old scale would clip it (or
waste levels), so the scale is always recomputed from ``W'`` by the same quantizer the load uses.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vidax_core.quant import modes


def requantize(delta_fused_weight: Any, mode: str, *, stacked: bool = False, xp: Any = np) -> tuple[Any, Any]:
    """(8-bit values, fp32 scale) of a dequantised-and-merged kernel ``(..., in, out)`` (``(layers, in, out)`` with
    ``stacked``: one scale set per layer), with scales computed afresh from it."""
    return modes.quantize(delta_fused_weight, mode, per_tensor_axes=(0,) if stacked else (), xp=xp)


def merged(q: Any, scale: Any, delta: Any, mode: str, *, stacked: bool = False, xp: Any = np) -> tuple[Any, Any]:
    """``requantize(dequantize(q, scale) + delta)``: a LoRA delta (same layout as the kernel) merged into an 8-bit
    kernel."""
    return requantize(modes.dequantize(q, scale, xp=xp) + xp.asarray(delta, xp.float32), mode, stacked=stacked,
                      xp=xp)
