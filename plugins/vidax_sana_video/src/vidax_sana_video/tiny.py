"""Tiny random SANA-Video pipelines built with diffusers (the PyTorch reference), for the parity tests and the
built-in checkpoint; torch, diffusers and transformers load only when called.

Every parameter, biases and norm gains included, is drawn from a seeded normal. The prompt side is a tiny Gemma-2
(two layers, sliding and full, soft-capped logits) under the trained tiny tokenizer with Gemma's ``<bos>``; the DiT
a 2-block ``SanaVideoTransformer3DModel`` at 480p's ``sample_size`` (so resolution binning picks the 480p bins);
the VAE the core's tiny ``AutoencoderKLWan``; the scheduler DPM-Solver++ on flow sigmas with shift 8, as the
published checkpoint's.
"""

from __future__ import annotations

import os
from vidax_core.testing.scratch import scratch_dir
from pathlib import Path

from vidax_core.testing.reference import randomize_
from vidax_core.testing.tiny.wan import TINY_VAE
from vidax_core.testing.tokenizers import make_tiny_gemma_tokenizer

TINY_GEMMA2 = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=2,
                   num_key_value_heads=1, head_dim=16, query_pre_attn_scalar=16, sliding_window=8,
                   attn_logit_softcapping=50.0, final_logit_softcapping=30.0, max_position_embeddings=4096,
                   rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
TINY_DIT = dict(in_channels=TINY_VAE["z_dim"], out_channels=TINY_VAE["z_dim"], num_attention_heads=2,
                attention_head_dim=12, num_layers=2, num_cross_attention_heads=2, cross_attention_head_dim=12,
                cross_attention_dim=24, caption_channels=TINY_GEMMA2["hidden_size"], mlp_ratio=2.5,
                attention_bias=True, sample_size=30, patch_size=(1, 2, 2), qk_norm="rms_norm_across_heads",
                rope_max_seq_len=1024)
FLOW_SHIFT = 8.0


def build_tiny_sana_video_pipeline(seed: int = 0, dit: dict | None = None, *, i2v: bool = False,
                                   scheduler: str = "dpm"):
    """A random-weight fp32 ``SanaVideoPipeline`` (``SanaImageToVideoPipeline`` with ``i2v``); ``dit`` overrides
    fields of :data:`TINY_DIT`; ``scheduler``: ``dpm`` (the checkpoint's) or ``euler`` (flow Euler, same shift)."""
    import diffusers
    import torch
    from transformers import AutoTokenizer, Gemma2Config, Gemma2Model

    tmp = Path(scratch_dir("vidax-sana-tok-"))
    tokenizer = AutoTokenizer.from_pretrained(str(make_tiny_gemma_tokenizer(tmp / "gemma")))
    torch.manual_seed(seed)
    gemma = Gemma2Model(Gemma2Config(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                     **TINY_GEMMA2)).eval().float()
    randomize_(gemma, seed + 1, 0.3)
    transformer = diffusers.SanaVideoTransformer3DModel(**{**TINY_DIT, **(dit or {})}).eval().float()
    randomize_(transformer, seed + 2, 0.2)
    vae = diffusers.AutoencoderKLWan(**TINY_VAE).eval().float()
    randomize_(vae, seed + 3, 0.1)
    if scheduler == "euler":
        sched = diffusers.FlowMatchEulerDiscreteScheduler(shift=FLOW_SHIFT)
    else:
        sched = diffusers.DPMSolverMultistepScheduler(flow_shift=FLOW_SHIFT, use_flow_sigmas=True,
                                                      prediction_type="flow_prediction")
    cls = diffusers.SanaImageToVideoPipeline if i2v else diffusers.SanaVideoPipeline
    return cls(tokenizer=tokenizer, text_encoder=gemma, vae=vae, transformer=transformer, scheduler=sched)


def save_tiny_sana_video(out_dir: str | os.PathLike, **kwargs):
    """Build and ``save_pretrained`` a tiny pipeline in diffusers layout (safetensors); returns (folder, pipe)."""
    pipe = build_tiny_sana_video_pipeline(**kwargs)
    pipe.save_pretrained(str(out_dir), safe_serialization=True)
    return Path(out_dir), pipe
