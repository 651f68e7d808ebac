"""Model ids of the Wan family and their reference defaults (from the published Wan configurations)."""

from __future__ import annotations

# The reference sampler's default negative prompt (Wan's `sample_neg_prompt`).
WAN_NEGATIVE_PROMPT = (
    "色调艳丽，过曝，静态，细节模糊不清，字幕，风格，作品，画作，画面，静止，整体发灰，最差质量，低质量，JPEG压缩残留，"
    "丑陋的，残缺的，多余的手指，画得不好的手部，画得不好的脸部，畸形的，毁容的，形态畸形的肢体，手指融合，"
    "静止不动的画面，杂乱的背景，三条腿，背景人很多，倒着走"
)


def _t2v_preset(height: int, width: int) -> dict:
    return {
        "negative_prompt": WAN_NEGATIVE_PROMPT,
        "sampling": {
            "num_steps": 50,
            "guidance_scale": 5.0,
            "height": height,
            "width": width,
            "num_frames": 81,
            "max_sequence_length": 512,
        },
        "output": {"fps": 16},
    }


MODELS = [
    {
        "id": "wan2.1-t2v-1.3b",
        "tasks": ("t2v",),
        "hub_repo": "Wan-AI/Wan2.1-T2V-1.3B-Diffusers",
        "default_config": "configs/wan21_1_3b_480p.yaml",
        "description": "Wan2.1 text-to-video, 1.3B DiT (30 blocks, width 1536), 480p",
        "preset": _t2v_preset(480, 832),
    },
    {
        "id": "wan2.1-t2v-14b",
        "tasks": ("t2v",),
        "hub_repo": "Wan-AI/Wan2.1-T2V-14B-Diffusers",
        "default_config": "configs/wan21_14b_720p.yaml",
        "description": "Wan2.1 text-to-video, 14B DiT (40 blocks, width 5120), 720p and 480p",
        "preset": _t2v_preset(720, 1280),
    },
]
