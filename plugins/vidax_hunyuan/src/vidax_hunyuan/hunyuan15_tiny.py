"""Tiny random HunyuanVideo-1.5 pipelines built with diffusers (the PyTorch reference), for the parity tests;
torch, diffusers and transformers load only when called.

Every parameter is drawn from a seeded normal (norm gains around 1). The text side is a tiny Qwen2.5-VL text tower
(4 layers, so ``hidden_states[-3]`` is a real layer's output; mRoPE sections) under the trained tiny tokenizer
extended by Qwen's chat tokens and a chat template of Qwen2.5-VL's form, and a tiny byT5 encoder under the real
``ByT5Tokenizer`` (it needs no files); the DiT is a 2-block ``HunyuanVideo15Transformer3DModel`` (its byT5
projection keeps the fixed 2048 width); the VAE a tiny ``AutoencoderKLHunyuanVideo15``; flow Euler with shift 5
(the 480p scheduler config) and ``ClassifierFreeGuidance(guidance_scale=6)`` (the published guider config).
"""

from __future__ import annotations

import contextlib
import json
import os
from vidax_core.testing.scratch import scratch_dir
from pathlib import Path

from vidax_core.testing.reference import randomize_
from vidax_core.testing.tokenizers import make_tiny_t5_tokenizer

TINY_QWEN = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=4, num_attention_heads=2,
                 num_key_value_heads=1, max_position_embeddings=2048, rms_norm_eps=1e-6,
                 rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [2, 1, 1]})
TINY_BYT5 = dict(d_model=12, d_kv=8, d_ff=24, num_layers=2, num_heads=2, feed_forward_proj="gated-gelu",
                 relative_attention_num_buckets=8, relative_attention_max_distance=20)
TINY_VAE15 = dict(latent_channels=4, block_out_channels=(8, 8, 16, 16, 16), layers_per_block=1,
                  spatial_compression_ratio=16, temporal_compression_ratio=4)
TINY_DIT15 = dict(in_channels=2 * TINY_VAE15["latent_channels"] + 1, out_channels=TINY_VAE15["latent_channels"],
                  num_attention_heads=2, attention_head_dim=16, num_layers=2, num_refiner_layers=1, mlp_ratio=2.0,
                  patch_size=1, patch_size_t=1, qk_norm="rms_norm", text_embed_dim=TINY_QWEN["hidden_size"],
                  text_embed_2_dim=TINY_BYT5["d_model"], image_embed_dim=8, rope_theta=256.0,
                  rope_axes_dim=(4, 6, 6), target_size=640, task_type="t2v", use_meanflow=False)
TINY_SIGLIP = dict(hidden_size=TINY_DIT15["image_embed_dim"], intermediate_size=16, num_hidden_layers=2,
                   num_attention_heads=2, image_size=28, patch_size=14)
I2V_TARGET = 48  # the tiny I2V DiT's target_size: buckets of 48^2 pixels (e.g. 32x64 for a landscape image)
GUIDER = dict(guidance_scale=6.0)
SHIFT = 5.0

# Qwen2.5-VL's chat template for string contents (the real one also renders images and tools).
CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>"]


@contextlib.contextmanager
def one_thread():
    """torch on one thread inside the block: the tiny reference runs are latency bound, and on a shared machine
    torch's thread pool makes them several times slower."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


def make_tiny_qwen15_tokenizer(out_dir: str | os.PathLike) -> Path:
    """The tiny unigram tokenizer with Qwen's chat tokens (``<|endoftext|>`` pads), no post-processor (Qwen adds
    no tokens), right padding and :data:`CHAT_TEMPLATE` in ``chat_template.jinja``."""
    from tokenizers import AddedToken, Tokenizer

    out = Path(out_dir)
    tok = Tokenizer.from_file(str(make_tiny_t5_tokenizer(out / "_base") / "tokenizer.json"))
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in QWEN_SPECIALS])
    data = dict(json.loads(tok.to_str()), post_processor=None)
    (out / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    (out / "chat_template.jinja").write_text(CHAT_TEMPLATE, encoding="utf-8")
    (out / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "pad_token": "<|endoftext|>", "eos_token": "<|im_end|>",
         "padding_side": "right", "model_max_length": 32768}), encoding="utf-8")
    return out


def _randomize_dit(model, seed: int) -> None:
    """0.15 on the tiny widths, 1/sqrt(fan_in) on the byT5 projection's 2048-wide layers, norm gains 1 + n."""
    import torch

    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            std = 0.15 if p.ndim < 2 or p.shape[1] <= 64 else p.shape[1] ** -0.5
            p.copy_(std * torch.randn(p.shape, generator=g))
            if "norm" in name and name.endswith("weight") and p.ndim == 1:
                p.add_(1.0)


