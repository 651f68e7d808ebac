"""The published diffusers configs of the five CogVideoX repos (THUDM/CogVideoX-2b, -5b, -5b-I2V,
CogVideoX1.5-5B, -5B-I2V): transformer, VAE, T5 v1.1 XXL and scheduler, and a writer of config-only folders
(what ``vidax run --dry-run`` and the full-size checks read)."""

from __future__ import annotations

import json
import os

_DIT_1_0 = {"_class_name": "CogVideoXTransformer3DModel", "activation_fn": "gelu-approximate", "attention_bias": True,
            "attention_head_dim": 64, "dropout": 0.0, "flip_sin_to_cos": True, "freq_shift": 0, "in_channels": 16,
            "max_text_seq_length": 226, "norm_elementwise_affine": True, "norm_eps": 1e-05,
            "num_attention_heads": 30, "num_layers": 30, "out_channels": 16, "patch_size": 2, "sample_frames": 49,
            "sample_height": 60, "sample_width": 90, "spatial_interpolation_scale": 1.875,
            "temporal_compression_ratio": 4, "temporal_interpolation_scale": 1.0, "text_embed_dim": 4096,
            "time_embed_dim": 512, "timestep_activation_fn": "silu"}
_DIT_5B = dict(_DIT_1_0, num_attention_heads=48, num_layers=42, use_rotary_positional_embeddings=True)
_DIT_1_5 = dict(_DIT_5B, patch_bias=False, patch_size_t=2, sample_frames=81, sample_height=300, sample_width=300,
                use_learned_positional_embeddings=False)
DITS = {
    "cogvideox-2b": _DIT_1_0,
    "cogvideox-5b": _DIT_5B,
    "cogvideox-5b-i2v": dict(_DIT_5B, in_channels=32, use_learned_positional_embeddings=True),
    "cogvideox1.5-5b": _DIT_1_5,
    "cogvideox1.5-5b-i2v": dict(_DIT_1_5, in_channels=32, ofs_embed_dim=512),
}
_VAE = {"_class_name": "AutoencoderKLCogVideoX", "act_fn": "silu", "block_out_channels": [128, 256, 256, 512],
        "down_block_types": ["CogVideoXDownBlock3D"] * 4, "up_block_types": ["CogVideoXUpBlock3D"] * 4,
        "dropout": 0.0, "force_upcast": True, "in_channels": 3, "out_channels": 3, "latent_channels": 16,
        "layers_per_block": 3, "norm_eps": 1e-06, "norm_num_groups": 32, "sample_height": 480, "sample_width": 720,
        "scaling_factor": 0.7, "temporal_compression_ratio": 4, "use_quant_conv": False,
        "use_post_quant_conv": False}
VAES = {
    "cogvideox-2b": dict(_VAE, scaling_factor=1.15258426),
    "cogvideox-5b": _VAE,
    "cogvideox-5b-i2v": _VAE,
    "cogvideox1.5-5b": dict(_VAE, invert_scale_latents=True),
    "cogvideox1.5-5b-i2v": dict(_VAE, invert_scale_latents=True),
}
T5_V1_1_XXL = {"architectures": ["T5EncoderModel"], "d_ff": 10240, "d_kv": 64, "d_model": 4096,
               "dense_act_fn": "gelu_new", "dropout_rate": 0.1, "eos_token_id": 1, "feed_forward_proj": "gated-gelu",
               "is_encoder_decoder": True, "is_gated_act": True, "layer_norm_epsilon": 1e-06, "model_type": "t5",
               "num_decoder_layers": 24, "num_heads": 64, "num_layers": 24, "pad_token_id": 0,
               "relative_attention_max_distance": 128, "relative_attention_num_buckets": 32,
               "tie_word_embeddings": False, "vocab_size": 32128}
SCHEDULER = {"_class_name": "CogVideoXDDIMScheduler", "beta_end": 0.012, "beta_schedule": "scaled_linear",
             "beta_start": 0.00085, "clip_sample": False, "clip_sample_range": 1.0, "num_train_timesteps": 1000,
             "prediction_type": "v_prediction", "rescale_betas_zero_snr": True, "sample_max_value": 1.0,
             "set_alpha_to_one": True, "snr_shift_scale": 3.0, "steps_offset": 0, "timestep_spacing": "trailing",
             "trained_betas": None}
SNR_SHIFT = {"cogvideox-2b": 3.0}


def write_config_folder(model_id: str, folder: str) -> str:
    """A diffusers-layout folder holding only the JSON files of ``model_id``'s repo (no weights)."""
    i2v = model_id.endswith("i2v")
    index = {"_class_name": "CogVideoXImageToVideoPipeline" if i2v else "CogVideoXPipeline",
             "_diffusers_version": "0.32.0", "scheduler": ["diffusers", "CogVideoXDDIMScheduler"],
             "text_encoder": ["transformers", "T5EncoderModel"], "tokenizer": ["transformers", "T5Tokenizer"],
             "transformer": ["diffusers", "CogVideoXTransformer3DModel"],
             "vae": ["diffusers", "AutoencoderKLCogVideoX"]}
    files = {"model_index.json": index, "transformer/config.json": DITS[model_id], "vae/config.json": VAES[model_id],
             "text_encoder/config.json": T5_V1_1_XXL,
             "scheduler/scheduler_config.json": dict(SCHEDULER, snr_shift_scale=SNR_SHIFT.get(model_id, 1.0)),
             "tokenizer/tokenizer_config.json": {"tokenizer_class": "T5Tokenizer", "model_max_length": 226,
                                                 "extra_ids": 100}}
    for rel, data in files.items():
        path = os.path.join(folder, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(data, f, indent=2)
    return folder
