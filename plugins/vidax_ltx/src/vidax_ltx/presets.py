"""Model ids of the LTX-Video 0.9.8 family and their reference defaults.

The presets follow the official multi-scale recipe as diffusers' LTX-Video docs write it with LTXConditionPipeline
and LTXLatentUpsamplePipeline (:mod:`vidax_ltx.multiscale`): a first pass at 2/3 of the requested size, the spatial
latent upscaler, a second pass at twice the first size, frames resized to the requested size; 256 text tokens,
decode timestep 0.05 / noise 0.025, no image-conditioning noise. The distilled models: the distilled timestep lists
(8 then 4 steps, the second pass entered at denoise strength 0.999), no classifier-free guidance, AdaIN 1.0 and
tone mapping 0.6 on the upscaled latents. The dev model: 30 steps at guidance 5 with rescale 0.7, then 10 steps
entered at denoise strength 0.4. ``options.multiscale=false options.pipeline=ltx`` gives diffusers' single-pass
LTXPipeline / LTXImageToVideoPipeline (their defaults: 50 steps, guidance 3, 128 tokens).
"""

from __future__ import annotations

from vidax_core.registry import Option

NEGATIVE_PROMPT = "worst quality, inconsistent motion, blurry, jittery, distorted"
# The distilled models' first-pass schedule (diffusers' LTX-Video docs for 0.9.7/0.9.8 distilled, Lightricks'
# ltxv-*-0.9.8-distilled.yaml) and the second pass after the latent upscaler (entered at denoise_strength 0.999).
DISTILLED_TIMESTEPS = [1000.0, 993.0, 987.0, 981.0, 975.0, 909.0, 725.0, 0.03]
DISTILLED_SECOND_PASS_TIMESTEPS = [1000.0, 909.0, 725.0, 421.0, 0.0]
PIPELINES = ("condition", "ltx")

OPTIONS = {
    "pipeline": Option("condition", str, "run semantics: condition = LTXConditionPipeline (unpacked latents, causal "
                       "RoPE coordinates, image strength, denoise_strength), ltx = LTXPipeline / "
                       "LTXImageToVideoPipeline (packed latents)", choices=PIPELINES),
    "denoise_strength": Option(1.0, float, "share of the schedule run, from the given latents= "
                               "(sampling.initial_noise) re-noised (diffusers denoise_strength; condition only)"),
    "strength": Option(1.0, float, "how strongly image: holds latent frame 0, 0..1 (diffusers strength; condition "
                       "only)"),
    "frame_index": Option(0, int, "pixel frame image: conditions (diffusers frame_index; condition only): 0 = the "
                          "first frame, later = a keyframe of extra tokens"),
    "conditions": Option(None, list | None, "more conditioning items after image:/video:, each {image: PATH} or "
                         "{video: PATH} with optional frame_index (0) and strength (1.0) (diffusers conditions=; "
                         "condition only)"),
    "image_cond_noise_scale": Option(0.0, float, "noise re-added to the fully-strong conditioning tokens each step, "
                                     "times (t/1000)^2 (diffusers image_cond_noise_scale, default 0.15 there; the "
                                     "recipe's 0 here)"),
    "multiscale": Option(False, bool, "the official two-pass recipe: 2/3 size, latent upscaler, second pass"),
    "downscale_factor": Option(2.0 / 3.0, float, "first-pass size as a share of sampling.height/width (multiscale)"),
    "spatial_upsampler": Option(None, str | None, "the latent upscaler: ltxv-spatial-upscaler-*.safetensors or a "
                                "diffusers latent_upsampler folder; null = the checkpoint's own (multiscale)"),
    "adain_factor": Option(0.0, float, "AdaIN of the upscaled latents towards the first pass's (diffusers "
                           "adain_factor of LTXLatentUpsamplePipeline)"),
    "tone_map_compression_ratio": Option(0.0, float, "tone mapping of the upscaled latents (diffusers "
                                         "tone_map_compression_ratio)"),
    "second_pass_timesteps": Option(None, list[float] | None, "the second pass's model timesteps (multiscale)"),
    "second_pass_steps": Option(None, int | None, "the second pass's step count when it has no timestep list; "
                                "null = sampling.num_steps"),
    "second_pass_denoise_strength": Option(0.999, float, "denoise_strength of the second pass (multiscale)"),
    "frame_rate": Option(25.0, float, "frames per second the RoPE time axis is scaled by (diffusers frame_rate)"),
    "decode_timestep": Option(0.05, float, "timestep the VAE decoder is conditioned on (diffusers decode_timestep)"),
    "decode_noise_scale": Option(0.025, float | None, "share of fresh noise mixed into the latents before decoding; "
                                 "null = decode_timestep (diffusers decode_noise_scale)"),
    "guidance_rescale": Option(0.0, float, "guidance rescale phi (diffusers guidance_rescale)"),
    "timesteps": Option(None, list[float] | None, "explicit model timesteps (0..1000) instead of num_steps "
                        "(diffusers timesteps; the distilled models' list)"),
    # The dev recipe's per-step guidance with spatio-temporal guidance (no diffusers argument; vidax_ltx.stg).
    "guidance_timesteps": Option(None, list[float] | None, "model timesteps (0..1000, decreasing) where the per-step "
                                 "lists below change; setting it enables per-step guidance + STG"),
    "guidance_scales": Option(None, list[float] | None, "classifier-free guidance scale per list entry"),
    "stg_scales": Option(None, list[float] | None, "spatio-temporal guidance scale per list entry"),
    "guidance_rescales": Option(None, list[float] | None, "guidance rescale phi per list entry"),
    "stg_skip_blocks": Option(None, list[list[int]] | None, "blocks whose self-attention the perturbed pass skips, "
                              "per list entry"),
}
PER_STEP_KEYS = ("guidance_timesteps", "guidance_scales", "stg_scales", "guidance_rescales", "stg_skip_blocks")


