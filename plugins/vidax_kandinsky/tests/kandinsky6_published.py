"""The published configs of the Kandinsky 6 checkpoints (diffusers layout), and a writer of config-only folders
(what ``vidax run --dry-run``, ``vidax bench --random-dit --published`` and the full-size checks read;
``scripts/published_k6_config_folders.py`` calls it).

Sources (no hub download is possible here; each is a copy of the repo's ``transformer/config.json`` quoted by
another port of the model, checked against the model cards' sizes by the full-size test):

* ``Kandinsky-6.0-Pro-distill-5s-Diffusers``: quoted whole (sglang's Kandinsky 6 config test). The Pro checkpoint
  (gated on the hub) differs only in its heads: ``out_visual_dim`` 16 and ``out_audio_dim`` 40 (same source).
* ``Kandinsky-6.0-Lite-5s-Diffusers`` (snapshot 6510114a): quoted by vLLM-Omni's published-key test without
  ``out_audio_dim`` and ``time_dim_a``; ``time_dim_a`` absent means ``time_dim`` (diffusers' ``or``), and
  ``out_audio_dim`` is taken as ``in_audio_dim`` (40; the audio stream's velocity, as every sampler needs).
  Lite-distill is Lite with the PiFlow heads (x10), as Pro-distill is Pro. The pretrain repos have "the same
  architecture and sampler settings" as Pro and Lite (their model cards).
* Every generation repo: Qwen2.5-VL-7B-Instruct and CLIP-L text (Kandinsky 5's), the HunyuanVideo VAE at its
  published defaults, ``MMAudioVAE`` (44.1 kHz, 40 latent channels, ``scaling_factor`` 0.5302 for Pro and Lite,
  0.417 for the distilled and pretrain ones) and ``MMAudioVocoder`` at their defaults; flow Euler shift 5, or
  ``PiflowScheduler``
  (shift 5, ``n_grid`` 10, final step 0.5, 128 substeps) for the distilled ones.
* The two VSR repos: their ``transformer/``, ``vae/`` and ``latent_upscaler/`` config.json are in the vendor's older
  key format, of which diffusers reads only the keys its classes share (``out_visual_dim``: 64 for the flow-matching
  DiT, 640 for the distilled one; the K-VAE's ``scaling_factor``) and takes its class defaults for the rest: the
  folders below hold those defaults, the architecture diffusers builds from the repos (1.41B DiT, 1.74B K-VAE,
  3.65B upscaler bank per the model cards). Scheduler: flow Euler shift 5, or ``PiflowScheduler`` shift 3.5.
"""

from __future__ import annotations

import os

from kandinsky_published import CLIP_L, QWEN_7B_TEXT, QWEN_7B_VISION, _plain, _write

_PRO_DISTILL = dict(audio_freqs_scaling=0.144, axes_dims=[32, 48, 48], axes_dims_a=[32, 48, 48], ca_rope=True,
                    cross_gates=True, ff_dim=16384, ff_dim_a=7168, fix_modulation=True, in_audio_dim=40,
                    in_text_dim=3584, in_text_dim2=768, in_visual_dim=16, model_dim=4096, model_dim_a=2048,
                    num_text_blocks=4, num_visual_blocks=60, out_audio_dim=400, out_visual_dim=160,
                    patch_size=[1, 2, 2], scale_factor=[1.0, 2.0, 2.0], text_token_padding=True, time_dim=1024,
                    time_dim_a=1024, visual_cond=True, visual_token_type_num_embeddings=2)
_LITE = dict(in_visual_dim=16, out_visual_dim=16, in_text_dim=3584, in_text_dim2=768, time_dim=512,
             patch_size=[1, 2, 2], model_dim=1792, ff_dim=7168, num_text_blocks=2, num_visual_blocks=32,
             axes_dims=[16, 24, 24], visual_cond=True, in_audio_dim=40, out_audio_dim=40, model_dim_a=896,
             ff_dim_a=3584, axes_dims_a=[16, 24, 24], audio_freqs_scaling=0.144, ca_rope=True, cross_gates=True,
             fix_modulation=True, text_token_padding=True, visual_token_type_num_embeddings=2)
_PIFLOW = dict(shift=5.0, n_grid=10, final_step_size_scale=0.5, num_policy_substeps=128)

#: generation id -> (transformer config, audio scaling factor, PiFlow scheduler settings or None for flow Euler)
TI2VA = {
    "kandinsky6-ti2va-pro": (dict(_PRO_DISTILL, out_visual_dim=16, out_audio_dim=40), 0.5302, None),
    "kandinsky6-ti2va-pro-distill": (_PRO_DISTILL, 0.417, _PIFLOW),
    "kandinsky6-ti2va-lite": (_LITE, 0.5302, None),
    "kandinsky6-ti2va-lite-distill": (dict(_LITE, out_visual_dim=160, out_audio_dim=400), 0.417, _PIFLOW),
    "kandinsky6-ti2va-pro-pretrain": (dict(_PRO_DISTILL, out_visual_dim=16, out_audio_dim=40), 0.417, None),
    "kandinsky6-ti2va-lite-pretrain": (_LITE, 0.417, None),
}
#: super-resolution id -> (transformer config over the class defaults, PiFlow settings or None)
SR = {
    "kandinsky6-vsr": (dict(out_visual_dim=64), None),
    "kandinsky6-vsr-distill": (dict(out_visual_dim=640), dict(shift=3.5, n_grid=10)),
}
MODELS = {**{k: v[0] for k, v in TI2VA.items()}, **{k: v[0] for k, v in SR.items()}}


