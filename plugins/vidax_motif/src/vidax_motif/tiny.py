"""Tiny random Motif-Video pipelines built with diffusers (the PyTorch reference), for the parity tests and the
built-in checkpoint; torch, diffusers and transformers load only when called.

Every parameter, biases and norm gains included, is drawn from a seeded normal. The text side is a tiny
``T5Gemma2Encoder`` (two layers, one sliding with a 4-token window and one full, and a tiny SigLIP vision tower of
28x28 pixels in 2x2 patches) under the trained tiny tokenizer with Gemma's conventions; the DiT a
``MotifVideoTransformer3DModel`` with every stage (one dual block, two single blocks with the shared text
cross-attention, one DDT decoder block, the image projection); the VAE the core's tiny Wan VAE; the published
recipe's guider (adaptive projected guidance 8 with momentum 0.1, norm threshold 12, per-frame norms, the original
formulation); flow Euler with a dynamic shift (``dynamic=False``: shift 3); the SigLIP image processor at 28x28.
"""

from __future__ import annotations

import os
from vidax_core.testing.scratch import scratch_dir
from pathlib import Path

from vidax_core.testing.reference import randomize_
from vidax_core.testing.tiny.wan import TINY_VAE
from vidax_core.testing.tokenizers import make_tiny_gemma_tokenizer

Z = TINY_VAE["z_dim"]
TINY_TEXT = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=48, head_dim=16,
                 num_key_value_heads=1, sliding_window=4, layer_types=["sliding_attention", "full_attention"],
                 max_position_embeddings=256)
TINY_VISION = dict(hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=2, image_size=28,
                   patch_size=14, vision_use_head=False)
TINY_DIT = dict(in_channels=2 * Z + 1, out_channels=Z, num_attention_heads=2, attention_head_dim=12, num_layers=1,
                num_single_layers=3, num_decoder_layers=1, mlp_ratio=2.0, patch_size=2, patch_size_t=1,
                qk_norm="rms_norm", text_embed_dim=TINY_TEXT["hidden_size"], image_embed_dim=TINY_VISION["hidden_size"],
                rope_axes_dim=(4, 4, 4), enable_text_cross_attention_single=True)
#: the guider the model card's recipe builds (the adaptive projected guidance the third-party recipes copy)
GUIDER = dict(guidance_scale=8.0, adaptive_projected_guidance_rescale=12.0, adaptive_projected_guidance_momentum=0.1,
              use_original_formulation=True, adaptive_projected_guidance_norm_dim=[-1, -2, -4])
SIGLIP_SIZE = {"height": TINY_VISION["image_size"], "width": TINY_VISION["image_size"]}


def build_tiny_motif_pipeline(task: str = "t2v", seed: int = 0, *, dit: dict | None = None,
                              guider: dict | None = None, dynamic: bool = True, sharp_posterior: bool = False):
    """A random-weight fp32 ``MotifVideoPipeline`` (``task="t2v"``) or ``MotifVideoImage2VideoPipeline``.

    ``dit`` / ``guider`` override fields of :data:`TINY_DIT` / :data:`GUIDER` (``{"_class": ...}`` in ``guider``
    picks another guider class). ``sharp_posterior``: the VAE's log-variance is -30 everywhere (its ``quant_conv``
    rows zeroed, bias -30), so the I2V pipeline's posterior sample of the image is its mean to 3e-7 whatever
    generator draws it."""
    import diffusers
    import torch
    from diffusers import guiders
    from transformers import (AutoTokenizer, SiglipImageProcessor, SiglipVisionConfig, T5Gemma2Encoder,
                              T5Gemma2EncoderConfig, T5Gemma2TextConfig)

    tok_dir = make_tiny_gemma_tokenizer(Path(scratch_dir("vidax-motif-tok-")) / "gemma")
    tokenizer = AutoTokenizer.from_pretrained(str(tok_dir))
    torch.manual_seed(seed)
    text = T5Gemma2TextConfig(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, **TINY_TEXT)
    text.dropout_rate = 0.0
    text_encoder = T5Gemma2Encoder(T5Gemma2EncoderConfig(text_config=text,
                                                         vision_config=SiglipVisionConfig(**TINY_VISION))).eval()
    randomize_(text_encoder, seed + 1, 0.3)
    transformer = diffusers.MotifVideoTransformer3DModel(**{**TINY_DIT, **(dit or {})}).eval()
    randomize_(transformer, seed + 2, 0.15)
    vae = diffusers.AutoencoderKLWan(**TINY_VAE).eval()
    randomize_(vae, seed + 3, 0.1)
    if sharp_posterior:
        with torch.no_grad():
            vae.quant_conv.weight[Z:] = 0.0
            vae.quant_conv.bias[Z:] = -30.0
    settings = dict(GUIDER, **(guider or {}))
    guide = getattr(guiders, settings.pop("_class", "AdaptiveProjectedGuidance"))(**settings)
    scheduler = (diffusers.FlowMatchEulerDiscreteScheduler(use_dynamic_shifting=True, base_shift=0.5, max_shift=1.15)
                 if dynamic else diffusers.FlowMatchEulerDiscreteScheduler(shift=3.0))
    cls = diffusers.MotifVideoImage2VideoPipeline if task == "i2v" else diffusers.MotifVideoPipeline
    return cls(scheduler=scheduler, vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, transformer=transformer,
               guider=guide, feature_extractor=SiglipImageProcessor(size=SIGLIP_SIZE))


def save_tiny_motif(out_dir: str | os.PathLike, task: str = "t2v", **kwargs):
    """Build and ``save_pretrained`` a tiny pipeline in diffusers layout (safetensors); returns (folder, pipe)."""
    pipe = build_tiny_motif_pipeline(task, **kwargs)
    pipe.save_pretrained(str(out_dir), safe_serialization=True)
    return Path(out_dir), pipe
