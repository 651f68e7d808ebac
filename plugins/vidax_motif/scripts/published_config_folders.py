"""The folder holding only the published JSON files of Motif-Video 2B (no weights), for ``vidax run ... --dry-run``
memory estimates (docs/models/motif.md) and the torch-free random-checkpoint writer.

``OUT/motif-video-2b``: ``model_index.json``, ``transformer/config.json`` (the model card's architecture through
``MotifVideoTransformer3DModel`` on the meta device), ``vae/config.json`` (``AutoencoderKLWan``),
``scheduler/scheduler_config.json``, ``text_encoder/config.json`` (T5Gemma2's encoder with its SigLIP tower),
``guider/guider_config.json`` and ``feature_extractor/preprocessor_config.json``. The configs live in
``tests/motif_published.py``, which the full-size test checks. Needs the test extra (torch, diffusers).

    python plugins/vidax_motif/scripts/published_config_folders.py /tmp/motifpub
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from motif_published import write_folder  # noqa: E402

if __name__ == "__main__":
    print(f"wrote {write_folder(sys.argv[1] if len(sys.argv) > 1 else '/tmp/motifpub')}")
