"""Folders holding only the published JSON files of every Kandinsky 5 model (no weights), for ``vidax run ...
--dry-run`` memory estimates (docs/models/kandinsky.md) and a torch-free random-checkpoint writer.

``OUT/<id>`` for ``kandinsky5-t2v-lite`` (and its 10 s variant ``kandinsky5-t2v-lite-10s``), ``kandinsky5-t2v-pro``
and ``kandinsky5-i2v-lite``: ``model_index.json``, ``transformer/config.json`` (the release's architecture under
diffusers' names, through ``Kandinsky5Transformer3DModel`` on the meta device), ``vae/config.json``
(``AutoencoderKLHunyuanVideo``), ``scheduler/scheduler_config.json`` (flow Euler, shift 5 or 10),
``text_encoder/config.json`` (Qwen2.5-VL-7B), ``text_encoder_2/config.json`` (CLIP-L text). The configs live in
``tests/kandinsky_published.py``, which the full-size test checks.
Needs the test extra (torch, diffusers, transformers).

    python plugins/vidax_kandinsky/scripts/published_config_folders.py /tmp/kandinskypub
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from kandinsky_published import write_folders  # noqa: E402

if __name__ == "__main__":
    for root in write_folders(sys.argv[1] if len(sys.argv) > 1 else "/tmp/kandinskypub"):
        print(f"wrote {root}")