def build_tiny_hunyuan15_pipeline(seed: int = 0, dit: dict | None = None, guider: dict | None = None):
    """A random-weight fp32 ``HunyuanVideo15Pipeline`` (text-to-video)."""
    import torch
    from diffusers import (AutoencoderKLHunyuanVideo15, ClassifierFreeGuidance, FlowMatchEulerDiscreteScheduler,
                           HunyuanVideo15Pipeline, HunyuanVideo15Transformer3DModel)
    from transformers import (AutoTokenizer, ByT5Tokenizer, Qwen2_5_VLTextConfig, Qwen2_5_VLTextModel, T5Config,
                              T5EncoderModel)

    tmp = Path(scratch_dir("vidax-hunyuan15-tok-"))
    tokenizer = AutoTokenizer.from_pretrained(str(make_tiny_qwen15_tokenizer(tmp / "qwen")))
    tokenizer_2 = ByT5Tokenizer()
    torch.manual_seed(seed)
    qwen = Qwen2_5_VLTextModel(Qwen2_5_VLTextConfig(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                                    **TINY_QWEN)).eval().float()
    randomize_(qwen, seed + 1, 0.3)
    byt5 = T5EncoderModel(T5Config(vocab_size=len(tokenizer_2), **TINY_BYT5)).eval().float()
    randomize_(byt5, seed + 2, 0.3)
    transformer = HunyuanVideo15Transformer3DModel(**{**TINY_DIT15, **(dit or {})}).eval().float()
    _randomize_dit(transformer, seed + 3)
    vae = AutoencoderKLHunyuanVideo15(**TINY_VAE15).eval().float()
    randomize_(vae, seed + 4, 0.1)
    return HunyuanVideo15Pipeline(text_encoder=qwen, tokenizer=tokenizer, transformer=transformer, vae=vae,
                                  scheduler=FlowMatchEulerDiscreteScheduler(shift=SHIFT), text_encoder_2=byt5,
                                  tokenizer_2=tokenizer_2,
                                  guider=ClassifierFreeGuidance(**{**GUIDER, **(guider or {})}))


def build_tiny_hunyuan15_i2v_pipeline(seed: int = 0, dit: dict | None = None, guider: dict | None = None):
    """A random-weight fp32 ``HunyuanVideo15ImageToVideoPipeline``: the text-to-video parts, a tiny SigLIP vision
    tower (28 px / patch 14: 4 image tokens) and its PIL-backend ``SiglipImageProcessor``."""
    from diffusers import HunyuanVideo15ImageToVideoPipeline
    from transformers import SiglipImageProcessorPil, SiglipVisionConfig, SiglipVisionModel

    t2v = build_tiny_hunyuan15_pipeline(seed, {"task_type": "i2v", "target_size": I2V_TARGET, **(dit or {})}, guider)
    siglip = SiglipVisionModel(SiglipVisionConfig(**TINY_SIGLIP)).eval().float()
    randomize_(siglip, seed + 5, 0.3)
    size = TINY_SIGLIP["image_size"]
    processor = SiglipImageProcessorPil(size={"height": size, "width": size})
    parts = {k: getattr(t2v, k) for k in ("text_encoder", "tokenizer", "transformer", "vae", "scheduler",
                                          "text_encoder_2", "tokenizer_2", "guider")}
    return HunyuanVideo15ImageToVideoPipeline(**parts, image_encoder=siglip, feature_extractor=processor)


def save_tiny_hunyuan15_i2v(out_dir: str | os.PathLike, **kwargs):
    pipe = build_tiny_hunyuan15_i2v_pipeline(**kwargs)
    pipe.save_pretrained(str(out_dir), safe_serialization=True)
    return Path(out_dir), pipe


def save_tiny_hunyuan15(out_dir: str | os.PathLike, **kwargs):
    """Build and ``save_pretrained`` a tiny pipeline (safetensors); returns (folder, pipeline)."""
    pipe = build_tiny_hunyuan15_pipeline(**kwargs)
    pipe.save_pretrained(str(out_dir), safe_serialization=True)
    return Path(out_dir), pipe
