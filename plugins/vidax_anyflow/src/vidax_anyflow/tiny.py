"""Tiny random AnyFlow pipelines built with diffusers (the PyTorch reference) for the parity tests and the built-in
checkpoints: the Wan tiny VAE, UMT5 and tokenizer of :mod:`vidax_core.testing.tiny.wan`, a 2-block
AnyFlowFARTransformer3DModel (four chunks 1 + 2 + 2 + 2 at ``full_chunk_limit`` 2, so the compressed cache is
used) or AnyFlowTransformer3DModel, the flow-map Euler scheduler at shift 3. torch loads only when called."""

from __future__ import annotations

from vidax_core.testing.tiny.wan import TINY_DIT, TINY_UMT5, TINY_VAE

SHIFT = 3.0
FAR_DIT = dict(chunk_partition=(1, 2, 2, 2), full_chunk_limit=2, compressed_patch_size=(1, 4, 4))
BUILTIN = {"tiny-random": "far", "tiny-random-bidirectional": "bidirectional"}  # built-in name -> pipeline kind


def tiny_dit(kind: str, dit: dict | None = None) -> dict:
    """The tiny transformer's constructor arguments (Wan's tiny DiT without its ``qk_norm``, which AnyFlow fixes)."""
    arch = {k: v for k, v in TINY_DIT.items() if k != "qk_norm"}
    return {**arch, **(FAR_DIT if kind == "far" else {}), **(dit or {})}


def build_tiny_anyflow(kind: str = "far", seed: int = 0, dit: dict | None = None, shift: float = SHIFT):
    """A random-weight fp32 ``AnyFlowFARPipeline`` (``kind="far"``) or ``AnyFlowPipeline`` (``"bidirectional"``)."""
    from vidax_core.testing.scratch import scratch_dir

    import torch
    from diffusers import (AnyFlowFARPipeline, AnyFlowFARTransformer3DModel, AnyFlowPipeline,
                           AnyFlowTransformer3DModel, AutoencoderKLWan, FlowMapEulerDiscreteScheduler)
    from transformers import AutoTokenizer, UMT5Config, UMT5EncoderModel

    from vidax_core.testing.reference import randomize_
    from vidax_core.testing.tokenizers import make_tiny_t5_tokenizer, tokenizer_vocab_size

    tok_dir = make_tiny_t5_tokenizer(scratch_dir("vidax-tok-"))
    tokenizer = AutoTokenizer.from_pretrained(str(tok_dir))
    torch.manual_seed(seed)
    text_encoder = UMT5EncoderModel(UMT5Config(vocab_size=tokenizer_vocab_size(tok_dir), **TINY_UMT5)).eval()
    cls = AnyFlowFARTransformer3DModel if kind == "far" else AnyFlowTransformer3DModel
    transformer = cls(**tiny_dit(kind, dit)).eval()
    vae = AutoencoderKLWan(**TINY_VAE).eval()
    randomize_(text_encoder, seed + 1, 0.3)
    randomize_(transformer, seed + 2, 0.1)
    randomize_(vae, seed + 3, 0.1)
    parts = dict(tokenizer=tokenizer, text_encoder=text_encoder, transformer=transformer, vae=vae,
                 scheduler=FlowMapEulerDiscreteScheduler(shift=shift))
    return (AnyFlowFARPipeline if kind == "far" else AnyFlowPipeline)(**parts)


def no_ftfy() -> None:
    """diffusers' AnyFlow pipelines call ftfy even when it is not installed (see
    :func:`vidax_core.bench.torch_reference.identity_ftfy`)."""
    from diffusers.pipelines.anyflow import pipeline_anyflow, pipeline_anyflow_far

    from vidax_core.bench.torch_reference import identity_ftfy

    identity_ftfy(pipeline_anyflow, pipeline_anyflow_far)


def save_tiny_anyflow(out_dir, kind: str = "far", seed: int = 0, dit: dict | None = None) -> None:
    """``save_pretrained`` a tiny pipeline (safetensors) into ``out_dir``."""
    build_tiny_anyflow(kind, seed=seed, dit=dit).save_pretrained(str(out_dir), safe_serialization=True)
