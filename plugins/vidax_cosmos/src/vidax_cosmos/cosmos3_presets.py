"""Model ids of Cosmos3 (Nano, Edge) and their reference defaults (diffusers ``Cosmos3OmniPipeline``: 1280x720,
189 frames, 35 steps, guidance 6, 24 fps, an empty negative prompt), with the prompt sentences the pipeline adds.

The published Nano text-to-video recipe samples with UniPC at flow shift 10 without Karras sigmas, which is what the
checkpoint's ``scheduler/scheduler_config.json`` holds; no Edge model card gives another recipe, so Edge uses the
pipeline's defaults too.
"""

from __future__ import annotations

from vidax_core.registry import Option

# The pipeline's mode-specific system prompts (its typos kept: the model was trained with them).
SYSTEM_PROMPT_VIDEO = "You are a helpful assistant who will generate videos from a give prompt."
SYSTEM_PROMPT_IMAGE = "You are a helpful assistant who will generate images from a give prompt."
# Metadata sentences appended to the prompt; the negative prompt gets the inverse ones.
DURATION = "The video is {duration:.1f} seconds long and is of {fps:.0f} FPS."
INVERSE_DURATION = "The video is not {duration:.1f} seconds long and is not of {fps:.0f} FPS."
VIDEO_RESOLUTION = "This video is of {height}x{width} resolution."
INVERSE_VIDEO_RESOLUTION = "This video is not of {height}x{width} resolution."
IMAGE_RESOLUTION = "This image is of {height}x{width} resolution."
INVERSE_IMAGE_RESOLUTION = "This image is not of {height}x{width} resolution."
# The token the pipeline appends after the end-of-text token to open the generated modality.
START_OF_GENERATION = "<|vision_start|>"
# The reference neither pads nor truncates; this cap is far above any real prompt's length.
MAX_TOKENS = 4096

OPTIONS = {
    "use_system_prompt": Option(
        None, bool | None, "prepend the pipeline's system prompt to the chat; null = the checkpoint's "
        "model_index.json default_use_system_prompt (true when absent) (diffusers use_system_prompt)"),
    "add_resolution_template": Option(
        True, bool, "append 'This video is of HxW resolution.' to the prompt and its inverse to the negative prompt "
        "(diffusers add_resolution_template)"),
    "add_duration_template": Option(
        True, bool, "append 'The video is S seconds long and is of F FPS.' to the prompt and its inverse to the "
        "negative prompt (diffusers add_duration_template)"),
    "fps": Option(
        24.0, float, "the frame rate the model is told (duration sentence and mRoPE temporal positions); the mp4 is "
        "written at output.fps (diffusers fps)"),
    "condition_frame_indexes_vision": Option(
        [0, 1], list[int], "video-to-video: the latent frames kept clean, encoded from 4 * max(indexes) + 1 frames "
        "of the clip (condition_video_keep says which end); the others are generated (diffusers "
        "condition_frame_indexes_vision)"),
    "condition_video_keep": Option(
        "first", str, "video-to-video: which end of a longer clip the conditioning frames come from "
        "(diffusers condition_video_keep)", choices=("first", "last")),
}


def _preset() -> dict:
    return {
        "negative_prompt": "",
        "sampling": {"num_steps": 35, "guidance_scale": 6.0, "height": 720, "width": 1280, "num_frames": 189,
                     "max_sequence_length": MAX_TOKENS},
        "output": {"fps": 24},
    }


MODELS = [
    {
        "id": "cosmos3-nano",
        "tasks": ("t2v", "i2v", "v2v"),
        "hub_repo": "nvidia/Cosmos3-Nano",
        "default_config": "configs/cosmos3_nano_720p.yaml",
        "description": "Cosmos3 Nano text/image/video-to-video (mixture of transformers, 36 layers, width 4096, "
                       "GQA 32/8, SwiGLU); prompt tokens go straight into the DiT, Wan2.2 VAE",
        "preset": _preset(),
        "options": dict(OPTIONS),
        "checkpoint_formats": ("diffusers",),
    },
    {
        "id": "cosmos3-edge",
        "tasks": ("t2v", "i2v", "v2v"),
        "hub_repo": None,  # no diffusers Edge checkpoint is published: the id builds from an Edge config.json
        "default_config": "configs/cosmos3_edge_720p.yaml",
        "description": "Cosmos3 Edge text/image/video-to-video (mixture of transformers, 28 layers, width 2048, "
                       "GQA 16/8, relu^2, Nemotron norms); prompt tokens go straight into the DiT, Wan2.2 VAE",
        "preset": _preset(),
        "options": dict(OPTIONS),
        "checkpoint_formats": ("diffusers",),
    },
]
COSMOS3_IDS = frozenset(m["id"] for m in MODELS)
