"""Tiny random HunyuanVideo 1.0 pipelines built with diffusers (the PyTorch reference), for parity tests.

Every parameter, biases and norm gains included, is drawn from a seeded normal. The text side is a tiny Llama
(4 layers, so ``hidden_states[-3]`` is a real layer's output) with the trained tiny tokenizer extended by Llama-3's
header tokens and a BOS post-processor, and a tiny CLIP text model with its own BOS/EOS tokenizer; the VAE is a
tiny ``AutoencoderKLHunyuanVideo``; the scheduler is flow Euler with shift 7 (the published scheduler config).
"""

from __future__ import annotations

import json
import os
from vidax_core.testing.scratch import scratch_dir
from pathlib import Path

from vidax_core.testing.tokenizers import make_tiny_t5_tokenizer
from vidax_core.testing.reference import randomize_

TINY_VAE = dict(latent_channels=4, block_out_channels=[8, 8, 16, 16], layers_per_block=1, norm_num_groups=4)
TINY_LLAMA = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=4, num_attention_heads=2,
                  num_key_value_heads=1, max_position_embeddings=1024, rope_theta=500000.0, rms_norm_eps=1e-5)
TINY_CLIP = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
                 max_position_embeddings=77, projection_dim=16)
TINY_DIT = dict(in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=16, num_layers=2,
                num_single_layers=2, num_refiner_layers=2, mlp_ratio=2.0, patch_size=2, patch_size_t=1,
                qk_norm="rms_norm", guidance_embeds=True, text_embed_dim=16, pooled_projection_dim=16,
                rope_theta=256.0, rope_axes_dim=(4, 6, 6))
LLAMA_SPECIALS = ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<image>"]
I2V_IMAGE = 56  # CLIP vision input size: 56 px / patch 14 = 16 image features per image
CLIP_SPECIALS = ["<|startoftext|>", "<|endoftext|>"]


def _tokenizer(out: Path, specials: list[str], first: str, last: str | None, config: dict) -> Path:
    from tokenizers import AddedToken, Tokenizer, processors

    base = make_tiny_t5_tokenizer(out / "_base")
    tok = Tokenizer.from_file(str(base / "tokenizer.json"))
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    single = f"{first} $A" + (f" {last}" if last else "")
    ids = [(s, tok.token_to_id(s)) for s in ([first] + ([last] if last else []))]
    tok.post_processor = processors.TemplateProcessing(single=single, special_tokens=ids)
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.json").write_text(tok.to_str(), encoding="utf-8")
    (out / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 4096, **config}), encoding="utf-8")
    return out


def make_tiny_llama_tokenizer(out_dir: str | os.PathLike, padding_side: str = "right") -> Path:
    return _tokenizer(Path(out_dir), LLAMA_SPECIALS, "<|begin_of_text|>", None,
                      {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "pad_token": "<pad>",
                       "padding_side": padding_side})


def make_tiny_clip_tokenizer(out_dir: str | os.PathLike) -> Path:
    return _tokenizer(Path(out_dir), CLIP_SPECIALS, "<|startoftext|>", "<|endoftext|>",
                      {"bos_token": "<|startoftext|>", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
                       "padding_side": "right"})


def random_clip_text(tokenizer, seed: int):
    """A random-weight fp32 tiny ``CLIPTextModel`` (:data:`TINY_CLIP`) for ``tokenizer`` (the tiny CLIP tokenizer:
    its ``<|endoftext|>`` is EOS and pad, the token before it BOS); HunyuanVideo's and Kandinsky 5's pipelines."""
    from transformers import CLIPTextConfig, CLIPTextModel

    eos = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    clip = CLIPTextModel(CLIPTextConfig(vocab_size=len(tokenizer), eos_token_id=eos, bos_token_id=eos - 1,
                                        pad_token_id=eos, **TINY_CLIP)).eval().float()
    randomize_(clip, seed, 0.3)
    return clip


