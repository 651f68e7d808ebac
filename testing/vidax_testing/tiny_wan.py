"""Tiny random Wan2.1 text-to-video pipelines built with diffusers (the PyTorch reference), for parity tests.

Every parameter, biases and norm gains included, is drawn from a seeded normal so no term of the computation is
trivially zero, and the whole pipeline is saved with ``save_pretrained`` so vidax loads exactly the files a real
diffusers checkpoint has.
"""

from __future__ import annotations

import os
from pathlib import Path

from .tiny_tokenizer import make_tiny_t5_tokenizer, tokenizer_vocab_size

TINY_DIT = dict(
    patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=4, out_channels=4,
    text_dim=32, freq_dim=16, ffn_dim=32, num_layers=2, cross_attn_norm=True, qk_norm="rms_norm_across_heads",
    eps=1e-6, rope_max_seq_len=32,
)
TINY_VAE = dict(
    base_dim=8, z_dim=4, dim_mult=[1, 2, 2, 2], num_res_blocks=1, attn_scales=[], temperal_downsample=[False, True, True],
    latents_mean=[0.1, -0.2, 0.05, 0.3], latents_std=[1.5, 0.8, 1.2, 2.0],
)
TINY_UMT5 = dict(d_model=32, d_kv=8, d_ff=48, num_layers=2, num_heads=4, relative_attention_num_buckets=8,
                 relative_attention_max_distance=16, feed_forward_proj="gated-gelu")


def randomize_(module, seed: int, std: float = 0.1) -> None:
    """Overwrite every parameter of a torch module with seeded normal noise (norm gains around 1)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(module.named_parameters()):
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32) * std
            is_gain = p.ndim <= 1 and ("norm" in name or name.endswith("gamma")) and "bias" not in name
            p.copy_((1.0 + noise) if is_gain else noise)


def build_tiny_wan_pipeline(seed: int = 0, flow_shift: float = 3.0, scheduler: str = "unipc", dit: dict | None = None):
    """A random-weight WanPipeline in fp32 with a trained tiny tokenizer (needs a temp dir for the tokenizer).

    ``dit`` overrides fields of :data:`TINY_DIT` (e.g. ``{"num_attention_heads": 4, "num_layers": 4}`` for
    tensor/sequence-parallel tests that need more heads and blocks)."""
    import tempfile

    import torch
    from diffusers import AutoencoderKLWan, FlowMatchEulerDiscreteScheduler, UniPCMultistepScheduler, WanPipeline, WanTransformer3DModel
    from transformers import AutoTokenizer, UMT5Config, UMT5EncoderModel

    tok_dir = make_tiny_t5_tokenizer(tempfile.mkdtemp(prefix="vidax-tok-"))
    tokenizer = AutoTokenizer.from_pretrained(str(tok_dir))
    vocab = tokenizer_vocab_size(tok_dir)
    torch.manual_seed(seed)
    text_encoder = UMT5EncoderModel(UMT5Config(vocab_size=vocab, **TINY_UMT5)).eval()
    transformer = WanTransformer3DModel(**{**TINY_DIT, **(dit or {})}).eval()
    vae = AutoencoderKLWan(**TINY_VAE).eval()
    randomize_(text_encoder, seed + 1, 0.3)
    randomize_(transformer, seed + 2, 0.1)
    randomize_(vae, seed + 3, 0.1)
    if scheduler == "unipc":
        sched = UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True,
                                        num_train_timesteps=1000, flow_shift=flow_shift)
    else:
        sched = FlowMatchEulerDiscreteScheduler(shift=flow_shift)
    return WanPipeline(tokenizer=tokenizer, text_encoder=text_encoder, transformer=transformer, vae=vae, scheduler=sched)


def save_tiny_wan(out_dir: str | os.PathLike, **kwargs) -> Path:
    """Build and ``save_pretrained`` a tiny pipeline in diffusers layout (safetensors)."""
    pipe = build_tiny_wan_pipeline(**kwargs)
    pipe.save_pretrained(str(out_dir), safe_serialization=True)
    return Path(out_dir)
