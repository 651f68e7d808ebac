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
from transformers import CLIPTextConfig, LlamaConfig, LlavaConfig  # noqa: E402

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
            "text_encoder": ["transformers", "LlavaForConditionalGeneration" if name == "i2v" else "LlamaModel"],
            **({"image_processor": ["transformers", "CLIPImageProcessor"]} if name == "i2v" else {}),
            "text_encoder_2": ["transformers", "CLIPTextModel"],
            "transformer": ["diffusers", "HunyuanVideoTransformer3DModel"],
            "vae": ["diffusers", "AutoencoderKLHunyuanVideo"]})
        write(os.path.join(root, "transformer"), "config.json",
              {"_class_name": "HunyuanVideoTransformer3DModel", **dit})
        write(os.path.join(root, "vae"), "config.json", {"_class_name": "AutoencoderKLHunyuanVideo", **vae})
        write(os.path.join(root, "scheduler"), "scheduler_config.json",
              {"_class_name": "FlowMatchEulerDiscreteScheduler", **sched})
        if name == "i2v":  # llava-llama-3-8b: Llama-3-8B text, CLIP-L/14-336 vision (tests/test_encoder_llava.py)
            text = {**LlamaConfig(**LLAMA_8B).to_dict(), "model_type": "llama"}
            vision = dict(model_type="clip_vision_model", hidden_size=1024, intermediate_size=4096,
                          num_hidden_layers=24, num_attention_heads=16, image_size=336, patch_size=14,
                          hidden_act="quick_gelu", projection_dim=768)
            write(os.path.join(root, "text_encoder"), "config.json", LlavaConfig(
                text_config=text, vision_config=vision, image_token_index=128257, vision_feature_layer=-2,
                vision_feature_select_strategy="default", projector_hidden_act="gelu").to_dict())
            write(os.path.join(root, "image_processor"), "preprocessor_config.json", {
                "image_processor_type": "CLIPImageProcessor", "crop_size": {"height": 336, "width": 336},
                "size": {"shortest_edge": 336}, "do_center_crop": True, "do_normalize": True, "do_resize": True,
                "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711],
                "resample": 3})
        else:
            write(os.path.join(root, "text_encoder"), "config.json", LlamaConfig(**LLAMA_8B).to_dict())
        write(os.path.join(root, "text_encoder_2"), "config.json", CLIPTextConfig(**CLIP_L).to_dict())
        print(f"wrote {root}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/hunpub")
