"""Weight-free checkpoint folders of published models (only their JSON files), for `vidax run ... --dry-run` and a
random-checkpoint writer: what a family's ``scripts/published_config_folders.py`` writes.

:func:`write_wan_based` writes one folder of a family built on Wan's parts (Wan2.1 VAE, UMT5-XXL): the transformer
config as diffusers fills it on the meta device, the VAE's and UMT5's, the scheduler config and the index. Needs the
test extra (torch, diffusers, transformers).
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping


def write_json(folder: str, name: str, data: Mapping[str, Any]) -> None:
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "w") as f:
        json.dump(data, f, indent=1)


def diffusers_config(module: Any, class_name: str) -> dict[str, Any]:
    """A diffusers model's filled-in config as its config.json holds it (tuples as lists)."""
    return {"_class_name": class_name, **{k: list(v) if isinstance(v, tuple) else v for k, v in
                                          dict(module.config).items()}}


def write_wan_based(root: str, *, pipeline: str, transformer: Any, transformer_class: str,
                    scheduler: Mapping[str, Any], pipeline_config: Mapping[str, Any] | None = None,
                    image_encoder: str | None = None) -> None:
    """One model's folder: ``transformer`` is the diffusers class (built here on the meta device from the config
    ``transformer_class`` names it by, a dict); the VAE and text encoder are the Wan2.1 VAE and UMT5-XXL of the Wan
    full-size test's published configs; ``pipeline_config``: the pipeline's own entries of ``model_index.json``;
    ``image_encoder``: the transformers class of a CLIP ViT-H/14 image tower (with its image processor)."""
    import torch
    import diffusers
    from transformers import UMT5Config

    from vidax_core.testing.published import CLIP_PREPROCESSOR, CLIP_VIT_H, UMT5_XXL, WAN21_VAE

    with torch.device("meta"):
        dit = diffusers_config(getattr(diffusers, transformer_class)(**transformer), transformer_class)
        vae = diffusers_config(diffusers.AutoencoderKLWan(**WAN21_VAE), "AutoencoderKLWan")
    write_json(root, "model_index.json", {
        "_class_name": pipeline, "scheduler": ["diffusers", scheduler["_class_name"]],
        "text_encoder": ["transformers", "UMT5EncoderModel"], "tokenizer": ["transformers", "T5TokenizerFast"],
        "transformer": ["diffusers", transformer_class], "vae": ["diffusers", "AutoencoderKLWan"],
        **dict(pipeline_config or {}),
        **({"image_encoder": ["transformers", image_encoder], "image_processor": ["transformers", "CLIPImageProcessor"]}
           if image_encoder else {})})
    if image_encoder:
        from transformers import CLIPVisionConfig

        write_json(os.path.join(root, "image_encoder"), "config.json",
                   {**CLIPVisionConfig(**CLIP_VIT_H).to_dict(), "architectures": [image_encoder]})
        write_json(os.path.join(root, "image_processor"), "preprocessor_config.json", CLIP_PREPROCESSOR)
    write_json(os.path.join(root, "transformer"), "config.json", dit)
    write_json(os.path.join(root, "vae"), "config.json", vae)
    write_json(os.path.join(root, "text_encoder"), "config.json", UMT5Config(**UMT5_XXL).to_dict())
    write_json(os.path.join(root, "scheduler"), "scheduler_config.json", dict(scheduler))
    print("wrote", root)

