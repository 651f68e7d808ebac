"""Folders holding only the published JSON files of every Helios model (no weights), for `vidax run ... --dry-run`
and the random-checkpoint writer.

The transformer and scheduler configs are the ones plugins/vidax_helios/tests/test_helios_full_size.py checks; the
Wan2.1 VAE and UMT5-XXL are the Wan full-size test's; all are passed through diffusers / transformers on the meta
device so every default is filled in. Needs the test extra.

    python plugins/vidax_helios/scripts/published_config_folders.py CONFIGS
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "vidax_wan", "tests"))

import torch  # noqa: E402
from diffusers import AutoencoderKLWan, HeliosTransformer3DModel  # noqa: E402
from test_helios_full_size import DITS, SCHEDULER  # noqa: E402
from test_wan_full_size import UMT5_XXL, WAN21_VAE  # noqa: E402
from transformers import UMT5Config  # noqa: E402


def write(folder, name, data):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "w") as f:
        json.dump(data, f, indent=1)


def lists(d):
    return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


out = sys.argv[1]
for mid, dit in DITS.items():
    root = os.path.join(out, mid)
    write(root, "model_index.json", {
        "_class_name": "HeliosPipeline", "scheduler": ["diffusers", "HeliosScheduler"],
        "text_encoder": ["transformers", "UMT5EncoderModel"], "tokenizer": ["transformers", "T5TokenizerFast"],
        "transformer": ["diffusers", "HeliosTransformer3DModel"], "vae": ["diffusers", "AutoencoderKLWan"]})
    with torch.device("meta"):
        transformer = dict(HeliosTransformer3DModel(**dit).config)
        vae = dict(AutoencoderKLWan(**WAN21_VAE).config)
    write(os.path.join(root, "transformer"), "config.json", {"_class_name": "HeliosTransformer3DModel",
                                                             **lists(transformer)})
    write(os.path.join(root, "vae"), "config.json", {"_class_name": "AutoencoderKLWan", **lists(vae)})
    write(os.path.join(root, "text_encoder"), "config.json", UMT5Config(**UMT5_XXL).to_dict())
    write(os.path.join(root, "scheduler"), "scheduler_config.json", SCHEDULER)
    print("wrote", root)
