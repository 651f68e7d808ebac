"""Tiny random SkyReels-V2 pipelines built with diffusers (the PyTorch reference) for the parity tests: the Wan
tiny VAE, UMT5 and tokenizer of :mod:`vidax_core.testing.tiny.wan`, a 2-block SkyReelsV2Transformer3DModel (with the
fps embedding for diffusion forcing; with the image embedder and 12 input channels for image-to-video, whose
pipeline also gets the tiny CLIP vision tower of the Wan tests), UniPC on flow sigmas at the recipe's shift 8.
torch loads only when called."""

from __future__ import annotations

from vidax_core.testing.tiny.wan import TINY_CLIP, TINY_DIT, TINY_UMT5, TINY_VAE

SHIFT = 8.0
BUILTIN = {"tiny-random": "df", "tiny-random-t2v": "t2v", "tiny-random-i2v": "i2v"}  # built-in -> pipeline kind


def build_tiny_skyreels(kind: str = "df", seed: int = 0, dit: dict | None = None):
    """A random-weight fp32 ``SkyReelsV2DiffusionForcingPipeline`` (``kind="df"``), ``SkyReelsV2Pipeline``
    (``"t2v"``) or ``SkyReelsV2ImageToVideoPipeline`` (``"i2v"``)."""
    from vidax_core.testing.scratch import scratch_dir

    import torch
    from diffusers import (AutoencoderKLWan, SkyReelsV2DiffusionForcingPipeline, SkyReelsV2ImageToVideoPipeline,
                           SkyReelsV2Pipeline, SkyReelsV2Transformer3DModel, UniPCMultistepScheduler)
    from transformers import (AutoTokenizer, CLIPImageProcessor, CLIPVisionConfig, CLIPVisionModelWithProjection,
                              UMT5Config, UMT5EncoderModel)

    from vidax_core.testing.reference import randomize_
    from vidax_core.testing.tokenizers import make_tiny_t5_tokenizer, tokenizer_vocab_size

    tok_dir = make_tiny_t5_tokenizer(scratch_dir("vidax-tok-"))
    tokenizer = AutoTokenizer.from_pretrained(str(tok_dir))
    torch.manual_seed(seed)
    text_encoder = UMT5EncoderModel(UMT5Config(vocab_size=tokenizer_vocab_size(tok_dir), **TINY_UMT5)).eval()
    arch = {**TINY_DIT, "inject_sample_info": kind == "df", **(dit or {})}
    if kind == "i2v":  # 4 latent + 4 mask + 4 image-latent channels in; CLIP tokens through the image embedder
        arch.update(in_channels=12, image_dim=TINY_CLIP["hidden_size"],
                    added_kv_proj_dim=TINY_DIT["num_attention_heads"] * TINY_DIT["attention_head_dim"])
    transformer = SkyReelsV2Transformer3DModel(**arch).eval()
    vae = AutoencoderKLWan(**TINY_VAE).eval()
    randomize_(text_encoder, seed + 1, 0.3)
    randomize_(transformer, seed + 2, 0.1)
    randomize_(vae, seed + 3, 0.1)
    sched = UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True, num_train_timesteps=1000,
                                    flow_shift=SHIFT)
    parts = dict(tokenizer=tokenizer, text_encoder=text_encoder, transformer=transformer, vae=vae, scheduler=sched)
    if kind == "i2v":
        encoder = CLIPVisionModelWithProjection(CLIPVisionConfig(**TINY_CLIP, projection_dim=16)).eval()
        randomize_(encoder, seed + 4, 0.1)
        size = TINY_CLIP["image_size"]
        processor = CLIPImageProcessor(size={"shortest_edge": size}, crop_size={"height": size, "width": size})
        return SkyReelsV2ImageToVideoPipeline(**parts, image_encoder=encoder, image_processor=processor)
    cls = SkyReelsV2DiffusionForcingPipeline if kind == "df" else SkyReelsV2Pipeline
    return cls(**parts)


def no_ftfy() -> None:
    """diffusers' SkyReels pipelines call ftfy even when it is not installed (see
    :func:`vidax_core.bench.torch_reference.identity_ftfy`)."""
    from diffusers.pipelines.skyreels_v2 import (pipeline_skyreels_v2, pipeline_skyreels_v2_diffusion_forcing,
                                                 pipeline_skyreels_v2_i2v)

    from vidax_core.bench.torch_reference import identity_ftfy

    identity_ftfy(pipeline_skyreels_v2, pipeline_skyreels_v2_diffusion_forcing, pipeline_skyreels_v2_i2v)


def save_tiny_skyreels(out_dir, kind: str = "df", seed: int = 0, dit: dict | None = None) -> None:
    """``save_pretrained`` a tiny pipeline (safetensors) into ``out_dir``."""
    build_tiny_skyreels(kind, seed=seed, dit=dit).save_pretrained(str(out_dir), safe_serialization=True)
