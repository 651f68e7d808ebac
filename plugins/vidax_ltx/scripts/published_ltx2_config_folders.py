"""Folders holding only the JSON files of the published LTX-2.0 19B and LTX-2.5 22B models (no weights), for
``vidax run configs/ltx2_19b_dev.yaml model.checkpoint=FOLDER/ltx-2-19b-dev --dry-run`` memory estimates
(docs/models/ltx.md); one folder per model id. ``published_config_folders.py`` writes these beside the LTX-Video ones.

Each folder: ``transformer/config.json`` (diffusers' ``LTX2VideoTransformer3DModel`` of the full-size test's
configs, built on the meta device so every default is filled in), ``vae/config.json`` (the published LTX-2.0 video
VAE; timestep-conditioned for 2.5), the audio VAE, vocoder and connectors at their class defaults, the scheduler's
shift constants, the text encoder's ``model_type``. Needs the test extra (torch, diffusers).

    python plugins/vidax_ltx/scripts/published_ltx2_config_folders.py /tmp/ltx2_configs
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

import torch  # noqa: E402
from diffusers import LTX2VideoTransformer3DModel  # noqa: E402
from test_ltx2_dit import LTX_2_5_22B, LTX_2_19B  # noqa: E402

from vidax_ltx.ltx2_presets import SHIFT_DEFAULTS  # noqa: E402
from vidax_ltx.ltx2_vae import PUBLISHED_LTX2_VAE_CONFIG  # noqa: E402


def write(folder, name, data):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "w") as f:
        json.dump(data, f, indent=1, default=list)


#: google/gemma-3-12b-it's config.json (LTX-2's text encoder): the text model and the SigLIP vision tower.
GEMMA3_12B = {
    "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "boi_token_index": 255999,
    "eoi_token_index": 256000, "image_token_index": 262144, "mm_tokens_per_image": 256,
    "text_config": {"model_type": "gemma3_text", "hidden_size": 3840, "intermediate_size": 15360,
                    "num_hidden_layers": 48, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256,
                    "query_pre_attn_scalar": 256, "sliding_window": 1024, "rope_theta": 1000000.0,
                    "rope_local_base_freq": 10000.0, "rope_scaling": {"rope_type": "linear", "factor": 8.0},
                    "vocab_size": 262208, "max_position_embeddings": 131072, "rms_norm_eps": 1e-6},
    "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152, "intermediate_size": 4304,
                      "num_hidden_layers": 27, "num_attention_heads": 16, "image_size": 896, "patch_size": 14,
                      "vision_use_head": False},
}

#: (folder = model id, DiT config, text encoder model_type); the dev and distilled LTX-2.5 DiTs share one config.
MODELS = (("ltx-2-19b-dev", LTX_2_19B, "gemma3"), ("ltx-2.5-22b-dev", LTX_2_5_22B, "gemma4_unified"),
          ("ltx-2.5-22b-distilled", LTX_2_5_22B, "gemma4_unified"))


def main(out: str) -> None:
    for name, dit, gemma in MODELS:
        root = os.path.join(out, name)
        write(root, "model_index.json", {
            "_class_name": "LTX2Pipeline", "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"],
            "vae": ["diffusers", "AutoencoderKLLTX2Video"], "audio_vae": ["diffusers", "AutoencoderKLLTX2Audio"],
            **({"text_encoder": ["transformers", "Gemma3ForConditionalGeneration"]} if gemma == "gemma3" else {}),
            "tokenizer": ["transformers", "GemmaTokenizerFast"], "connectors": ["ltx2", "LTX2TextConnectors"],
            "transformer": ["diffusers", "LTX2VideoTransformer3DModel"], "vocoder": ["ltx2", "LTX2Vocoder"]})
        with torch.device("meta"):
            cfg = dict(LTX2VideoTransformer3DModel(**dit).config)
        write(os.path.join(root, "transformer"), "config.json", {"_class_name": "LTX2VideoTransformer3DModel", **cfg})
        write(os.path.join(root, "vae"), "config.json",
              dict(PUBLISHED_LTX2_VAE_CONFIG, timestep_conditioning=gemma != "gemma3"))
        for comp, cls in (("audio_vae", "AutoencoderKLLTX2Audio"), ("vocoder", "LTX2Vocoder"),
                          ("connectors", "LTX2TextConnectors")):
            write(os.path.join(root, comp), "config.json", {"_class_name": cls})
        write(os.path.join(root, "scheduler"), "scheduler_config.json",
              {"_class_name": "FlowMatchEulerDiscreteScheduler", **SHIFT_DEFAULTS})
        write(os.path.join(root, "text_encoder"), "config.json",
              GEMMA3_12B if gemma == "gemma3" else {"model_type": gemma})
        os.makedirs(os.path.join(root, "tokenizer"), exist_ok=True)
        print(f"wrote {root}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "ltx2_configs")
