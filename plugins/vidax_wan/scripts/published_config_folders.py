"""Folders holding only the published JSON files of every Wan model (no weights), for `vidax run ... --dry-run`.

The configs are the ones the full-size test checks (plugins/vidax_wan/tests/test_wan_full_size.py), passed through
diffusers / transformers on the meta device so every default is filled in. Needs the test extra (torch, diffusers).

    python plugins/vidax_wan/scripts/published_config_folders.py CONFIGS
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

import torch  # noqa: E402
from diffusers import AutoencoderKLWan, WanTransformer3DModel  # noqa: E402
from test_wan_full_size import COMPONENTS  # noqa: E402
from transformers import CLIPVisionConfig, UMT5Config  # noqa: E402


def write(folder, name, data):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "w") as f:
        json.dump(data, f, indent=1)

SCHED = {"_class_name": "UniPCMultistepScheduler", "num_train_timesteps": 1000, "prediction_type": "flow_prediction",
         "use_flow_sigmas": True, "flow_shift": 3.0, "solver_order": 2}
out = sys.argv[1]
for mid, c in COMPONENTS.items():
    root = os.path.join(out, mid)
    i2v = "i2v" in mid
    idx = {"_class_name": "WanImageToVideoPipeline" if i2v else "WanPipeline",
           "scheduler": ["diffusers", "UniPCMultistepScheduler"], "text_encoder": ["transformers", "UMT5EncoderModel"],
           "tokenizer": ["transformers", "T5TokenizerFast"], "transformer": ["diffusers", "WanTransformer3DModel"],
           "vae": ["diffusers", "AutoencoderKLWan"]}
    experts = "a14b" in mid
    if experts:
        idx["transformer_2"] = ["diffusers", "WanTransformer3DModel"]
        idx["boundary_ratio"] = 0.9 if i2v else 0.875
    if mid == "wan2.2-ti2v-5b":
        idx["expand_timesteps"] = True
    if c["clip"]:
        idx["image_encoder"] = ["transformers", "CLIPVisionModel"]
        idx["image_processor"] = ["transformers", "CLIPImageProcessor"]
    write(root, "model_index.json", idx)
    with torch.device("meta"):
        dit = dict(WanTransformer3DModel(**c["dit"]).config)
        vae = dict(AutoencoderKLWan(**c["vae"]).config)
    for k, v in list(dit.items()):
        if isinstance(v, tuple):
            dit[k] = list(v)
    for t in (["transformer", "transformer_2"] if experts else ["transformer"]):
        write(os.path.join(root, t), "config.json", {"_class_name": "WanTransformer3DModel", **dit})
    write(os.path.join(root, "vae"), "config.json",
          {"_class_name": "AutoencoderKLWan", **{k: list(v) if isinstance(v, tuple) else v for k, v in vae.items()}})
    write(os.path.join(root, "text_encoder"), "config.json", UMT5Config(**c["text"]).to_dict())
    write(os.path.join(root, "scheduler"), "scheduler_config.json", SCHED)
    if c["clip"]:
        write(os.path.join(root, "image_encoder"), "config.json", CLIPVisionConfig(**c["clip"]).to_dict())
        write(os.path.join(root, "image_processor"), "preprocessor_config.json",
              {"crop_size": {"height": 224, "width": 224}, "do_center_crop": True, "do_normalize": True,
               "do_resize": True, "image_mean": [0.48145466, 0.4578275, 0.40821073],
               "image_std": [0.26862954, 0.26130258, 0.27577711],
               "resample": 3, "size": {"shortest_edge": 224}, "image_processor_type": "CLIPImageProcessor"})
    print("wrote", root)
