"""Folders holding only the published JSON files of the two HunyuanVideo 1.0 models (no weights), for
``vidax run ... --dry-run`` memory estimates (docs/models/hunyuan.md, "Parallelism and memory").

``OUT/t2v`` (``hunyuanvideo-t2v-13b``) and ``OUT/i2v`` (``hunyuanvideo-i2v-13b``), each with
``transformer/config.json`` (diffusers' ``HunyuanVideoTransformer3DModel`` config of the full-size test's ``DIT``,
built on the meta device so every default is filled in; the I2V folder with ``"image_condition_type":
"token_replace"``), ``vae/config.json`` (``AutoencoderKLHunyuanVideo`` defaults), ``scheduler/scheduler_config.json``
(``FlowMatchEulerDiscreteScheduler``, shift 7), ``text_encoder/config.json`` (the test's Llama-3-8B ``LLAMA_8B``),
``text_encoder_2/config.json`` (the test's CLIP-L text ``CLIP_L``) and ``model_index.json`` naming the pipeline and
those components. No tokenizer files: the dry run sizes the DiT and reads none. Needs the test extra (torch,
diffusers, transformers).

    python plugins/vidax_hunyuan/scripts/published_config_folders.py /tmp/hunpub
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

import torch  # noqa: E402
from diffusers import (  # noqa: E402
    AutoencoderKLHunyuanVideo,
    FlowMatchEulerDiscreteScheduler,
    HunyuanVideoTransformer3DModel,
)
from test_hunyuan_full_size import CLIP_L, DIT, LLAMA_8B  # noqa: E402
from transformers import CLIPTextConfig, LlamaConfig  # noqa: E402

# folder -> (pipeline of the published model_index.json, image_condition_type of its transformer)
MODELS = {"t2v": ("HunyuanVideoPipeline", None), "i2v": ("HunyuanVideoImageToVideoPipeline", "token_replace")}


def write(folder, name, data):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "w") as f:
        json.dump(data, f, indent=1)


def lists(cfg):
    """Tuples as JSON lists, without diffusers' ``_use_default_values`` bookkeeping (a set: unordered)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in cfg.items() if k != "_use_default_values"}


def main(out: str) -> None:
    with torch.device("meta"):
        vae = lists(AutoencoderKLHunyuanVideo().config)
    sched = lists(FlowMatchEulerDiscreteScheduler(shift=7.0).config)
    for name, (pipeline, condition) in MODELS.items():
        root = os.path.join(out, name)
        with torch.device("meta"):
            dit = lists(HunyuanVideoTransformer3DModel(**dict(DIT, image_condition_type=condition)).config)
        write(root, "model_index.json", {
            "_class_name": pipeline,
            "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"],
            "text_encoder": ["transformers", "LlamaModel"],
            "text_encoder_2": ["transformers", "CLIPTextModel"],
            "transformer": ["diffusers", "HunyuanVideoTransformer3DModel"],
            "vae": ["diffusers", "AutoencoderKLHunyuanVideo"]})
        write(os.path.join(root, "transformer"), "config.json", {"_class_name": "HunyuanVideoTransformer3DModel", **dit})
        write(os.path.join(root, "vae"), "config.json", {"_class_name": "AutoencoderKLHunyuanVideo", **vae})
        write(os.path.join(root, "scheduler"), "scheduler_config.json",
              {"_class_name": "FlowMatchEulerDiscreteScheduler", **sched})
        write(os.path.join(root, "text_encoder"), "config.json", LlamaConfig(**LLAMA_8B).to_dict())
        write(os.path.join(root, "text_encoder_2"), "config.json", CLIPTextConfig(**CLIP_L).to_dict())
        print(f"wrote {root}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/hunpub")
