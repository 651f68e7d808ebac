"""The published configs of Motif-Video 2B (``Motif-Technologies/Motif-Video-2B``, diffusers layout) and a writer of
a config-only folder (what ``vidax run --dry-run``, the published layout and the full-size check read;
``scripts/published_config_folders.py`` calls it).

* transformer: the model card's architecture under ``MotifVideoTransformer3DModel``'s names: 12 dual-stream + 16
  single-stream + 8 DDT decoder blocks (``num_single_layers`` 24, ``num_decoder_layers`` 8), width 1536 = 12 heads
  x 128, 2x2x1 patches, q/k RMS norms, RoPE (16, 56, 56) at theta 256, the shared text cross-attention in the
  single-stream stage, T5Gemma2's 2560-wide text and SigLIP's 1152-wide image features: 2.04 B parameters (the
  card's "2B"; without the single blocks' cross-attention, 1.89 B, the base checkpoint's "1.9B");
* text_encoder: the repository's ``T5Gemma2Encoder`` config.json (T5Gemma2 4B's encoder: 34 layers, width 2560,
  8 heads of 256, 4 KV heads, sliding window 1024 every 6th layer full; SigLIP so400m at 896 pixels);
* vae: diffusers' ``AutoencoderKLWan`` (Wan2.1, its published latent statistics are the defaults);
* scheduler: ``FlowMatchEulerDiscreteScheduler`` (diffusers' defaults; the repository's own values are not recorded
  here), guider: the model card recipe's ``AdaptiveProjectedGuidance`` (8, momentum 0.1, norm threshold 12, per-frame
  norms, original formulation), feature_extractor: SigLIP's processor at 896x896.
"""

from __future__ import annotations

import os

DIT = dict(in_channels=33, out_channels=16, num_attention_heads=12, attention_head_dim=128, num_layers=12,
           num_single_layers=24, num_decoder_layers=8, mlp_ratio=4.0, patch_size=2, patch_size_t=1, qk_norm="rms_norm",
           norm_type="layer_norm", text_embed_dim=2560, image_embed_dim=1152, rope_theta=256.0,
           rope_axes_dim=[16, 56, 56], enable_text_cross_attention_dual=False, enable_text_cross_attention_single=True)
_LAYERS = ["sliding_attention"] * 5 + ["full_attention"]
TEXT_ENCODER = {
    "architectures": ["T5Gemma2Encoder"], "model_type": "t5gemma2_encoder", "boi_token_index": 255999,
    "eoi_token_index": 256000, "image_token_index": 256001, "mm_tokens_per_image": 256, "tie_word_embeddings": True,
    "text_config": {
        "model_type": "t5gemma2_text", "hidden_size": 2560, "intermediate_size": 10240, "num_hidden_layers": 34,
        "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "query_pre_attn_scalar": 256,
        "hidden_activation": "gelu_pytorch_tanh", "rms_norm_eps": 1e-06, "sliding_window": 1024,
        "layer_types": (_LAYERS * 6)[:34], "max_position_embeddings": 131072, "vocab_size": 262144,
        "attention_bias": False, "attn_logit_softcapping": None, "final_logit_softcapping": None,
        "dropout_rate": 0.0, "attention_dropout": 0.0, "pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 1,
        "rope_parameters": {"full_attention": {"factor": 8.0, "rope_theta": 1000000, "rope_type": "linear"},
                            "sliding_attention": {"rope_theta": 10000, "rope_type": "default"}},
    },
    "vision_config": {
        "model_type": "siglip_vision_model", "hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27,
        "num_attention_heads": 16, "image_size": 896, "patch_size": 14, "num_channels": 3,
        "hidden_act": "gelu_pytorch_tanh", "layer_norm_eps": 1e-06, "vision_use_head": False,
    },
}
GUIDER = {"_class_name": "AdaptiveProjectedGuidance", "guidance_scale": 8.0,
          "adaptive_projected_guidance_rescale": 12.0, "adaptive_projected_guidance_momentum": 0.1,
          "use_original_formulation": True,
          "adaptive_projected_guidance_norm_dim": [-1, -2, -4], "eta": 1.0, "guidance_rescale": 0.0, "start": 0.0,
          "stop": 1.0, "enabled": True}
FEATURE_EXTRACTOR = {"image_processor_type": "SiglipImageProcessor", "do_resize": True, "size": {"height": 896,
                     "width": 896}, "resample": 3, "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
                     "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "do_convert_rgb": True}
MODEL_ID = "motif-video-2b"


def write_folder(out: str) -> str:
    """The config-only diffusers folder of ``motif-video-2b`` under ``out``; needs torch and diffusers (the configs
    pass through them on the meta device, so every default is filled in)."""
    import torch
    from diffusers import AutoencoderKLWan, FlowMatchEulerDiscreteScheduler, MotifVideoTransformer3DModel

    from vidax_core.testing.config_folders import diffusers_config, write_json
    from vidax_core.testing.published import WAN21_VAE

    with torch.device("meta"):
        transformer = diffusers_config(MotifVideoTransformer3DModel(**DIT), "MotifVideoTransformer3DModel")
        vae = diffusers_config(AutoencoderKLWan(**WAN21_VAE), "AutoencoderKLWan")
    root = os.path.join(out, MODEL_ID)
    write_json(root, "model_index.json", {
        "_class_name": "MotifVideoPipeline", "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"],
        "text_encoder": ["transformers", "T5Gemma2Encoder"], "tokenizer": ["transformers", "GemmaTokenizerFast"],
        "transformer": ["diffusers", "MotifVideoTransformer3DModel"], "vae": ["diffusers", "AutoencoderKLWan"],
        "guider": ["diffusers", "AdaptiveProjectedGuidance"],
        "feature_extractor": ["transformers", "SiglipImageProcessor"]})
    write_json(os.path.join(root, "transformer"), "config.json", transformer)
    write_json(os.path.join(root, "vae"), "config.json", vae)
    write_json(os.path.join(root, "scheduler"), "scheduler_config.json",
               diffusers_config(FlowMatchEulerDiscreteScheduler(), "FlowMatchEulerDiscreteScheduler"))
    write_json(os.path.join(root, "text_encoder"), "config.json", TEXT_ENCODER)
    write_json(os.path.join(root, "guider"), "guider_config.json", GUIDER)
    write_json(os.path.join(root, "feature_extractor"), "preprocessor_config.json", FEATURE_EXTRACTOR)
    return root