def _preset(steps: int, guidance: float, **options) -> dict:
    return {
        "negative_prompt": NEGATIVE_PROMPT,
        "sampling": {"num_steps": steps, "guidance_scale": guidance, "height": 512, "width": 704, "num_frames": 161,
                     "max_sequence_length": 256},
        "options": {"pipeline": "condition", "multiscale": True, "guidance_rescale": 0.7, **options},
        "output": {"fps": 25},
    }


DISTILLED = dict(timesteps=DISTILLED_TIMESTEPS, second_pass_timesteps=DISTILLED_SECOND_PASS_TIMESTEPS,
                 second_pass_denoise_strength=0.999, adain_factor=1.0, tone_map_compression_ratio=0.6)
DEV = dict(timesteps=None, second_pass_timesteps=None, second_pass_steps=10, second_pass_denoise_strength=0.4)

def _comfy(name: str) -> dict:
    """ComfyUI's files of an LTX-Video 0.9.8 id: Lightricks' release file in ``checkpoints/`` (the DiT and the
    VAE), the T5 v1.1 XXL of ``comfyanonymous/flux_text_encoders`` and the spatial upscaler."""
    return {"transformer": (name + "*",), "vae": (name + "*",), "text_encoder": ("t5xxl*",),
            "latent_upsampler": ("ltxv-spatial-upscaler-0.9.8*",)}


MODELS = [
    {
        "id": "ltx-video-2b-0.9.8-distilled",
        "comfy_files": _comfy("ltxv-2b-0.9.8-distilled"),
        "tasks": ("t2v", "i2v", "v2v"),
        "hub_repo": None,  # no diffusers-layout repository: a folder assembled by hand (docs/models/ltx.md)
        "original_repo": "Lightricks/LTX-Video/ltxv-2b-0.9.8-distilled.safetensors",
        "default_config": "configs/ltx_2b_0_9_8_distilled_512p.yaml",
        "description": "LTX-Video 0.9.8 2B distilled (28 blocks, width 2048): multi-scale, 8 + 4 steps, no guidance",
        "preset": _preset(len(DISTILLED_TIMESTEPS), 1.0, **DISTILLED),
    },
    {
        "id": "ltx-video-13b-0.9.8-dev",
        "comfy_files": _comfy("ltxv-13b-0.9.8-dev"),
        "tasks": ("t2v", "i2v", "v2v"),
        "hub_repo": None,  # no diffusers-layout repository: a folder assembled by hand (docs/models/ltx.md)
        "original_repo": "Lightricks/LTX-Video/ltxv-13b-0.9.8-dev.safetensors",
        "default_config": "configs/ltx_13b_0_9_8_dev_512p.yaml",
        "description": "LTX-Video 0.9.8 13B dev (48 blocks, width 4096): multi-scale, 30 + 4 steps, guidance 5",
        "preset": _preset(30, 5.0, **DEV),
    },
    {
        "id": "ltx-video-13b-0.9.8-distilled",
        "comfy_files": _comfy("ltxv-13b-0.9.8-distilled"),
        "tasks": ("t2v", "i2v", "v2v"),
        "hub_repo": "Lightricks/LTX-Video-0.9.8-13B-distilled",
        "original_repo": "Lightricks/LTX-Video/ltxv-13b-0.9.8-distilled.safetensors",
        "default_config": "configs/ltx_13b_0_9_8_distilled_512p.yaml",
        "description": "LTX-Video 0.9.8 13B distilled (48 blocks, width 4096): multi-scale, 8 + 4 steps, no guidance",
        "preset": _preset(len(DISTILLED_TIMESTEPS), 1.0, **DISTILLED),
    },
]