def build_tiny_hunyuan_pipeline(seed: int = 0, dit: dict | None = None, padding_side: str = "right"):
    """A random-weight fp32 ``HunyuanVideoPipeline`` (text-to-video)."""
    import torch
    from diffusers import (AutoencoderKLHunyuanVideo, FlowMatchEulerDiscreteScheduler, HunyuanVideoPipeline,
                           HunyuanVideoTransformer3DModel)
    from transformers import AutoTokenizer, LlamaConfig, LlamaModel

    tmp = Path(scratch_dir("vidax-hunyuan-tok-"))
    tokenizer = AutoTokenizer.from_pretrained(str(make_tiny_llama_tokenizer(tmp / "llama", padding_side)))
    tokenizer_2 = AutoTokenizer.from_pretrained(str(make_tiny_clip_tokenizer(tmp / "clip")))
    torch.manual_seed(seed)
    llama = LlamaModel(LlamaConfig(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                   **TINY_LLAMA)).eval().float()
    randomize_(llama, seed + 1, 0.3)
    clip = random_clip_text(tokenizer_2, seed + 2)
    transformer = HunyuanVideoTransformer3DModel(**{**TINY_DIT, **(dit or {})}).eval().float()
    randomize_(transformer, seed + 3, 0.15)
    vae = AutoencoderKLHunyuanVideo(**TINY_VAE).eval().float()
    randomize_(vae, seed + 4, 0.1)
    return HunyuanVideoPipeline(text_encoder=llama, tokenizer=tokenizer, transformer=transformer, vae=vae,
                                scheduler=FlowMatchEulerDiscreteScheduler(shift=7.0), text_encoder_2=clip,
                                tokenizer_2=tokenizer_2)


def save_tiny_hunyuan(out_dir: str | os.PathLike, **kwargs) -> Path:
    """Build and ``save_pretrained`` a tiny pipeline in diffusers layout (safetensors)."""
    pipe = build_tiny_hunyuan_pipeline(**kwargs)
    pipe.save_pretrained(str(out_dir), safe_serialization=True)
    return Path(out_dir)


def build_tiny_hunyuan_i2v_pipeline(seed: int = 0, dit: dict | None = None):
    """A random-weight fp32 ``HunyuanVideoImageToVideoPipeline`` (``token_replace``): a tiny LLaVA (CLIP vision
    56 px / patch 14 -> 16 image features, Llama text) as ``text_encoder``, its ``CLIPImageProcessor``."""
    import torch
    from diffusers import (AutoencoderKLHunyuanVideo, FlowMatchEulerDiscreteScheduler,
                           HunyuanVideoImageToVideoPipeline, HunyuanVideoTransformer3DModel)
    from transformers import (AutoTokenizer, CLIPImageProcessor, CLIPVisionConfig, LlamaConfig, LlavaConfig,
                              LlavaForConditionalGeneration)

    tmp = Path(scratch_dir("vidax-hunyuan-tok-"))
    tokenizer = AutoTokenizer.from_pretrained(str(make_tiny_llama_tokenizer(tmp / "llama")))
    tokenizer_2 = AutoTokenizer.from_pretrained(str(make_tiny_clip_tokenizer(tmp / "clip")))
    torch.manual_seed(seed)
    text = LlamaConfig(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, **TINY_LLAMA)
    vision = CLIPVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=3, num_attention_heads=2,
                              image_size=I2V_IMAGE, patch_size=14, hidden_act="quick_gelu")
    llava = LlavaForConditionalGeneration(LlavaConfig(
        text_config=text, vision_config=vision, image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_layer=-2, vision_feature_select_strategy="default", projector_hidden_act="gelu",
        pad_token_id=tokenizer.pad_token_id)).eval().float()
    randomize_(llava, seed + 1, 0.3)
    clip = random_clip_text(tokenizer_2, seed + 2)
    transformer = HunyuanVideoTransformer3DModel(**{**TINY_DIT, "image_condition_type": "token_replace",
                                                    **(dit or {})}).eval().float()
    randomize_(transformer, seed + 3, 0.15)
    vae = AutoencoderKLHunyuanVideo(**TINY_VAE).eval().float()
    randomize_(vae, seed + 4, 0.1)
    processor = CLIPImageProcessor(size={"shortest_edge": I2V_IMAGE},
                                   crop_size={"height": I2V_IMAGE, "width": I2V_IMAGE})
    return HunyuanVideoImageToVideoPipeline(text_encoder=llava, tokenizer=tokenizer, transformer=transformer, vae=vae,
                                            scheduler=FlowMatchEulerDiscreteScheduler(shift=7.0),
                                            text_encoder_2=clip, tokenizer_2=tokenizer_2, image_processor=processor)


def save_tiny_hunyuan_i2v(out_dir: str | os.PathLike, **kwargs) -> Path:
    pipe = build_tiny_hunyuan_i2v_pipeline(**kwargs)
    pipe.save_pretrained(str(out_dir), safe_serialization=True)
    return Path(out_dir)
