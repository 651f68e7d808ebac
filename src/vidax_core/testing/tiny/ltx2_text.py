"""Tiny random LTX-2.x prompt encoders built with transformers / diffusers (the PyTorch reference), for parity tests.

A tokenizer with Gemma's conventions and, per generation, the encoder it ships with plus ``LTX2TextConnectors``:
LTX-2.0 a tiny Gemma-3 (``Gemma3ForConditionalGeneration``, mixed sliding / full layers, a one-layer SigLIP tower
the prompt path ignores) with masked mean/range features, one shared projection, ``split`` RoPE; LTX-2.5 a tiny
Gemma-4 unified (``Gemma4UnifiedForConditionalGeneration``: full layers with their own head size, one KV head and
values from the key projection, proportional RoPE, random layer scalars) with per-token RMS features, per-stream
projections with biases, gated attention, streams of different widths, ``interleaved`` RoPE. Every parameter,
biases and norm gains included, is drawn from a seeded normal; the registers keep their uniform init. Sequence
length 16 with 8 registers: the register tiling repeats.
"""

from __future__ import annotations

import os
from pathlib import Path

from vidax_core.testing.reference import randomize_
from vidax_core.testing.tokenizers import make_tiny_gemma_tokenizer, tokenizer_vocab_size

MAX_LENGTH = 16
TINY_GEMMA3 = dict(
    hidden_size=16, intermediate_size=24, num_hidden_layers=3, num_attention_heads=2, num_key_value_heads=1,
    head_dim=8, query_pre_attn_scalar=8, sliding_window=4, max_position_embeddings=64,
    layer_types=["sliding_attention", "sliding_attention", "full_attention"],
    rope_parameters={"full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1000000.0},
                     "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
)
TINY_GEMMA4 = dict(
    hidden_size=16, intermediate_size=24, num_hidden_layers=3, num_attention_heads=2, num_key_value_heads=1,
    head_dim=8, global_head_dim=16, num_global_key_value_heads=1, attention_k_eq_v=True, sliding_window=4,
    max_position_embeddings=64, layer_types=["sliding_attention", "sliding_attention", "full_attention"],
    rope_parameters={"full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                        "rope_theta": 1000000.0},
                     "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
)
TINY_SIGLIP = dict(hidden_size=8, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2, image_size=28,
                   patch_size=14)
CONNECTORS = {
    "ltx2.0": dict(
        caption_channels=16, text_proj_in_factor=4, video_connector_num_attention_heads=2,
        video_connector_attention_head_dim=8, video_connector_num_layers=2,
        video_connector_num_learnable_registers=8, audio_connector_num_attention_heads=2,
        audio_connector_attention_head_dim=8, audio_connector_num_layers=1, audio_connector_num_learnable_registers=8,
        rope_type="split", per_modality_projections=False),
    "ltx2.5": dict(
        caption_channels=16, text_proj_in_factor=4, video_connector_num_attention_heads=2,
        video_connector_attention_head_dim=16, video_connector_num_layers=2,
        video_connector_num_learnable_registers=8, video_gated_attn=True, audio_connector_num_attention_heads=2,
        audio_connector_attention_head_dim=8, audio_connector_num_layers=2, audio_connector_num_learnable_registers=8,
        audio_gated_attn=True, rope_type="interleaved", per_modality_projections=True, video_hidden_dim=32,
        audio_hidden_dim=16, proj_bias=True),
}


def random_gemma3(vocab_size: int, seed: int = 0):
    """A tiny ``Gemma3ForConditionalGeneration`` (fp32, eval) with every parameter random."""
    import torch
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration, Gemma3TextConfig, SiglipVisionConfig

    text = Gemma3TextConfig(vocab_size=vocab_size, pad_token_id=0, eos_token_id=1, bos_token_id=vocab_size - 1,
                            **TINY_GEMMA3)
    cfg = Gemma3Config(text_config=text, vision_config=SiglipVisionConfig(**TINY_SIGLIP), mm_tokens_per_image=4)
    torch.manual_seed(seed)
    model = Gemma3ForConditionalGeneration(cfg).eval().float()
    randomize_(model, seed=seed, std=0.2)
    return model


def random_gemma4(vocab_size: int, seed: int = 0):
    """A tiny ``Gemma4UnifiedForConditionalGeneration`` (text only, fp32, eval); parameters and layer scalars
    random."""
    import torch
    from transformers.models.gemma4_unified import configuration_gemma4_unified as c
    from transformers.models.gemma4_unified.modeling_gemma4_unified import Gemma4UnifiedForConditionalGeneration

    text = c.Gemma4UnifiedTextConfig(vocab_size=vocab_size, pad_token_id=0, eos_token_id=1,
                                     bos_token_id=vocab_size - 1, **TINY_GEMMA4)
    torch.manual_seed(seed)
    model = Gemma4UnifiedForConditionalGeneration(
        c.Gemma4UnifiedConfig(text_config=text, vision_config=None, audio_config=None)).eval().float()
    randomize_(model, seed=seed, std=0.2)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, b in model.named_buffers():
            if name.endswith("layer_scalar"):
                b.copy_(0.5 + torch.rand(b.shape, generator=gen))
    return model


ENCODERS = {"ltx2.0": random_gemma3, "ltx2.5": random_gemma4}


def random_connectors(generation: str, seed: int = 0):
    """A tiny diffusers ``LTX2TextConnectors`` of ``generation`` ("ltx2.0" or "ltx2.5") with random parameters
    (the learned registers keep their own seeded uniform init)."""
    import torch
    from diffusers.pipelines.ltx2.connectors import LTX2TextConnectors

    torch.manual_seed(seed)
    model = LTX2TextConnectors(**CONNECTORS[generation]).eval()
    registers = {n: p.detach().clone() for n, p in model.named_parameters() if n.endswith("learnable_registers")}
    randomize_(model, seed=seed + 1)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n in registers:
                p.copy_(registers[n])
    return model


def build_tiny_ltx2_text(out_dir: str | os.PathLike, generation: str, seed: int = 0):
    """``(LTX2Pipeline holding only the tokenizer, text encoder and connectors, checkpoint folder)``: the folder
    holds ``tokenizer/``, ``text_encoder/`` and ``connectors/`` as ``save_pretrained`` writes them."""
    from diffusers import LTX2Pipeline
    from transformers import AutoTokenizer

    out = Path(out_dir)
    tok_dir = make_tiny_gemma_tokenizer(out / "tokenizer")
    tokenizer = AutoTokenizer.from_pretrained(str(tok_dir))
    gemma = ENCODERS[generation](tokenizer_vocab_size(tok_dir), seed)
    connectors = random_connectors(generation, seed)
    gemma.save_pretrained(str(out / "text_encoder"), safe_serialization=True)
    connectors.save_pretrained(str(out / "connectors"), safe_serialization=True)
    pipe = LTX2Pipeline(scheduler=None, vae=None, audio_vae=None, text_encoder=gemma, tokenizer=tokenizer,
                        connectors=connectors, transformer=None, vocoder=None)
    return pipe, out
