"""Model ids of the SkyReels-V2 family, their reference recipes and the diffusion-forcing options.

Recipes from SkyworkAI/SkyReels-V2's ``generate_video.py`` / ``generate_video_df.py`` and README: 544x960 (540P)
or 720x1280 (720P), 97 frames (121 at 720P) at 24 fps, 30 steps, guidance 6.0 (5.0 for image-to-video), the
flow shift in the checkpoint's scheduler config; the diffusion-forcing scripts' negative prompt is Wan's, the
text-to-video script's its English version.
"""

from __future__ import annotations

from vidax_core import Option

WAN_NEGATIVE_PROMPT = (
    "色调艳丽，过曝，静态，细节模糊不清，字幕，风格，作品，画作，画面，静止，整体发灰，最差质量，低质量，JPEG压缩残留，"
    "丑陋的，残缺的，多余的手指，画得不好的手部，画得不好的脸部，畸形的，毁容的，形态畸形的肢体，手指融合，"
    "静止不动的画面，杂乱的背景，三条腿，背景人很多，倒着走"
)
ENGLISH_NEGATIVE_PROMPT = (
    "Bright tones, overexposed, static, blurred details, subtitles, style, works, paintings, images, static, overall "
    "gray, worst quality, low quality, JPEG compression residue, ugly, incomplete, extra fingers, poorly drawn hands, "
    "poorly drawn faces, deformed, disfigured, misshapen limbs, fused fingers, still picture, messy background, "
    "three legs, many people in the background, walking backwards"
)

#: SkyReelsV2DiffusionForcingPipeline's call arguments (diffusers names and defaults); ``fps`` is output.fps.
DF_OPTIONS = {
    "ar_step": Option(0, int, "diffusion forcing: 0 synchronous (every frame on the same step), > 0 asynchronous "
                              "(each causal block lags the one before by ar_step steps; 5 in the reference's recipe)"),
    "causal_block_size": Option(None, int | None, "latent frames per causal block (block-causal attention; the "
                                "recipe uses 5 with ar_step 5); null: the checkpoint's num_frame_per_block",
                                load_bound=True),
    "base_num_frames": Option(97, int, "frames of one window; a longer video is made in windows of this many "
                                       "frames (97 at 540P, 121 at 720P)"),
    "overlap_history": Option(None, int | None, "frames each window shares with the one before (17 or 37 in the "
                                                  "recipe); required when num_frames > base_num_frames"),
    "addnoise_condition": Option(0.0, float, "noise level (0.001 x this) re-added to a window's clean prefix "
                                             "frames at every step, timestep set to it; 20 in the long-video recipe"),
}


def _preset(height: int, width: int, frames: int, *, guidance: float = 6.0, negative: str = WAN_NEGATIVE_PROMPT,
            options: dict | None = None) -> dict:
    sampling = {"num_steps": 30, "guidance_scale": guidance, "height": height, "width": width,
                "num_frames": frames, "max_sequence_length": 512}
    preset = {"negative_prompt": negative, "sampling": sampling, "output": {"fps": 24}}
    if options:
        preset["options"] = options
    return preset


MODELS = [
    {
        "id": "skyreels-v2-df-1.3b-540p",
        "tasks": ("t2v",),
        "hub_repo": "Skywork/SkyReels-V2-DF-1.3B-540P-Diffusers",
        "default_config": "configs/skyreels_v2_df_1_3b_540p.yaml",
        "description": "SkyReels-V2 diffusion forcing, 1.3B DiT (Wan2.1-1.3B width, fps embedding), long video in "
                       "540P windows",
        "preset": _preset(544, 960, 97),
        "options": DF_OPTIONS,
    },
    {
        "id": "skyreels-v2-df-14b-540p",
        "tasks": ("t2v",),
        "hub_repo": "Skywork/SkyReels-V2-DF-14B-540P-Diffusers",
        "default_config": "configs/skyreels_v2_df_14b_540p.yaml",
        "description": "SkyReels-V2 diffusion forcing, 14B DiT, long video in 540P windows",
        "preset": _preset(544, 960, 97),
        "options": DF_OPTIONS,
    },
    {
        "id": "skyreels-v2-df-14b-720p",
        "tasks": ("t2v",),
        "hub_repo": "Skywork/SkyReels-V2-DF-14B-720P-Diffusers",
        "default_config": "configs/skyreels_v2_df_14b_720p.yaml",
        "description": "SkyReels-V2 diffusion forcing, 14B DiT, long video in 720P windows",
        "preset": _preset(720, 1280, 121, options={"base_num_frames": 121}),
        "options": DF_OPTIONS,
    },
    {
        "id": "skyreels-v2-t2v-14b-540p",
        "tasks": ("t2v",),
        "hub_repo": "Skywork/SkyReels-V2-T2V-14B-540P-Diffusers",
        "default_config": "configs/skyreels_v2_t2v_14b_540p.yaml",
        "description": "SkyReels-V2 text-to-video, 14B DiT, 540P (one denoising pass, SkyReelsV2Pipeline)",
        "preset": _preset(544, 960, 97, negative=ENGLISH_NEGATIVE_PROMPT),
        "options": {},
    },
    {
        "id": "skyreels-v2-i2v-14b-540p",
        "tasks": ("i2v",),
        "hub_repo": "Skywork/SkyReels-V2-I2V-14B-540P-Diffusers",
        "default_config": "configs/skyreels_v2_i2v_14b_540p.yaml",
        "description": "SkyReels-V2 image-to-video, 14B DiT (Wan2.1-I2V width, CLIP image tokens), 540P "
                       "(SkyReelsV2ImageToVideoPipeline)",
        "preset": _preset(544, 960, 97, guidance=5.0, negative=ENGLISH_NEGATIVE_PROMPT),
        "options": {},
    },
]

DIFFUSION_FORCING = frozenset(m["id"] for m in MODELS if m["options"])
