"""Model ids of the Helios family, their reference recipes and the chunk options of HeliosPipeline and
HeliosPyramidPipeline.

Recipes from PKU-YuanGroup/Helios' README and ``infer_helios.py`` (640x384, 24 fps, the script's English negative
prompt; history sizes [16, 2, 1] and chunks of 9 latent frames keeping the first frame, the pipelines' defaults):
Helios-Base 99 frames (three chunks of 33), 50 steps, guidance 5.0; Helios-Mid 99 frames, pyramid stages of
[20, 20, 20] steps, guidance 5.0 with CFG-Zero* and its zero-init on the first two steps (``zero_steps`` 1);
Helios-Distilled 240 frames (eight chunks), stages of [2, 2, 2] steps, guidance 1.0 (one pass), the first chunk
amplified (twice the steps).
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


def _pyramid_options(steps: list[int], amplify: bool) -> dict:
    return {**OPTIONS,
            "pyramid_num_inference_steps_list": Option(list(steps), list[int], "steps of each pyramid stage, coarse "
                                                       "to fine (each stage doubles the size; sampling.num_steps "
                                                       "must be their sum)"),
            "use_zero_init": Option(True, bool, "CFG-Zero*'s zero-init: predict zero on the first zero_steps + 1 "
                                                "steps of the first stage (checkpoints with is_cfg_zero_star)"),
            "zero_steps": Option(1, int, "last step index of the zero-init"),
            "is_amplify_first_chunk": Option(amplify, bool, "twice the steps in every stage of the first chunk "
                                                            "(HeliosDMDScheduler checkpoints)")}


def _preset(frames: int, steps: int, guidance: float) -> dict:
    return {"negative_prompt": NEGATIVE_PROMPT,
            "sampling": {"num_steps": steps, "guidance_scale": guidance, "height": 384, "width": 640,
                         "num_frames": frames, "max_sequence_length": 512},
            "output": {"fps": 24}}


MID_STEPS, DISTILLED_STEPS = [20, 20, 20], [2, 2, 2]

# The scheduler config each id's pipeline runs with (the published files are not in this repository: assumed from
# the model cards and diffusers' classes: dynamic shifting everywhere, as the training recipe says; one stage for
# HeliosPipeline, three for the pyramid; HeliosDMDScheduler's default linear time shift for Helios-Distilled) and
# the pyramid pipeline's model_index.json flags. What a real checkpoint holds is read from its files at run time.
_UNIPC = {"num_train_timesteps": 1000, "shift": 1.0, "stage_range": [0, 1 / 3, 2 / 3, 1], "gamma": 1 / 3,
          "thresholding": False, "prediction_type": "flow_prediction", "solver_order": 2, "predict_x0": True,
          "solver_type": "bh2", "lower_order_final": True, "disable_corrector": [], "solver_p": None,
          "use_flow_sigmas": True, "scheduler_type": "unipc", "use_dynamic_shifting": True,
          "time_shift_type": "exponential"}
SCHEDULERS = {
    "helios-base": {"_class_name": "HeliosScheduler", **_UNIPC, "stages": 1},
    "helios-mid": {"_class_name": "HeliosScheduler", **_UNIPC, "stages": 3},
    "helios-distilled": {"_class_name": "HeliosDMDScheduler", "num_train_timesteps": 1000, "shift": 1.0, "stages": 3,
                         "stage_range": [0, 1 / 3, 2 / 3, 1], "gamma": 1 / 3, "prediction_type": "flow_prediction",
                         "use_flow_sigmas": True, "use_dynamic_shifting": True, "time_shift_type": "linear"},
}
PIPELINES = {
    "helios-base": {"_class_name": "HeliosPipeline"},
    "helios-mid": {"_class_name": "HeliosPyramidPipeline", "is_cfg_zero_star": True, "is_distilled": False},
    "helios-distilled": {"_class_name": "HeliosPyramidPipeline", "is_cfg_zero_star": False, "is_distilled": True},
}

MODELS = [
    {
        "id": "helios-base",
        "tasks": ("t2v",),
        "hub_repo": "BestWishYsh/Helios-Base",
        "default_config": "configs/helios_base_384p.yaml",
        "description": "Helios-Base 14B (Wan2.1-14B width), real-time long video in chunks of 33 frames with a "
                       "multi-scale history, 640x384",
        "preset": _preset(99, 50, 5.0),
    },
    {
        "id": "helios-mid",
        "tasks": ("t2v",),
        "hub_repo": "BestWishYsh/Helios-Mid",
        "default_config": "configs/helios_mid_384p.yaml",
        "description": "Helios-Mid 14B, the pyramid pipeline's intermediate checkpoint: each chunk coarse to fine in "
                       "three stages, CFG-Zero*, 640x384",
        "preset": _preset(99, sum(MID_STEPS), 5.0),
        "options": _pyramid_options(MID_STEPS, False),
    },
    {
        "id": "helios-distilled",
        "tasks": ("t2v",),
        "hub_repo": "BestWishYsh/Helios-Distilled",
        "default_config": "configs/helios_distilled_384p.yaml",
        "description": "Helios-Distilled 14B, real-time: three pyramid stages of 2 DMD steps per chunk, no "
                       "guidance, 640x384",
        "preset": _preset(240, sum(DISTILLED_STEPS), 1.0),
        "options": _pyramid_options(DISTILLED_STEPS, True),
    },
]
