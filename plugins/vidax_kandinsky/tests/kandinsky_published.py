"""The published configs of the Kandinsky 5 video checkpoints (diffusers layout): transformer, text encoders, VAE and
scheduler per model id, and a writer of config-only folders (what ``vidax run --dry-run`` and the full-size checks
read; ``scripts/published_config_folders.py`` calls it).

The transformer configs are the ``dit_params`` and ``attention`` sections of the Kandinsky team's release configs
(kandinskylab/kandinsky-5 ``configs/``) under diffusers' ``Kandinsky5Transformer3DModel`` names: Lite 5 s
(``k5_lite_t2v_5s_*``: dense attention), Lite 10 s (``k5_lite_t2v_10s_*``: NABLA, P 0.9), Pro HD
(``k5_pro_t2v_5s_sft_hd``: NABLA, P 0.8), I2V Lite (``k5_lite_i2v_5s_sft_sd``: dense). The flow shift is the
release's ``scheduler_scale`` (5 for text-to-video, 10 for I2V Lite). Qwen2.5-VL-7B-Instruct and CLIP ViT-L/14's
text tower are the pipelines' encoders; the VAE is HunyuanVideo's with its published defaults.
"""

from __future__ import annotations

import json
import os

_LITE = dict(in_visual_dim=16, out_visual_dim=16, in_text_dim=3584, in_text_dim2=768, time_dim=512,
             patch_size=[1, 2, 2], model_dim=1792, ff_dim=7168, num_text_blocks=2, num_visual_blocks=32,
             axes_dims=[16, 24, 24], visual_cond=True, attention_type="regular")
_NABLA = dict(attention_type="nabla", attention_causal=False, attention_local=False, attention_glob=False,
              attention_window=3, attention_wT=11, attention_wW=3, attention_wH=3, attention_add_sta=True,
              attention_method="topcdf")
_PRO = dict(_LITE, time_dim=1024, model_dim=4096, ff_dim=16384, num_text_blocks=4, num_visual_blocks=60,
            axes_dims=[32, 48, 48], **_NABLA, attention_P=0.8)

#: model id (and the Lite 10 s variant) -> (transformer config, scheduler shift, pipeline class)
MODELS = {
    "kandinsky5-t2v-lite": (_LITE, 5.0, "Kandinsky5T2VPipeline"),
    "kandinsky5-t2v-lite-10s": (dict(_LITE, **_NABLA, attention_P=0.9), 5.0, "Kandinsky5T2VPipeline"),
    "kandinsky5-t2v-pro": (_PRO, 5.0, "Kandinsky5T2VPipeline"),
    "kandinsky5-i2v-lite": (_LITE, 10.0, "Kandinsky5I2VPipeline"),
}
#: registered id -> its published folders (the Lite id's 10 s checkpoints are configs of it)
FOLDERS = {"kandinsky5-t2v-lite": ("kandinsky5-t2v-lite", "kandinsky5-t2v-lite-10s"),
           "kandinsky5-t2v-pro": ("kandinsky5-t2v-pro",), "kandinsky5-i2v-lite": ("kandinsky5-i2v-lite",)}

QWEN_7B_TEXT = dict(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                    num_attention_heads=28, num_key_value_heads=4, max_position_embeddings=128000, rms_norm_eps=1e-6,
                    rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [16, 24, 24]})
QWEN_7B_VISION = dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, out_hidden_size=3584,
                      patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=112,
                      fullatt_block_indexes=[7, 15, 23, 31])
CLIP_L = dict(vocab_size=49408, hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
              max_position_embeddings=77, projection_dim=768, hidden_act="quick_gelu")


def _write(folder: str, name: str, data: dict) -> None:
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "w") as f:
        json.dump(data, f, indent=1)


def _plain(cfg) -> dict:
    """A diffusers / transformers config as JSON: tuples as lists, no ``_use_default_values`` bookkeeping."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dict(cfg).items() if k != "_use_default_values"}


def write_folders(out: str) -> list[str]:
    """One config-only diffusers folder per entry of :data:`MODELS` under ``out``; needs torch, diffusers and
    transformers (the configs pass through them on the meta device, so every default is filled in)."""
    import torch
    from diffusers import AutoencoderKLHunyuanVideo, FlowMatchEulerDiscreteScheduler, Kandinsky5Transformer3DModel
    from transformers import CLIPTextConfig, Qwen2_5_VLConfig

    with torch.device("meta"):
        vae = _plain(AutoencoderKLHunyuanVideo().config)
    qwen = Qwen2_5_VLConfig(text_config=QWEN_7B_TEXT, vision_config=QWEN_7B_VISION).to_dict()
    written = []
    for name, (dit, shift, pipeline) in MODELS.items():
        root = os.path.join(out, name)
        with torch.device("meta"):
            transformer = _plain(Kandinsky5Transformer3DModel(**dit).config)
        _write(root, "model_index.json", {
            "_class_name": pipeline, "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"],
            "text_encoder": ["transformers", "Qwen2_5_VLForConditionalGeneration"],
            "tokenizer": ["transformers", "Qwen2VLProcessor"], "text_encoder_2": ["transformers", "CLIPTextModel"],
            "tokenizer_2": ["transformers", "CLIPTokenizer"],
            "transformer": ["diffusers", "Kandinsky5Transformer3DModel"],
            "vae": ["diffusers", "AutoencoderKLHunyuanVideo"]})
        _write(os.path.join(root, "transformer"), "config.json",
               {"_class_name": "Kandinsky5Transformer3DModel", **transformer})
        _write(os.path.join(root, "vae"), "config.json", {"_class_name": "AutoencoderKLHunyuanVideo", **vae})
        _write(os.path.join(root, "scheduler"), "scheduler_config.json",
               {"_class_name": "FlowMatchEulerDiscreteScheduler",
                **_plain(FlowMatchEulerDiscreteScheduler(shift=shift).config)})
        _write(os.path.join(root, "text_encoder"), "config.json", qwen)
        _write(os.path.join(root, "text_encoder_2"), "config.json", CLIPTextConfig(**CLIP_L).to_dict())
        written.append(root)
    return written