def _scheduler(root: str, piflow: dict | None, shift: float = 5.0) -> None:
    from diffusers import FlowMatchEulerDiscreteScheduler, PiflowScheduler

    sched = PiflowScheduler(**piflow) if piflow else FlowMatchEulerDiscreteScheduler(shift=shift)
    _write(os.path.join(root, "scheduler"), "scheduler_config.json",
           {"_class_name": type(sched).__name__, **_plain(sched.config)})


def write_folders(out: str) -> list[str]:
    """One config-only diffusers folder per model id under ``out``; needs torch, diffusers and transformers (the
    configs pass through their classes on the meta device, so every default is filled in)."""
    import torch
    from diffusers import (AutoencoderKLHunyuanVideo, Kandinsky6SRLatentUpscalerBank,
                           Kandinsky6SRTransformer3DModel, Kandinsky6SRVAE, Kandinsky6Transformer3DModel, MMAudioVAE,
                           MMAudioVocoder)
    from transformers import CLIPTextConfig, Qwen2_5_VLConfig

    with torch.device("meta"):
        vae = _plain(AutoencoderKLHunyuanVideo().config)
        vocoder = _plain(MMAudioVocoder().config)
        sr_vae = _plain(Kandinsky6SRVAE().config)
        upscaler = _plain(Kandinsky6SRLatentUpscalerBank().config)
    qwen = Qwen2_5_VLConfig(text_config=QWEN_7B_TEXT, vision_config=QWEN_7B_VISION).to_dict()
    written = []
    for name, (dit, audio_scale, piflow) in TI2VA.items():
        root = os.path.join(out, name)
        with torch.device("meta"):
            transformer = _plain(Kandinsky6Transformer3DModel(**dit).config)
            audio_vae = _plain(MMAudioVAE(scaling_factor=audio_scale).config)
        _write(root, "model_index.json", {
            "_class_name": "Kandinsky6TI2VAPipeline",
            "scheduler": ["diffusers", "PiflowScheduler" if piflow else "FlowMatchEulerDiscreteScheduler"],
            "text_encoder": ["transformers", "Qwen2_5_VLForConditionalGeneration"],
            "tokenizer": ["transformers", "Qwen2VLProcessor"], "text_encoder_2": ["transformers", "CLIPTextModel"],
            "tokenizer_2": ["transformers", "CLIPTokenizer"],
            "transformer": ["diffusers", "Kandinsky6Transformer3DModel"],
            "vae": ["diffusers", "AutoencoderKLHunyuanVideo"], "audio_vae": ["diffusers", "MMAudioVAE"],
            "vocoder": ["diffusers", "MMAudioVocoder"]})
        _write(os.path.join(root, "transformer"), "config.json",
               {"_class_name": "Kandinsky6Transformer3DModel", **transformer})
        _write(os.path.join(root, "vae"), "config.json", {"_class_name": "AutoencoderKLHunyuanVideo", **vae})
        _write(os.path.join(root, "audio_vae"), "config.json", {"_class_name": "MMAudioVAE", **audio_vae})
        _write(os.path.join(root, "vocoder"), "config.json", {"_class_name": "MMAudioVocoder", **vocoder})
        _scheduler(root, piflow)
        _write(os.path.join(root, "text_encoder"), "config.json", qwen)
        _write(os.path.join(root, "text_encoder_2"), "config.json", CLIPTextConfig(**CLIP_L).to_dict())
        written.append(root)
    for name, (dit, piflow) in SR.items():
        root = os.path.join(out, name)
        with torch.device("meta"):
            transformer = _plain(Kandinsky6SRTransformer3DModel(**dit).config)
        _write(root, "model_index.json", {
            "_class_name": "Kandinsky6SRPipeline",
            "scheduler": ["diffusers", "PiflowScheduler" if piflow else "FlowMatchEulerDiscreteScheduler"],
            "transformer": ["diffusers", "Kandinsky6SRTransformer3DModel"], "vae": ["diffusers", "Kandinsky6SRVAE"],
            "latent_upscaler": ["diffusers", "Kandinsky6SRLatentUpscalerBank"]})
        _write(os.path.join(root, "transformer"), "config.json",
               {"_class_name": "Kandinsky6SRTransformer3DModel", **transformer})
        _write(os.path.join(root, "vae"), "config.json", {"_class_name": "Kandinsky6SRVAE", **sr_vae})
        _write(os.path.join(root, "latent_upscaler"), "config.json",
               {"_class_name": "Kandinsky6SRLatentUpscalerBank", **upscaler})
        _scheduler(root, piflow)
        written.append(root)
    return written
