"""Tiny random Helios pipelines built with diffusers (the PyTorch reference) for the parity tests: the Wan tiny
VAE, UMT5 and tokenizer of :mod:`vidax_core.testing.tiny.wan`, a 2-block HeliosTransformer3DModel (the history patch
embeddings included), HeliosScheduler (one stage, UniPC, dynamic shifting). torch loads only when called.

:func:`pyramid_builtin` makes the pyramid ids' built-in ``tiny-random`` from the packaged one without torch: the
same weights as a HeliosPyramidPipeline with the id's scheduler config and model_index flags."""

from __future__ import annotations

from vidax_core.testing.tiny.wan import TINY_UMT5, TINY_VAE

TINY_DIT = dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=4, out_channels=4,
                text_dim=32, freq_dim=16, ffn_dim=32, num_layers=2, rope_dim=(4, 4, 4), cross_attn_norm=True,
                qk_norm="rms_norm_across_heads", eps=1e-6, guidance_cross_attn=True, zero_history_timestep=True,
                has_multi_term_memory_patch=True, is_amplify_history=False)
SCHEDULER = dict(stages=1, scheduler_type="unipc", use_dynamic_shifting=True, shift=1.0)


def build_tiny_helios(seed: int = 0, dit: dict | None = None, scheduler: dict | None = None):
    """A random-weight fp32 ``HeliosPipeline``."""
    from vidax_core.testing.scratch import scratch_dir

    import torch
    from diffusers import AutoencoderKLWan, HeliosPipeline, HeliosScheduler, HeliosTransformer3DModel
    from transformers import AutoTokenizer, UMT5Config, UMT5EncoderModel

    from vidax_core.testing.reference import randomize_
    from vidax_core.testing.tokenizers import make_tiny_t5_tokenizer, tokenizer_vocab_size

    tok_dir = make_tiny_t5_tokenizer(scratch_dir("vidax-tok-"))
    tokenizer = AutoTokenizer.from_pretrained(str(tok_dir))
    torch.manual_seed(seed)
    text_encoder = UMT5EncoderModel(UMT5Config(vocab_size=tokenizer_vocab_size(tok_dir), **TINY_UMT5)).eval()
    transformer = HeliosTransformer3DModel(**{**TINY_DIT, **(dit or {})}).eval()
    vae = AutoencoderKLWan(**TINY_VAE).eval()
    randomize_(text_encoder, seed + 1, 0.3)
    randomize_(transformer, seed + 2, 0.1)
    randomize_(vae, seed + 3, 0.1)
    sched = HeliosScheduler(**{**SCHEDULER, **(scheduler or {})})
    return HeliosPipeline(tokenizer=tokenizer, text_encoder=text_encoder, transformer=transformer, vae=vae,
                          scheduler=sched)


def save_tiny_helios(out_dir, seed: int = 0, dit: dict | None = None, scheduler: dict | None = None) -> None:
    """``save_pretrained`` a tiny pipeline (safetensors) into ``out_dir``."""
    build_tiny_helios(seed, dit, scheduler).save_pretrained(str(out_dir), safe_serialization=True)


def as_pyramid(folder: str, model_id: str) -> None:
    """Make the tiny HeliosPipeline checkpoint in ``folder`` ``model_id``'s HeliosPyramidPipeline: its scheduler
    config (``presets.SCHEDULERS``, with ``gamma`` 1/4: at the published 1/3 the block noise's covariance is
    singular, which diffusers' float32 Cholesky refuses on the CPU, where the parity tests run) and its
    ``model_index.json`` flags (``presets.PIPELINES``)."""
    import json
    import os

    from vidax_core.io.builtin import write_json

    from .presets import PIPELINES, SCHEDULERS

    sched = {**SCHEDULERS[model_id], "gamma": 0.25}
    os.makedirs(os.path.join(folder, "scheduler"), exist_ok=True)
    write_json(os.path.join(folder, "scheduler", "scheduler_config.json"), sched)
    with open(os.path.join(folder, "model_index.json")) as f:
        index = json.load(f)
    index.update(PIPELINES[model_id], scheduler=["diffusers", sched["_class_name"]])
    write_json(os.path.join(folder, "model_index.json"), index)


def pyramid_builtin(packaged: str, model_id: str) -> str:
    """The packaged ``tiny-random`` folder as ``model_id``'s HeliosPyramidPipeline (:func:`as_pyramid`), written
    into the cache once (:func:`vidax_core.io.builtin.generated_checkpoint`)."""
    import os
    import shutil
    from importlib.metadata import version

    from vidax_core.io.builtin import generated_checkpoint

    def write(folder: str) -> None:
        os.makedirs(folder)
        for name in ("model_index.json",):
            shutil.copy(os.path.join(packaged, name), os.path.join(folder, name))
        for comp in ("text_encoder", "tokenizer", "transformer", "vae"):
            shutil.copytree(os.path.join(packaged, comp), os.path.join(folder, comp))
        as_pyramid(folder, model_id)

    return generated_checkpoint("vidax-helios", version("vidax-helios"), f"tiny-random-{model_id}", write)
