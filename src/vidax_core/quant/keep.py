"""Which Linear layers of a denoiser become 8-bit: those inside its stacked transformer blocks, except the
layers matching a family's keep list (regexes searched in the layer's '/'-joined parameter path).

Outside the stacked blocks a Linear layer stays in full precision unless the family names it in its
``quantization_outside_blocks`` hook (Wan names its time / text / image embedder MLPs and its time projection, which
ComfyUI's scaled fp8 Wan files store fp8; without them a streamed Wan's resident bytes would not halve). Inside a
block, modulation and norm projections stay.
A family declares its own list as ``quantization_keep`` on its FamilyPlugin. The
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
