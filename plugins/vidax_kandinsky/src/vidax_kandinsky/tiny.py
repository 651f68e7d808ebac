"""Tiny random Kandinsky 5 pipelines built with diffusers (the PyTorch reference), for the parity tests and the
built-in checkpoint; torch, diffusers and transformers load only when called.

Every parameter, biases and norm gains included, is drawn from a seeded normal. The text side is a tiny
Qwen2.5-VL (a text tower of 3 layers and the minimal vision tower the pipeline never runs) under the trained tiny
tokenizer with Qwen's chat tokens, and a tiny CLIP text model with its BOS/EOS tokenizer; the DiT is a 2 + 2 block
``Kandinsky5Transformer3DModel`` with ``visual_cond`` (as every published checkpoint); the VAE a tiny
``AutoencoderKLHunyuanVideo``; flow Euler with shift 5 (T2V) or 10 (I2V), as the releases' ``scheduler_scale``.
"""

from __future__ import annotations

import os
from vidax_core.testing.scratch import scratch_dir
from pathlib import Path

from vidax_core.testing.reference import randomize_
from vidax_core.testing.tiny.hunyuan import TINY_CLIP, TINY_VAE, make_tiny_clip_tokenizer, random_clip_text
from vidax_core.testing.tokenizers import make_tiny_qwen_tokenizer

TINY_QWEN = dict(hidden_size=16, intermediate_size=24, num_hidden_layers=3, num_attention_heads=2,
                 num_key_value_heads=1, max_position_embeddings=2048, rms_norm_eps=1e-6,
                 rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [1, 1, 2]})
QWEN_VISION = dict(depth=1, hidden_size=16, intermediate_size=16, num_heads=2, out_hidden_size=16, patch_size=2,
                   spatial_merge_size=1, temporal_patch_size=1, window_size=4, fullatt_block_indexes=[0])
TINY_DIT = dict(in_visual_dim=TINY_VAE["latent_channels"], out_visual_dim=TINY_VAE["latent_channels"],
                in_text_dim=TINY_QWEN["hidden_size"], in_text_dim2=TINY_CLIP["hidden_size"], time_dim=24,
                patch_size=(1, 2, 2), model_dim=64, ff_dim=96, num_text_blocks=2, num_visual_blocks=2,
                axes_dims=(4, 6, 6), visual_cond=True)
SHIFT = {"t2v": 5.0, "i2v": 10.0}


def build_tiny_kandinsky_pipeline(task: str = "t2v", seed: int = 0, dit: dict | None = None, *,
                                  sharp_posterior: bool = False):
    """A random-weight fp32 ``Kandinsky5T2VPipeline`` (``task="t2v"``) or ``Kandinsky5I2VPipeline``.

    ``sharp_posterior``: the VAE's log-variance output is -30 everywhere (its ``quant_conv`` rows zeroed, bias
    -30), so the I2V pipeline's posterior sample of the image is its mean to 3e-7 whatever generator draws it."""
    import diffusers
    import torch
    from transformers import AutoTokenizer, Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    tmp = Path(scratch_dir("vidax-kandinsky-tok-"))
    tokenizer = AutoTokenizer.from_pretrained(str(make_tiny_qwen_tokenizer(tmp / "qwen")))
    tokenizer_2 = AutoTokenizer.from_pretrained(str(make_tiny_clip_tokenizer(tmp / "clip")))
    torch.manual_seed(seed)
    vocab = len(tokenizer)
    qwen = Qwen2_5_VLForConditionalGeneration(Qwen2_5_VLConfig(
        text_config=dict(vocab_size=vocab, **TINY_QWEN), vision_config=QWEN_VISION, vocab_size=vocab,
        pad_token_id=tokenizer.pad_token_id)).eval().float()
    randomize_(qwen, seed + 1, 0.3)
    clip = random_clip_text(tokenizer_2, seed + 2)
    transformer = diffusers.Kandinsky5Transformer3DModel(**{**TINY_DIT, **(dit or {})}).eval().float()
    randomize_(transformer, seed + 3, 0.15)
    vae = diffusers.AutoencoderKLHunyuanVideo(**TINY_VAE).eval().float()
    randomize_(vae, seed + 4, 0.1)
    if sharp_posterior:
        sharpen_posterior(vae)
    cls = diffusers.Kandinsky5I2VPipeline if task == "i2v" else diffusers.Kandinsky5T2VPipeline
    return cls(transformer=transformer, vae=vae, text_encoder=qwen, tokenizer=tokenizer, text_encoder_2=clip,
               tokenizer_2=tokenizer_2, scheduler=diffusers.FlowMatchEulerDiscreteScheduler(shift=SHIFT[task]))


def sharpen_posterior(vae) -> None:
    """The tiny HunyuanVideo VAE's log-variance output set to -30 everywhere (``quant_conv``'s rows zeroed, bias
    -30): an image's posterior sample is its mean to 3e-7, whatever generator the pipeline draws it from."""
    import torch

    c = TINY_VAE["latent_channels"]
    with torch.no_grad():
        vae.quant_conv.weight[c:] = 0.0
        vae.quant_conv.bias[c:] = -30.0


def save_tiny_kandinsky(out_dir: str | os.PathLike, task: str = "t2v", **kwargs):
    """Build and ``save_pretrained`` a tiny pipeline in diffusers layout (safetensors); returns (folder, pipe)."""
    pipe = build_tiny_kandinsky_pipeline(task, **kwargs)
    pipe.save_pretrained(str(out_dir), safe_serialization=True)
    return Path(out_dir), pipe
