"""Tiny random Cosmos-Predict2.5 pipelines built with diffusers (the PyTorch reference), for parity tests and the
built-in checkpoint. It lives with the family (it uses its bench stubs); torch and diffusers load only when called.

Every parameter, biases and norm gains included, is drawn from a seeded normal. The text encoder is a tiny
Qwen2.5-VL (text tower with mRoPE; a minimal vision tower the pipeline never runs) with the trained tiny tokenizer
extended by Qwen's chat special tokens and a Qwen-style chat template; the VAE is the tiny Wan2.1 VAE; the
scheduler is the UniPC configuration diffusers' conversion script writes for Cosmos-Predict2.5. The pipeline's
guardrail is replaced by a no-op object (the real one needs ``cosmos_guardrail``); torchvision is a test extra.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from vidax_core.testing.reference import randomize_
from vidax_core.testing.tokenizers import make_tiny_t5_tokenizer
from vidax_core.testing.tiny.wan import TINY_VAE

# heads x head_dim = 32; head_dim 16 -> RoPE (t, h, w) dims (8, 4, 4); rope_scale exercises NTK on every axis.
TINY_QWEN = dict(hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=2,
                 num_key_value_heads=1, max_position_embeddings=256,
                 rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [1, 1, 2]})
TINY_DIT = dict(in_channels=TINY_VAE["z_dim"] + 1, out_channels=TINY_VAE["z_dim"], num_attention_heads=2,
                attention_head_dim=16, num_layers=2, mlp_ratio=2.0, text_embed_dim=24, adaln_lora_dim=8,
                max_size=(128, 240, 240), patch_size=(1, 2, 2), rope_scale=(1.5, 3.0, 3.0), concat_padding_mask=True,
                extra_pos_embed_type=None, use_crossattn_projection=True,
                crossattn_proj_in_channels=TINY_QWEN["hidden_size"] * TINY_QWEN["num_hidden_layers"],
                encoder_hidden_states_channels=24)
SCHEDULER = dict(use_karras_sigmas=True, use_flow_sigmas=True, prediction_type="flow_prediction", sigma_max=200.0,
                 sigma_min=0.01)
MAX_TEXT = 40  # the tiny runs' max_sequence_length (the real pipeline pads to 512)

# A compact Qwen2-VL-style chat template (the real checkpoints carry Qwen's own): text parts of list contents.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for content in message['content'] %}{% if content['type'] == 'text' %}{{ content['text'] }}"
    "{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def make_tiny_qwen_tokenizer(out_dir: str | os.PathLike) -> Path:
    """The tiny unigram tokenizer plus Qwen's chat special tokens, ``<|endoftext|>`` as pad, no post-processor
    (as Qwen's, which adds no tokens), right padding, and :data:`CHAT_TEMPLATE`."""
    from tokenizers import AddedToken, Tokenizer

    out = Path(out_dir)
    base = make_tiny_t5_tokenizer(out / "_base")
    tok = Tokenizer.from_file(str(base / "tokenizer.json"))
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    data = json.loads(tok.to_str())
    data["post_processor"] = None
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "pad_token": "<|endoftext|>", "eos_token": "<|im_end|>",
              "unk_token": None, "padding_side": "right", "model_max_length": 4096, "chat_template": CHAT_TEMPLATE}
    (out / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return out


def random_cosmos_dit(seed: int = 0, **overrides):
    """A random-weight fp32 ``CosmosTransformer3DModel`` of :data:`TINY_DIT` (with ``overrides``)."""
    from .bench_reference import stub_torchvision

    stub_torchvision()
    from diffusers import CosmosTransformer3DModel

    model = CosmosTransformer3DModel(**{**TINY_DIT, **overrides}).eval().float()
    randomize_(model, seed, 0.15)
    return model


def random_qwen_text_encoder(vocab: int, seed: int = 0):
    """A random-weight tiny ``Qwen2_5_VLForConditionalGeneration`` (fp32)."""
    import torch
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    vision = dict(depth=1, hidden_size=16, intermediate_size=16, num_heads=2, out_hidden_size=TINY_QWEN["hidden_size"],
                  patch_size=2, spatial_merge_size=1, temporal_patch_size=1, window_size=4, fullatt_block_indexes=[0])
    cfg = Qwen2_5_VLConfig(text_config=dict(vocab_size=vocab, **TINY_QWEN), vision_config=vision, vocab_size=vocab)
    torch.manual_seed(seed)
    model = Qwen2_5_VLForConditionalGeneration(cfg).eval().float()
    randomize_(model, seed, 0.3)
    return model


def build_tiny_cosmos_pipeline(seed: int = 0, dit: dict | None = None):
    """A random-weight ``Cosmos2_5_PredictBasePipeline`` in fp32 with the no-op guardrail."""
    from vidax_core.testing.scratch import scratch_dir

    from diffusers import AutoencoderKLWan, UniPCMultistepScheduler
    from diffusers.pipelines.cosmos.pipeline_cosmos2_5_predict import Cosmos2_5_PredictBasePipeline
    from transformers import AutoTokenizer
    from .bench_reference import NoGuardrail

    tok_dir = make_tiny_qwen_tokenizer(scratch_dir("vidax-qwen-tok-"))
    tokenizer = AutoTokenizer.from_pretrained(str(tok_dir))
    text_encoder = random_qwen_text_encoder(len(tokenizer), seed + 1)
    transformer = random_cosmos_dit(seed + 2, **(dit or {}))
    vae = AutoencoderKLWan(**TINY_VAE).eval()
    randomize_(vae, seed + 3, 0.1)
    return Cosmos2_5_PredictBasePipeline(text_encoder=text_encoder, tokenizer=tokenizer, transformer=transformer,
                                         vae=vae, scheduler=UniPCMultistepScheduler(**SCHEDULER),
                                         safety_checker=NoGuardrail())


def save_tiny_cosmos(out_dir: str | os.PathLike, **kwargs) -> Path:
    """Build and ``save_pretrained`` a tiny pipeline in diffusers layout (safetensors), without the guardrail."""
    pipe = build_tiny_cosmos_pipeline(**kwargs)
    checker = pipe.safety_checker
    pipe.safety_checker = None
    pipe.register_to_config(safety_checker=(None, None))
    pipe.save_pretrained(str(out_dir), safe_serialization=True)
    pipe.safety_checker = checker
    return Path(out_dir)
