"""Folders holding only the published JSON files of every Kandinsky 6 model (no weights), for ``vidax run ...
--dry-run`` memory estimates (docs/models/kandinsky6.md), ``vidax bench --random-dit --published`` and the
torch-free random-checkpoint writer: ``OUT/<id>`` for the four generation ids (transformer, HunyuanVideo VAE, MMAudio
VAE and vocoder, Qwen2.5-VL + CLIP-L text, scheduler) and the two super-resolution ids (transformer, K-VAE, latent
upscaler bank, scheduler). The configs and their sources live in ``tests/kandinsky6_published.py``, which the
full-size test checks. Needs the test extra (torch, diffusers, transformers).

    python plugins/vidax_kandinsky/scripts/published_k6_config_folders.py /tmp/kandinsky6pub
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from kandinsky6_published import write_folders  # noqa: E402

if __name__ == "__main__":
    for root in write_folders(sys.argv[1] if len(sys.argv) > 1 else "/tmp/kandinsky6pub"):
        print(f"wrote {root}")
