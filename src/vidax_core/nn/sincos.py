"""Fixed sin-cos position tables (the "Attention is all you need" embedding, added to tokens, not rotated).

:func:`sincos_table` is one axis: ``[sin(p * w) | cos(p * w)]`` with ``w_i = theta ** (-i / (dim / 2))``, in
float64 on the host (diffusers ``get_1d_sincos_pos_embed_from_grid``). Multi-axis tables (CogVideoX's 3-D,
PixArt's 2-D) concatenate per-axis tables in the family's own axis order.
"""

from __future__ import annotations

import numpy as np


def sincos_table(positions: np.ndarray, dim: int, theta: float = 10000.0) -> np.ndarray:
    """(len(positions), dim) float64 table ``[sin | cos]`` for 1-D positions (any float array, flattened)."""
    if dim % 2:
        raise ValueError(f"sin-cos table width must be even, got {dim}")
    omega = 1.0 / theta ** (np.arange(dim // 2, dtype=np.float64) / (dim / 2.0))
    out = np.outer(np.asarray(positions, np.float64).reshape(-1), omega)
    return np.concatenate([np.sin(out), np.cos(out)], axis=1)
