"""Folders holding only the published JSON files of every LTX-Video 0.9.8 model (no weights), for
``vidax run ... --dry-run`` memory estimates (docs/models/ltx.md, "Parallelism and memory").

Each folder: ``transformer/config.json`` (diffusers' ``LTXVideoTransformer3DModel`` config of the full-size test's
``DITS[id]``, built on the meta device so every default is filled in), ``vae/config.json`` (the published 0.9.8
VAE), ``text_encoder/config.json`` (T5 v1.1 XXL), ``scheduler/scheduler_config.json``, ``latent_upsampler/config.json``
(the published spatial upscaler: a multi-scale run is refused without one) and ``model_index.json``. Needs the test
extra (torch, diffusers, transformers).

(and, through ``published_ltx2_config_folders.py``, one folder per LTX-2.x id).

    python plugins/vidax_ltx/scripts/published_config_folders.py /tmp/ltx_configs
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

import torch  # noqa: E402
from diffusers import LTXVideoTransformer3DModel  # noqa: E402
from test_ltx_full_size import DITS, T5_V1_1_XXL  # noqa: E402
from transformers import T5Config  # noqa: E402

from vidax_ltx.original_format import LTX098_VAE_CONFIG, LTX_SCHEDULER_CONFIG  # noqa: E402
from vidax_ltx.upsampler import PUBLISHED_UPSAMPLER_CONFIG  # noqa: E402


def write(folder, name, data):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "w") as f:
        json.dump(data, f, indent=1)


def main(out: str) -> None:
    for mid, dit in DITS.items():
        root = os.path.join(out, mid)
        write(root, "model_index.json", {"_class_name": "LTXConditionPipeline"})
        with torch.device("meta"):
            cfg = dict(LTXVideoTransformer3DModel(**dit).config)
        write(os.path.join(root, "transformer"), "config.json", {"_class_name": "LTXVideoTransformer3DModel", **cfg})
        write(os.path.join(root, "vae"), "config.json", dict(LTX098_VAE_CONFIG))
        write(os.path.join(root, "text_encoder"), "config.json", T5Config(**T5_V1_1_XXL).to_dict())
        write(os.path.join(root, "scheduler"), "scheduler_config.json", dict(LTX_SCHEDULER_CONFIG))
        write(os.path.join(root, "latent_upsampler"), "config.json",
              {"_class_name": "LTXLatentUpsamplerModel", **PUBLISHED_UPSAMPLER_CONFIG})
        print(f"wrote {root}")
    from published_ltx2_config_folders import main as ltx2_main

    ltx2_main(out)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/ltx_configs")
