"""Model ids of the LTX-Video 0.9.8 family and their reference defaults.

Defaults follow diffusers' single-pass pipelines (LTXPipeline / LTXImageToVideoPipeline: 704x512, 161 frames,
25 fps, 50 steps, guidance 3, 128 text tokens) with the official decode settings (decode timestep 0.05, decode
noise 0.025); the distilled models use the distilled first-pass timestep list of the 0.9.8 recipe and no
classifier-free guidance (guidance 1).
"""

from __future__ import annotations

from vidax_core.registry import Option

NEGATIVE_PROMPT = "worst quality, inconsistent motion, blurry, jittery, distorted"
# The distilled models' first-pass schedule (diffusers' LTX-Video docs for 0.9.7/0.9.8 distilled, Lightricks'
# ltxv-*-0.9.8-distilled.yaml) and the second pass after the latent upscaler (entered at denoise_strength 0.999).
DISTILLED_TIMESTEPS = [1000.0, 993.0, 987.0, 981.0, 975.0, 909.0, 725.0, 0.03]
DISTILLED_SECOND_PASS_TIMESTEPS = [1000.0, 909.0, 725.0, 421.0, 0.0]

OPTIONS = {
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


def _preset(steps: int, guidance: float, timesteps: list[float] | None = None) -> dict:
    return {
        "negative_prompt": NEGATIVE_PROMPT,
        "sampling": {"num_steps": steps, "guidance_scale": guidance, "height": 512, "width": 704, "num_frames": 161,
                     "max_sequence_length": 128},
        "options": {"timesteps": timesteps},
        "output": {"fps": 25},
    }


MODELS = [
    {
        "id": "ltx-video-2b-0.9.8-distilled",
        "tasks": ("t2v", "i2v"),
        "hub_repo": None,
        "default_config": "configs/ltx_2b_0_9_8_distilled_512p.yaml",
        "description": "LTX-Video 0.9.8 2B distilled (28 blocks, width 2048), 8 steps without guidance",
        "preset": _preset(len(DISTILLED_TIMESTEPS), 1.0, DISTILLED_TIMESTEPS),
    },
    {
        "id": "ltx-video-13b-0.9.8-dev",
        "tasks": ("t2v", "i2v"),
        "hub_repo": None,
        "default_config": "configs/ltx_13b_0_9_8_dev_512p.yaml",
        "description": "LTX-Video 0.9.8 13B dev (48 blocks, width 4096), 50 steps, guidance 3",
        "preset": _preset(50, 3.0),
    },
    {
        "id": "ltx-video-13b-0.9.8-distilled",
        "tasks": ("t2v", "i2v"),
        "hub_repo": "Lightricks/LTX-Video-0.9.8-13B-distilled",
        "default_config": "configs/ltx_13b_0_9_8_distilled_512p.yaml",
        "description": "LTX-Video 0.9.8 13B distilled (48 blocks, width 4096), 8 steps without guidance",
        "preset": _preset(len(DISTILLED_TIMESTEPS), 1.0, DISTILLED_TIMESTEPS),
    },
]
