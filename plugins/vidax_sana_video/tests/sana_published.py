"""The published configs of the SANA-Video checkpoints (diffusers layout), for the full-size checks and the
config-only folders (``vidax run --dry-run``, the published layouts; ``scripts/published_config_folders.py``).

``sana-video-2b-480p`` is ``Efficient-Large-Model/SANA-Video_2B_480p_diffusers`` as diffusers'
``scripts/convert_sana_video_to_diffusers.py`` writes it (``--video_size 480``): the 2B transformer (20 blocks of 20
heads x 112, ``mlp_ratio`` 3, cross-attention to a 2240-wide context, ``caption_channels`` 2304, patch (1, 2, 2),
``sample_size`` 30), Gemma-2-2B-it's decoder as the text encoder (``Efficient-Large-Model/gemma-2-2b-it``'s
``Gemma2Model``), the Wan2.1 VAE, DPM-Solver++ on flow sigmas with ``flow_shift`` 8.
"""

from __future__ import annotations

import os

from vidax_core.testing.config_folders import diffusers_config, write_json
from vidax_core.testing.published import WAN21_VAE

DIT_2B_480P = dict(in_channels=16, out_channels=16, num_attention_heads=20, attention_head_dim=112, num_layers=20,
                   num_cross_attention_heads=20, cross_attention_head_dim=112, cross_attention_dim=2240,
                   caption_channels=2304, mlp_ratio=3.0, attention_bias=False, sample_size=30, patch_size=[1, 2, 2],
                   norm_elementwise_affine=False, norm_eps=1e-6, qk_norm="rms_norm_across_heads",
                   rope_max_seq_len=1024)
GEMMA2_2B = dict(vocab_size=256000, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26,
                 num_attention_heads=8, num_key_value_heads=4, head_dim=256, query_pre_attn_scalar=256,
                 sliding_window=4096, attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
                 hidden_activation="gelu_pytorch_tanh", max_position_embeddings=8192, rms_norm_eps=1e-6,
                 rope_theta=10000.0, pad_token_id=0, bos_token_id=2, eos_token_id=1)
SCHEDULER = dict(flow_shift=8.0, use_flow_sigmas=True, prediction_type="flow_prediction")

#: model id -> its transformer config
MODELS = {"sana-video-2b-480p": DIT_2B_480P}


def write_folders(out: str) -> list[str]:
    """One config-only diffusers folder per model id under ``out``; needs torch, diffusers and transformers (the
    configs pass through them on the meta device, so every default is filled in)."""
    import torch
    from diffusers import AutoencoderKLWan, DPMSolverMultistepScheduler, SanaVideoTransformer3DModel
    from transformers import Gemma2Config

    with torch.device("meta"):
        vae = diffusers_config(AutoencoderKLWan(**WAN21_VAE), "AutoencoderKLWan")
    gemma = {**Gemma2Config(**GEMMA2_2B).to_dict(), "architectures": ["Gemma2Model"]}
    scheduler = diffusers_config(DPMSolverMultistepScheduler(**SCHEDULER), "DPMSolverMultistepScheduler")
    written = []
    for name, dit in MODELS.items():
        root = os.path.join(out, name)
        with torch.device("meta"):
            transformer = diffusers_config(SanaVideoTransformer3DModel(**dit), "SanaVideoTransformer3DModel")
        write_json(root, "model_index.json", {
            "_class_name": "SanaVideoPipeline", "scheduler": ["diffusers", "DPMSolverMultistepScheduler"],
            "text_encoder": ["transformers", "Gemma2Model"], "tokenizer": ["transformers", "GemmaTokenizerFast"],
            "transformer": ["diffusers", "SanaVideoTransformer3DModel"], "vae": ["diffusers", "AutoencoderKLWan"]})
        write_json(os.path.join(root, "transformer"), "config.json", transformer)
        write_json(os.path.join(root, "vae"), "config.json", vae)
        write_json(os.path.join(root, "scheduler"), "scheduler_config.json", scheduler)
        write_json(os.path.join(root, "text_encoder"), "config.json", gemma)
        written.append(root)
    return written
