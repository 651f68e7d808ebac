"""LoRA adapters, fused into the denoiser's weights at load.

A file (``lora:`` in the run config) is read (:mod:`.files`), its layout recognised and normalised into one record
per adapted module (:mod:`.formats`), checked strictly against the checkpoint's own tensors (:mod:`.check`: every
problem of an adapter in one error) and, at load, added onto those tensors before the family's conversion runs
(:mod:`.fuse`), so fused, split or transposed targets come out right through the family's own key table.
:mod:`.plan` ties these to a run: which adapters go to which denoiser (expert) with which scale.
"""

from vidax_core.lora.formats import Adapter, Record, normalise  # noqa: F401
from vidax_core.lora.fuse import FusedTensors, fused  # noqa: F401
from vidax_core.lora.plan import Prepared, prepare  # noqa: F401
