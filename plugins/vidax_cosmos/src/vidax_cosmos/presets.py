"""Model ids of Cosmos-Predict2.5 and their reference defaults (diffusers ``Cosmos2_5_PredictBasePipeline``:
1280x704, 93 frames, 36 steps, guidance 7, 512 text tokens, its long built-in negative prompt; 16 fps output as the
model card's examples)."""

from __future__ import annotations

from vidax_core.registry import Option

# The pipeline's DEFAULT_NEGATIVE_PROMPT (used when no negative prompt is given).
NEGATIVE_PROMPT = (
    "The video captures a series of frames showing ugly scenes, static with no motion, motion blur, "
    "over-saturation, shaky footage, low resolution, grainy texture, pixelated images, poorly lit areas, "
    "underexposed and overexposed scenes, poor color balance, washed out colors, choppy sequences, "
    "jerky movements, low frame rate, artifacting, color banding, unnatural transitions, outdated special effects, "
    "fake elements, unconvincing visuals, poorly edited content, jump cuts, visual noise, and flickering. "
    "Overall, the video is of poor quality."
)
# The system prompt of the text encoder's chat (the pipeline's _get_prompt_embeds).
SYSTEM_PROMPT = "You are a helpful assistant who will provide prompts to an image generator."

OPTIONS = {
    "conditional_frame_timestep": Option(
        0.0001, float, "model timestep of the clean conditioning frames; negative = the current sigma like the rest "
        "(diffusers conditional_frame_timestep)"),
    "num_latent_conditional_frames": Option(
        2, int, "video-to-world: latent frames taken from the end of the clip (1 or 2; it keeps its last "
        "4 (n - 1) + 1 frames) (diffusers num_latent_conditional_frames)", choices=(1, 2)),
}


def _preset() -> dict:
    return {
        "negative_prompt": NEGATIVE_PROMPT,
        "sampling": {"num_steps": 36, "guidance_scale": 7.0, "height": 704, "width": 1280, "num_frames": 93,
                     "max_sequence_length": 512},
        "output": {"fps": 16},
    }


MODELS = [
    {
        "id": "cosmos-predict2.5-2b",
        "tasks": ("t2v", "i2v", "v2v"),
        "hub_repo": "nvidia/Cosmos-Predict2.5-2B",
        "hub_revision": "diffusers/base/post-trained",  # the diffusers layout's branch; main holds the release
        "original_repo": "nvidia/Cosmos-Predict2.5-2B/base/post-trained",
        "default_config": "configs/cosmos_predict25_2b_720p.yaml",
        "description": "Cosmos-Predict2.5 2B text/image/video-to-world (28 blocks, width 2048), Cosmos-Reason1 text",
        "preset": _preset(),
    },
    {
        "id": "cosmos-predict2.5-14b",
        "tasks": ("t2v", "i2v", "v2v"),
        "hub_repo": "nvidia/Cosmos-Predict2.5-14B",
        "hub_revision": "diffusers/base/post-trained",  # the diffusers layout's branch; main holds the release
        "original_repo": "nvidia/Cosmos-Predict2.5-14B/base/post-trained",
        "default_config": "configs/cosmos_predict25_14b_720p.yaml",
        "description": "Cosmos-Predict2.5 14B text/image/video-to-world (36 blocks, width 5120), Cosmos-Reason1 text",
        "preset": _preset(),
    },
]
