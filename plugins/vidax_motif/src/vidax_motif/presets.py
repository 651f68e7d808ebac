"""The Motif-Video model id and its reference recipe (diffusers ``MotifVideoPipeline`` /
``MotifVideoImage2VideoPipeline`` call defaults, the model card's example).

``motif-video-2b`` is one id for both tasks: a run with ``image:`` is image-to-video (the image is the first
frame), without it text-to-video. 1280x736, 121 frames, 50 steps, 24 fps, text length 512; the negative prompt the
pipelines substitute for None is the empty string. The guidance scale is the checkpoint's guider's
(``guider/guider_config.json``) unless ``sampling.guidance_scale`` sets it; the flow shift is the scheduler
config's, and the architecture is the checkpoint's transformer config.
"""

from __future__ import annotations

HUB_REPO = "Motif-Technologies/Motif-Video-2B"
MAX_SEQUENCE_LENGTH = 512  # the pipelines' default max_sequence_length
TEMPORAL = 4  # the Wan VAE compresses time by 4: num_frames = 4 k + 1
SPATIAL = 8  # check_inputs: height and width divisible by the VAE's spatial factor
DESCRIPTION = ("Motif-Video 2B (12 dual-stream + 16 single-stream + 8 DDT decoder blocks, width 1536), T5Gemma2 "
               "text encoder with its SigLIP tower for image-to-video, Wan2.1 VAE")

MODELS = [
    {
        "id": "motif-video-2b",
        "tasks": ("t2v", "i2v"),
        "hub_repo": HUB_REPO,
        "default_config": "configs/motif_video_2b.yaml",
        "description": f"{DESCRIPTION}; text-to-video, or image-to-video when image: is given",
        "predicts": ("guidance_scale",),
        "preset": {
            "negative_prompt": "",
            "sampling": {"num_steps": 50, "height": 736, "width": 1280, "num_frames": 121,
                         "max_sequence_length": MAX_SEQUENCE_LENGTH},
            "output": {"fps": 24},
        },
    },
]
