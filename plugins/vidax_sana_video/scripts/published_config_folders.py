"""Folders holding only the published JSON files of every SANA-Video model (no weights), for ``vidax run ...
--dry-run`` memory estimates (docs/models/sana-video.md) and the published layouts (``scripts/published_layouts.py``
at the repository's root, or ``python -m vidax_core.bench.published_layout``).

``OUT/<id>``: ``model_index.json``, ``transformer/config.json`` (through ``SanaVideoTransformer3DModel`` on the meta
device), ``vae/config.json`` (the Wan2.1 VAE), ``scheduler/scheduler_config.json`` (DPM-Solver++ on flow sigmas,
shift 8), ``text_encoder/config.json`` (Gemma-2-2B). The configs live in ``tests/sana_published.py``, which the
full-size test checks. Needs the test extra (torch, diffusers, transformers).

    python plugins/vidax_sana_video/scripts/published_config_folders.py /tmp/sanapub
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from sana_published import write_folders  # noqa: E402

if __name__ == "__main__":
    for root in write_folders(sys.argv[1] if len(sys.argv) > 1 else "/tmp/sanapub"):
        print(f"wrote {root}")
