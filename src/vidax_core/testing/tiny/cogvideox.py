"""Tiny random CogVideoX DiTs and pipelines built with diffusers (the PyTorch reference), for parity tests.

Every parameter, biases and norm gains included, is drawn from a seeded normal. The DiT variants mirror the five
published architectures at tiny widths: ``2b`` (sin-cos positions), ``5b`` (RoPE), ``5b-i2v`` (RoPE + learned
positions, doubled input channels), ``1.5`` (RoPE slice grid, temporal patch 2) and ``1.5-i2v`` (+ ofs embedding).
Sample sizes are small so that 32x32-pixel, 9-frame videos hit the learned table's size.
"""

from __future__ import annotations

import os
from pathlib import Path

from vidax_core.testing.tokenizers import _CORPUS, TINY_VOCAB_TARGET
from vidax_core.testing.reference import randomize_

LATENT_CHANNELS = 4
TEXT_LEN = 12  # tokens in the tiny runs (the learned table of the I2V variant is sized for it)
# heads x head_dim = 32 (divisible by 16 for the sin-cos table; head_dim 16 splits into RoPE axes 4 / 6 / 6).
TINY_DIT = dict(num_attention_heads=2, attention_head_dim=16, in_channels=LATENT_CHANNELS,
                out_channels=LATENT_CHANNELS, time_embed_dim=24, text_embed_dim=16, num_layers=2,
                sample_width=10, sample_height=6, sample_frames=9, patch_size=2, max_text_seq_length=TEXT_LEN)
VARIANTS = {
    "2b": dict(),
    "5b": dict(use_rotary_positional_embeddings=True),
    "5b-i2v": dict(use_rotary_positional_embeddings=True, use_learned_positional_embeddings=True,
                   in_channels=2 * LATENT_CHANNELS, sample_width=4, sample_height=4),
    "1.5": dict(use_rotary_positional_embeddings=True, patch_size_t=2, patch_bias=False, sample_width=12,
                sample_height=12),
    "1.5-i2v": dict(use_rotary_positional_embeddings=True, patch_size_t=2, patch_bias=False, ofs_embed_dim=24,
                    in_channels=2 * LATENT_CHANNELS, sample_width=12, sample_height=12),
}
TINY_T5 = dict(d_model=16, d_kv=8, d_ff=24, num_layers=2, num_heads=2, relative_attention_num_buckets=8,
               relative_attention_max_distance=16, feed_forward_proj="gated-gelu", is_gated_act=True)


def dit_kwargs(variant: str, **overrides) -> dict:
    """diffusers ``CogVideoXTransformer3DModel`` keyword arguments of a tiny variant."""
    return {**TINY_DIT, **VARIANTS[variant], **overrides}


def random_cogvideox_dit(variant: str = "2b", seed: int = 0, **overrides):
    """A random-weight fp32 ``CogVideoXTransformer3DModel`` of a tiny variant (5B-I2V's learned table included)."""
    from diffusers import CogVideoXTransformer3DModel

    model = CogVideoXTransformer3DModel(**dit_kwargs(variant, **overrides)).eval().float()
    randomize_(model, seed, 0.1)
    if model.patch_embed.use_learned_positional_embeddings:
        import torch

        gen = torch.Generator().manual_seed(seed + 11)
        pe = model.patch_embed.pos_embedding
        pe.copy_(torch.randn(pe.shape, generator=gen) * 0.3)
    return model


TINY_VAE = dict(block_out_channels=(8, 8, 16, 16), down_block_types=("CogVideoXDownBlock3D",) * 4,
                up_block_types=("CogVideoXUpBlock3D",) * 4, latent_channels=LATENT_CHANNELS, layers_per_block=1,
                norm_num_groups=4, norm_eps=1e-5, temporal_compression_ratio=4, sample_height=32, sample_width=48)
#: The hub repos' CogVideoXDDIMScheduler config (2B: snr_shift_scale 3.0; 5B and 1.5: 1.0).
SCHEDULER = dict(beta_end=0.012, beta_schedule="scaled_linear", beta_start=0.00085, clip_sample=False,
                 num_train_timesteps=1000, prediction_type="v_prediction", rescale_betas_zero_snr=True,
                 set_alpha_to_one=True, steps_offset=0, timestep_spacing="trailing")
SNR_SHIFT = {"2b": 3.0, "5b": 1.0, "5b-i2v": 1.0, "1.5": 1.0, "1.5-i2v": 1.0}


