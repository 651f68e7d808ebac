"""Model ids of the Helios family, their reference recipes and HeliosPipeline's chunk options.

Recipes from PKU-YuanGroup/Helios' ``infer_helios.py`` and ``scripts/inference/helios-base_t2v.sh``: 640x384, 99
frames (three chunks of 33), 50 steps, guidance 5.0, 24 fps, the script's English negative prompt; history sizes
[16, 2, 1] and chunks of 9 latent frames keeping the first frame (the pipeline's defaults).
"""

from __future__ import annotations

from vidax_core import Option

NEGATIVE_PROMPT = (
    "Bright tones, overexposed, static, blurred details, subtitles, style, works, paintings, images, static, overall "
    "gray, worst quality, low quality, JPEG compression residue, ugly, incomplete, extra fingers, poorly drawn hands, "
    "poorly drawn faces, deformed, disfigured, misshapen limbs, fused fingers, still picture, messy background, "
    "three legs, many people in the background, walking backwards"
)

OPTIONS = {
    "history_sizes": Option([16, 2, 1], list[int], "latent frames of history at the long (4x coarser), mid (2x) and "
                                                   "short (full) scale each chunk is conditioned on"),
    "num_latent_frames_per_chunk": Option(9, int, "latent frames each chunk makes (9 = 33 video frames)"),
    "keep_first_frame": Option(True, bool, "condition every chunk on the video's first latent frame (the pipeline "
                                           "fails with false: keep true)"),
    "is_skip_first_chunk": Option(False, bool, "take the kept first frame from the second chunk instead"),
}

MODELS = [
    {
        "id": "helios-base",
        "tasks": ("t2v",),
        "hub_repo": "BestWishYsh/Helios-Base",
        "default_config": "configs/helios_base_384p.yaml",
        "description": "Helios-Base 14B (Wan2.1-14B width), real-time long video in chunks of 33 frames with a "
                       "multi-scale history, 640x384",
        "preset": {"negative_prompt": NEGATIVE_PROMPT,
                   "sampling": {"num_steps": 50, "guidance_scale": 5.0, "height": 384, "width": 640, "num_frames": 99,
                                "max_sequence_length": 512},
                   "output": {"fps": 24}},
    },
]
