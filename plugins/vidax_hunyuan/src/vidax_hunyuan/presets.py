"""Model ids of HunyuanVideo 1.0 and their reference defaults (diffusers ``HunyuanVideoPipeline``: 1280x720,
129 frames, 50 steps, embedded guidance 6, 256 text tokens after the template, flow shift 7 from the checkpoint's
scheduler config, 24 fps as the official sample script)."""

from __future__ import annotations

from vidax_core.registry import Option

# The pipeline's DEFAULT_PROMPT_TEMPLATE (text-to-video): a system turn the prompt is framed by; the first
# ``crop_start`` tokens (the system turn and the user header) are dropped from the embeddings.
T2V_TEMPLATE = (
    "<|start_header_id|>system<|end_header_id|>\n\nDescribe the video by detailing the following aspects: "
    "1. The main content and theme of the video."
    "2. The color, shape, size, texture, quantity, text, and spatial relationships of the objects."
    "3. Actions, events, behaviors temporal relationships, physical movement changes of the objects."
    "4. background environment, light, style and atmosphere."
    "5. camera angles, movements, and transitions used in the video:<|eot_id|>"
    "<|start_header_id|>user<|end_header_id|>\n\n{}<|eot_id|>"
)
T2V_CROP_START = 95

OPTIONS = {
    "true_cfg_scale": Option(1.0, float, "real classifier-free guidance with the negative prompt when > 1, on top of "
                             "the embedded guidance (diffusers true_cfg_scale)"),
    "prompt_template": Option(None, str | None, "the Llama prompt template, with one {} for the prompt; null = the "
                              "pipeline's default (diffusers prompt_template['template'])"),
    "crop_start": Option(None, int | None, "template tokens dropped from the front of the Llama embeddings; null = "
                         "the default template's 95 (diffusers prompt_template['crop_start'])"),
}


def _preset() -> dict:
    return {
        "sampling": {"num_steps": 50, "guidance_scale": 6.0, "height": 720, "width": 1280, "num_frames": 129,
                     "max_sequence_length": 256},
        "output": {"fps": 24},
    }


MODELS = [
    {
        "id": "hunyuanvideo-t2v-13b",
        "tasks": ("t2v",),
        "hub_repo": "hunyuanvideo-community/HunyuanVideo",
        "default_config": "configs/hunyuan_t2v_13b_720p.yaml",
        "description": "HunyuanVideo 1.0 13B text-to-video (20 double + 40 single blocks, width 3072), "
                       "Llama-3 + CLIP-L text, embedded guidance",
        "preset": _preset(),
    },
]
