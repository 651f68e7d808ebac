"""Regenerate the tiny random-weight AnyFlow checkpoints that ship in vidax-anyflow: ``builtin:tiny-random`` (an
AnyFlow-FAR pipeline, four chunks at full_chunk_limit 2) and the bidirectional ids' ``tiny-random-bidirectional``,
each written by diffusers' own ``save_pretrained``. Needs the test extra:
    python plugins/vidax_anyflow/scripts/make_tiny_asset.py
"""

from vidax_core.testing.assets import regenerate_asset
from vidax_anyflow.tiny import BUILTIN, save_tiny_anyflow

if __name__ == "__main__":
    for name, kind in BUILTIN.items():
        regenerate_asset("vidax_anyflow", lambda dest, kind=kind: save_tiny_anyflow(dest, kind, seed=0), name)
