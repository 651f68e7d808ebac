"""Tiny random Cosmos3 pipelines built with diffusers (the PyTorch reference) for the parity tests; torch, diffusers
and transformers load only when called.

Nano-style (SwiGLU, q/k norms on both streams, biases) and Edge-style (relu^2, Nemotron norms,
``k_norm_und_for_gen``) transformers with GQA 4/2 and every parameter drawn from a seeded normal at a scale where the
prompt tokens move the video (norm gains ``1 + 0.2 n``, other weights ``0.3 n``); the tiny Wan2.2 VAE of the core's
kit; the tiny Qwen-style tokenizer of the Predict2.5 tests plus ``<|vision_start|>``; UniPC with flow shift 10 and no
Karras sigmas (the published Nano recipe). The guardrail is off (``enable_safety_checker=False``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from vidax_core.testing.tiny.wan import TINY_VAE22

_COMMON = dict(head_dim=16, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
               latent_channel=TINY_VAE22["z_dim"], latent_patch_size=2, patch_latent_dim=4 * TINY_VAE22["z_dim"],
               rope_scaling={"mrope_section": [4, 2, 2]}, base_fps=24, enable_fps_modulation=True,
               unified_3d_mrope_reset_spatial_ids=True, unified_3d_mrope_temporal_modality_margin=15000,
               timestep_scale=0.001)
TINY_NANO = dict(_COMMON, hidden_size=64, intermediate_size=96, attention_bias=True, rms_norm_eps=1e-6,
                 rope_theta=5000000.0, hidden_act="silu", qk_norm_for_text=True, use_und_k_norm_for_gen=False)
TINY_EDGE = dict(_COMMON, hidden_size=48, intermediate_size=80, attention_bias=False, rms_norm_eps=1e-5,
                 rope_theta=100000000.0, hidden_act="relu2", qk_norm_for_text=False, use_und_k_norm_for_gen=True)
VARIANTS = {"nano": TINY_NANO, "edge": TINY_EDGE}
SCHEDULER = dict(prediction_type="flow_prediction", use_flow_sigmas=True, flow_shift=10.0, use_karras_sigmas=False,
                 num_train_timesteps=1000)


def make_tiny_cosmos3_tokenizer(out_dir: str | os.PathLike) -> Path:
    """The tiny Qwen-style tokenizer folder with ``<|vision_start|>`` added as a special token."""
    from tokenizers import AddedToken, Tokenizer

    from .tiny import make_tiny_qwen_tokenizer

    out = make_tiny_qwen_tokenizer(out_dir)
    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    tok.add_special_tokens([AddedToken("<|vision_start|>", special=True, normalized=False)])
    (out / "tokenizer.json").write_text(json.dumps(json.loads(tok.to_str())), encoding="utf-8")
    return out


def random_cosmos3_transformer(variant: str, vocab: int, seed: int = 0):
    import torch
    from diffusers import Cosmos3OmniTransformer

    torch.manual_seed(seed)
    model = Cosmos3OmniTransformer(**{**VARIANTS[variant], "vocab_size": vocab}).eval().float()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            norm = "norm" in name and name.endswith("weight")
            p.copy_((1.0 if norm else 0.0) + (0.2 if norm else 0.3) * torch.randn(p.shape, generator=g))
    return model


def build_tiny_cosmos3_pipeline(variant: str, seed: int = 0, *, native_flow_schedule: bool = False):
    """A random-weight fp32 ``Cosmos3OmniPipeline`` of ``variant`` ("nano" or "edge")."""
    from vidax_core.testing.scratch import scratch_dir

    from diffusers import AutoencoderKLWan, Cosmos3OmniPipeline, UniPCMultistepScheduler
    from transformers import AutoTokenizer

    from vidax_core.testing.reference import randomize_

    tok_dir = make_tiny_cosmos3_tokenizer(scratch_dir("vidax-cosmos3-tok-"))
    tokenizer = AutoTokenizer.from_pretrained(str(tok_dir))
    transformer = random_cosmos3_transformer(variant, len(tokenizer), seed)
    vae = AutoencoderKLWan(**TINY_VAE22).eval()
    randomize_(vae, seed + 3, 0.1)
    return Cosmos3OmniPipeline(transformer=transformer, text_tokenizer=tokenizer, vae=vae,
                               scheduler=UniPCMultistepScheduler(**SCHEDULER), enable_safety_checker=False,
                               use_native_flow_schedule=native_flow_schedule)


def save_tiny_cosmos3(out_dir: str | os.PathLike, variant: str, **kwargs):
    """Build and ``save_pretrained`` a tiny pipeline (safetensors); returns (folder, pipeline)."""
    pipe = build_tiny_cosmos3_pipeline(variant, **kwargs)
    pipe.save_pretrained(str(out_dir), safe_serialization=True)
    return Path(out_dir), pipe
