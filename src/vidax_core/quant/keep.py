"""Which Linear layers of a denoiser become 8-bit: those inside its stacked transformer blocks, except the
layers matching a family's keep list (regexes searched in the layer's '/'-joined parameter path).

Everything outside the stacked blocks (patch embedding, time / text / image embedders, output head) stays in full
precision by construction: it is a small share of the bytes and the most sensitive to rounding. Inside a block,
modulation and norm projections stay too. A family overrides the list with its ``quantization_keep`` hook. The
blocks of one stacked group share one dtype, so a layer kind is kept for every block of the group or for none.
"""

from __future__ import annotations

DEFAULT_KEEP: tuple[str, ...] = (
    r"norm",
    r"modulation",
    r"(^|/)ada",
    r"embed",
    r"patch",
    r"head",
)
