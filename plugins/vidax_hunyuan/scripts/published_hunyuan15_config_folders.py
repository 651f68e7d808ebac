"""Folders holding only the published JSON files of the five HunyuanVideo-1.5 models (no weights, no tokenizer
files), for ``vidax run ... --dry-run`` memory estimates (docs/models/hunyuan.md, HunyuanVideo-1.5 "Memory").

``OUT/<model id>`` for every ``hunyuanvideo-1.5-*`` id, in the diffusers layout of the
``hunyuanvideo-community/HunyuanVideo-1.5-Diffusers-*`` repos: ``model_index.json`` naming the pipeline
(``HunyuanVideo15Pipeline`` / ``HunyuanVideo15ImageToVideoPipeline``) and every component of its ``__init__`` as
``[library, class]``, and each component's config written by the class's own ``save_config`` / transformers'
``save_pretrained`` steps from an instance built on the meta device (every default filled in, ``_class_name`` or
``architectures`` set), so a generic tool can instantiate each class from the folder alone. The numbers:

* ``transformer``: ``CONFIGS`` of ``tests/test_hunyuan15_full_size.py`` (diffusers' conversion script's
  ``TRANSFORMER_CONFIGS``), the id's release variant (``release15.id_variant``) picking the entry.
* ``vae``: ``AutoencoderKLHunyuanVideo15`` defaults (what the conversion script builds).
* ``scheduler``: ``FlowMatchEulerDiscreteScheduler`` at the id's flow shift (``release15.flow_shift``: 5 at 480p,
  9 for 720p T2V, 7 for 720p I2V and the step-distilled DiT, as the presets say).
* ``guider``: ``ClassifierFreeGuidance`` at the preset's guidance scale (6; 1 for the step-distilled id).
* ``text_encoder``: ``Qwen2_5_VLTextModel`` with Qwen2.5-VL-7B-Instruct's text tower (``QWEN_7B`` of
  ``plugins/vidax_cosmos/tests/test_cosmos_full_size.py``; ``rms_norm_eps`` 1e-6 and ``max_window_layers`` 28 from
  the model card's config, where transformers' defaults differ), dtype bfloat16 (the conversion script loads it so).
* ``text_encoder_2``: ``T5EncoderModel`` with google/byt5-small's numbers (``vidax_core.encoders.t5.BYT5_SMALL``;
  ``num_decoder_layers`` 4 and untied embeddings from byt5-small's model card config), the vocabulary grown to
  1510 = 384 + Glyph-SDXL-v2's 138 color and 988 font tokens (its ``color_idx.json`` and
  ``multilingual_10-lang_idx.json``, added by the conversion script).
* I2V ``image_encoder``: ``SiglipVisionModel`` of FLUX.1-Redux-dev's image encoder, SigLIP so400m/14 at 384 px
  (width 1152, 27 layers, 16 heads, MLP 4304: the model card's config; the DiT's ``image_embed_dim`` 1152 and its
  27 x 27 = 729 image tokens), transformers' defaults otherwise; ``feature_extractor``: ``SiglipImageProcessor``
  at 384 x 384, bicubic, mean / std 0.5.

``model_index.json`` names the tokenizers as transformers 5 loads them (``Qwen2Tokenizer``, ``ByT5Tokenizer``) but
no tokenizer folder is written: the dry run sizes the DiT and reads none. Needs the test extra (torch, diffusers,
transformers).

    python plugins/vidax_hunyuan/scripts/published_hunyuan15_config_folders.py /tmp/hun15pub
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PLUGINS = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(PLUGINS, "vidax_hunyuan", "tests"))
sys.path.insert(0, os.path.join(PLUGINS, "vidax_cosmos", "tests"))

import diffusers  # noqa: E402
import torch  # noqa: E402
from diffusers import (  # noqa: E402
    AutoencoderKLHunyuanVideo15,
    ClassifierFreeGuidance,
    FlowMatchEulerDiscreteScheduler,
    HunyuanVideo15Transformer3DModel,
)
from test_cosmos_full_size import QWEN_7B  # noqa: E402
from test_hunyuan15_full_size import CONFIGS  # noqa: E402
from transformers import (  # noqa: E402
    Qwen2_5_VLTextConfig,
    Qwen2_5_VLTextModel,
    SiglipImageProcessorPil,
    SiglipVisionConfig,
    SiglipVisionModel,
    T5Config,
    T5EncoderModel,
)

from vidax_core.encoders.t5 import BYT5_SMALL  # noqa: E402
from vidax_hunyuan.hunyuan15_presets import MODELS  # noqa: E402
from vidax_hunyuan.release15 import flow_shift, id_variant  # noqa: E402

GLYPH_TOKENS = 138 + 988  # Glyph-SDXL-v2's color and multilingual font tokens, appended to byt5-small's 384
QWEN_7B_MORE = dict(rms_norm_eps=1e-6, max_window_layers=28)  # Qwen2.5-VL-7B-Instruct's, not transformers' defaults
SIGLIP = dict(hidden_size=1152, intermediate_size=4304, num_hidden_layers=27, num_attention_heads=16, image_size=384,
              patch_size=14)
SIGLIP_PROCESSOR = dict(size={"height": 384, "width": 384}, resample=3, do_rescale=True, rescale_factor=1 / 255,
                        do_normalize=True, image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
TEXT_TOWERS = {  # folder -> (class, config, dtype of the stored weights)
    "text_encoder": (Qwen2_5_VLTextModel, Qwen2_5_VLTextConfig(**QWEN_7B, **QWEN_7B_MORE), torch.bfloat16),
    "text_encoder_2": (T5EncoderModel, T5Config(**{**{k: v for k, v in BYT5_SMALL.items() if k != "model_type"},
                                                   "vocab_size": BYT5_SMALL["vocab_size"] + GLYPH_TOKENS},
                                                num_decoder_layers=4, tie_word_embeddings=False), torch.float32),
}
IMAGE_TOWERS = {"image_encoder": (SiglipVisionModel, SiglipVisionConfig(**SIGLIP), torch.float32)}


def save_transformers(folder, cls, config, dtype):
    """config.json as ``PreTrainedModel.save_pretrained`` writes it: from the model built on the meta device (its
    ``__init__`` may adjust the config, e.g. T5EncoderModel's ``is_encoder_decoder``), with ``dtype`` and
    ``architectures``."""
    with torch.device("meta"):
        model = cls._from_config(config, dtype=dtype)
    model.config.dtype = str(model.dtype).split(".")[1]
    model.config.architectures = [cls.__name__]
    model.config.save_pretrained(folder)
    return [cls.__module__.split(".")[0], cls.__name__]


def save_diffusers(folder, obj):
    """The diffusers object's config file (``config.json``, ``scheduler_config.json``, ``guider_config.json``)."""
    obj.save_config(folder)
    return ["diffusers", type(obj).__name__]


def write_model(root, spec):
    variant = id_variant(spec["id"])
    i2v = "i2v" in spec["tasks"]
    with torch.device("meta"):
        dit = HunyuanVideo15Transformer3DModel(**CONFIGS[variant])
        vae = AutoencoderKLHunyuanVideo15()
    index = {
        "transformer": save_diffusers(os.path.join(root, "transformer"), dit),
        "vae": save_diffusers(os.path.join(root, "vae"), vae),
        "scheduler": save_diffusers(os.path.join(root, "scheduler"),
                                    FlowMatchEulerDiscreteScheduler(shift=flow_shift(variant))),
        "guider": save_diffusers(os.path.join(root, "guider"), ClassifierFreeGuidance(
            guidance_scale=spec["preset"]["sampling"]["guidance_scale"])),
        "tokenizer": ["transformers", "Qwen2Tokenizer"],
        "tokenizer_2": ["transformers", "ByT5Tokenizer"],
    }
    for name, (cls, config, dtype) in {**TEXT_TOWERS, **(IMAGE_TOWERS if i2v else {})}.items():
        index[name] = save_transformers(os.path.join(root, name), cls, config, dtype)
    if i2v:
        processor = SiglipImageProcessorPil(**SIGLIP_PROCESSOR)
        processor.save_pretrained(os.path.join(root, "feature_extractor"))
        path = os.path.join(root, "feature_extractor", "preprocessor_config.json")
        with open(path) as f:  # the published class name: transformers 5 maps it to its default backend
            data = dict(json.load(f), image_processor_type="SiglipImageProcessor")
        with open(path, "w") as f:
            f.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
        index["feature_extractor"] = ["transformers", "SiglipImageProcessor"]
    pipeline = "HunyuanVideo15ImageToVideoPipeline" if i2v else "HunyuanVideo15Pipeline"
    with open(os.path.join(root, "model_index.json"), "w") as f:
        f.write(json.dumps({"_class_name": pipeline, "_diffusers_version": diffusers.__version__, **index},
                           indent=2, sort_keys=True) + "\n")


def main(out: str) -> None:
    for spec in MODELS:
        root = os.path.join(out, spec["id"])
        write_model(root, spec)
        print(f"wrote {root}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/hun15pub")