def random_cogvideox_vae(seed: int = 0, *, sharp_posterior: bool = True, **overrides):
    """A random-weight fp32 ``AutoencoderKLCogVideoX`` (activations O(1)). ``sharp_posterior`` makes the
    encoder's log-variance -30 (std 3e-7), so that a posterior sample is its mean to fp32 precision and the
    reference's generator draw for the I2V image latent does not matter."""
    import torch
    from diffusers import AutoencoderKLCogVideoX

    vae = AutoencoderKLCogVideoX(**{**TINY_VAE, **overrides}).eval().float()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(vae.named_parameters()):
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
            if p.ndim == 1 and name.endswith("weight"):
                p.copy_(1 + 0.1 * noise)
            elif name.endswith("bias"):
                p.copy_(0.1 * noise)
            else:
                p.copy_(noise / p[0].numel() ** 0.5)
        if sharp_posterior:
            c = vae.config.latent_channels
            conv = vae.encoder.conv_out.conv
            conv.weight[c:] = 0.0
            conv.bias[c:] = -40.0
    return vae


def write_spiece_tokenizer(out_dir: str | os.PathLike) -> Path:
    """A tiny T5 tokenizer folder in the CogVideoX hub layout: a trained SentencePiece ``spiece.model`` (no
    ``tokenizer.json``), ``tokenizer_config.json`` naming T5Tokenizer (no sentinel ids) and the special tokens."""
    import io
    import json

    import sentencepiece as spm

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(_CORPUS * 4), model_writer=model, model_type="unigram", vocab_size=TINY_VOCAB_TARGET,
        hard_vocab_limit=False, pad_id=0, eos_id=1, unk_id=2, bos_id=-1, character_coverage=1.0, num_threads=1,
        shuffle_input_sentence=False, minloglevel=2)
    (out / "spiece.model").write_bytes(model.getvalue())
    specials = {"eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>"}
    (out / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "T5Tokenizer", "extra_ids": 0, "model_max_length": 226, **specials}, indent=2))
    (out / "special_tokens_map.json").write_text(json.dumps(specials, indent=2))
    return out


def save_pipeline(pipe, out_dir: str | os.PathLike) -> Path:
    """``save_pretrained`` (safetensors), then the tokenizer folder as the hub repos ship it (``spiece.model``
    only, see :func:`write_spiece_tokenizer`): the tokenizer the pipeline holds was loaded from such a folder."""
    import shutil

    out = Path(out_dir)
    pipe.save_pretrained(str(out), safe_serialization=True)
    shutil.rmtree(out / "tokenizer")
    write_spiece_tokenizer(out / "tokenizer")
    return out


def build_tiny_cogvideox_pipeline(variant: str = "2b", seed: int = 0, dit: dict | None = None,
                                  scaling_factor: float = 0.7):
    """A random-weight CogVideoXPipeline (T2V variants) or CogVideoXImageToVideoPipeline (``*-i2v``) in fp32 with
    the hub's DDIM scheduler config and a trained tiny T5 tokenizer; 1.5 variants invert the latent scale."""
    from vidax_core.testing.scratch import scratch_dir

    import torch
    from diffusers import CogVideoXDDIMScheduler, CogVideoXImageToVideoPipeline, CogVideoXPipeline
    from transformers import AutoTokenizer, T5Config, T5EncoderModel

    tok_dir = write_spiece_tokenizer(scratch_dir("vidax-tok-"))
    tokenizer = AutoTokenizer.from_pretrained(str(tok_dir))
    torch.manual_seed(seed)
    text_encoder = T5EncoderModel(T5Config(vocab_size=len(tokenizer), **TINY_T5)).eval()
    randomize_(text_encoder, seed + 1, 0.3)
    transformer = random_cogvideox_dit(variant, seed + 2, **(dit or {}))
    vae = random_cogvideox_vae(seed + 3, scaling_factor=scaling_factor,
                               invert_scale_latents=variant.startswith("1.5"))
    sched = CogVideoXDDIMScheduler(**SCHEDULER, snr_shift_scale=SNR_SHIFT[variant])
    cls = CogVideoXImageToVideoPipeline if variant.endswith("i2v") else CogVideoXPipeline
    return cls(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, transformer=transformer, scheduler=sched)


def save_tiny_cogvideox(out_dir: str | os.PathLike, **kwargs) -> Path:
    """Build and save a tiny pipeline in the hub repos' diffusers layout (:func:`save_pipeline`)."""
    return save_pipeline(build_tiny_cogvideox_pipeline(**kwargs), out_dir)
