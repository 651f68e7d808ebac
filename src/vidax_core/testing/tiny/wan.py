"""Tiny random Wan2.1 text-to-video pipelines built with diffusers (the PyTorch reference), for parity tests.

Every parameter, biases and norm gains included, is drawn from a seeded normal so no term of the computation is
trivially zero, and the whole pipeline is saved with ``save_pretrained`` so vidax loads exactly the files a real
diffusers checkpoint has.
"""

from __future__ import annotations

import os
from pathlib import Path

from vidax_core.testing.reference import randomize_  # noqa: F401 - the family fixtures' shared randomiser
from vidax_core.testing.tokenizers import make_tiny_t5_tokenizer, tokenizer_vocab_size

TINY_DIT = dict(
    patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=4, out_channels=4,
    text_dim=32, freq_dim=16, ffn_dim=32, num_layers=2, cross_attn_norm=True, qk_norm="rms_norm_across_heads",
    eps=1e-6, rope_max_seq_len=32,
)
# The DiT parity tests' tiny config, as a diffusers config.json would hold it (text width 16).
TINY_DIT_CONFIG = dict(TINY_DIT, patch_size=[1, 2, 2], text_dim=16, image_dim=None, added_kv_proj_dim=None,
                       pos_embed_seq_len=None)
TINY_VAE = dict(
    base_dim=8, z_dim=4, dim_mult=[1, 2, 2, 2], num_res_blocks=1, attn_scales=[],
    temperal_downsample=[False, True, True],
    latents_mean=[0.1, -0.2, 0.05, 0.3], latents_std=[1.5, 0.8, 1.2, 2.0],
)
TINY_UMT5 = dict(d_model=32, d_kv=8, d_ff=48, num_layers=2, num_heads=4, relative_attention_num_buckets=8,
                 relative_attention_max_distance=16, feed_forward_proj="gated-gelu")


def build_tiny_wan_pipeline(seed: int = 0, flow_shift: float = 3.0, scheduler: str = "unipc", dit: dict | None = None):
    """A random-weight WanPipeline in fp32 with a trained tiny tokenizer (needs a temp dir for the tokenizer).

    ``dit`` overrides fields of :data:`TINY_DIT` (e.g. ``{"num_attention_heads": 4, "num_layers": 4}`` for
    tensor/sequence-parallel tests that need more heads and blocks)."""
    from vidax_core.testing.scratch import scratch_dir

    import torch
    from diffusers import (AutoencoderKLWan, FlowMatchEulerDiscreteScheduler, UniPCMultistepScheduler, WanPipeline,
                           WanTransformer3DModel)
    from transformers import AutoTokenizer, UMT5Config, UMT5EncoderModel

    tok_dir = make_tiny_t5_tokenizer(scratch_dir("vidax-tok-"))
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
    return WanPipeline(tokenizer=tokenizer, text_encoder=text_encoder, transformer=transformer,
                       vae=vae, scheduler=sched)


def save_tiny_wan(out_dir: str | os.PathLike, **kwargs) -> Path:
    """Build and ``save_pretrained`` a tiny pipeline in diffusers layout (safetensors)."""
    pipe = build_tiny_wan_pipeline(**kwargs)
    pipe.save_pretrained(str(out_dir), safe_serialization=True)
    return Path(out_dir)


TINY_CLIP = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4, image_size=28,
                 patch_size=7, hidden_act="gelu", layer_norm_eps=1e-5)
TINY_VAE22 = dict(
    base_dim=8, decoder_base_dim=12, z_dim=4, dim_mult=[1, 2, 2, 2], num_res_blocks=1, attn_scales=[],
    temperal_downsample=[False, True, True], is_residual=True, patch_size=2, in_channels=12, out_channels=12,
    scale_factor_spatial=16, latents_mean=[0.1, -0.2, 0.3, 0.0], latents_std=[1.5, 0.7, 2.0, 1.1],
)
# variant -> (pipeline class, two experts, CLIP image encoder, Wan2.2 VAE, expand_timesteps, DiT in_channels)
VARIANTS = {
    "wan2.1-i2v": ("i2v", False, True, False, False, 12),
    "wan2.2-t2v-a14b": ("t2v", True, False, False, False, 4),
    "wan2.2-i2v-a14b": ("i2v", True, False, False, False, 12),
    "wan2.2-ti2v-t2v": ("t2v", False, False, True, True, 4),
    "wan2.2-ti2v-i2v": ("i2v", False, False, True, True, 4),
}


def build_tiny_wan_variant(variant: str, seed: int = 0, flow_shift: float = 3.0):
    """A random-weight tiny version of a Wan image-to-video / Wan2.2 pipeline (see :data:`VARIANTS`)."""
    from vidax_core.testing.scratch import scratch_dir

    import torch
    from diffusers import (AutoencoderKLWan, UniPCMultistepScheduler, WanImageToVideoPipeline, WanPipeline,
                           WanTransformer3DModel)
    from transformers import (AutoTokenizer, CLIPImageProcessor, CLIPVisionConfig, CLIPVisionModel, UMT5Config,
                              UMT5EncoderModel)

    kind, two_experts, clip, vae22, expand, in_ch = VARIANTS[variant]
    tok_dir = make_tiny_t5_tokenizer(scratch_dir("vidax-tok-"))
    tokenizer = AutoTokenizer.from_pretrained(str(tok_dir))
    torch.manual_seed(seed)
    text_encoder = UMT5EncoderModel(UMT5Config(vocab_size=tokenizer_vocab_size(tok_dir), **TINY_UMT5)).eval()
    dit = {**TINY_DIT, "in_channels": in_ch}
    if clip:
        dit.update(image_dim=TINY_CLIP["hidden_size"],
                   added_kv_proj_dim=TINY_DIT["num_attention_heads"] * TINY_DIT["attention_head_dim"])
    transformers_ = [WanTransformer3DModel(**dit).eval() for _ in range(2 if two_experts else 1)]
    vae = AutoencoderKLWan(**(TINY_VAE22 if vae22 else TINY_VAE)).eval()
    randomize_(text_encoder, seed + 1, 0.3)
    for k, tr in enumerate(transformers_):
        randomize_(tr, seed + 2 + 10 * k, 0.1)
    randomize_(vae, seed + 3, 0.1)
    sched = UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True, num_train_timesteps=1000,
                                    flow_shift=flow_shift)
    parts = dict(tokenizer=tokenizer, text_encoder=text_encoder, transformer=transformers_[0], vae=vae, scheduler=sched)
    if two_experts:
        parts.update(transformer_2=transformers_[1], boundary_ratio=0.875 if kind == "t2v" else 0.9)
    if expand:
        parts.update(expand_timesteps=True)
    if kind == "t2v":
        return WanPipeline(**parts)
    if clip:
        encoder = CLIPVisionModel(CLIPVisionConfig(**TINY_CLIP)).eval()
        randomize_(encoder, seed + 4, 0.1)
        size = TINY_CLIP["image_size"]
        parts.update(image_encoder=encoder,
                     image_processor=CLIPImageProcessor(size={"shortest_edge": size},
                                                        crop_size={"height": size, "width": size}))
    return WanImageToVideoPipeline(**parts)
