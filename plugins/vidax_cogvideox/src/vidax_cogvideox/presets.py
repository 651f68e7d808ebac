"""Model ids of the CogVideoX family and their reference defaults.

1.0 (2B, 5B, 5B-I2V): 720x480, 49 frames, 8 fps (the transformer config's sample size, the model cards' fps);
1.5 (5B, 5B-I2V): 1360x768 given explicitly (the 1.5 config's sample size would mean 2400x2400), 81 frames
(16N+1) for text-to-video and the I2V pipeline's default 49 for image-to-video, 16 fps. All: 50 steps,
guidance 6, 226 T5 tokens, the checkpoint's own scheduler (CogVideoX DDIM on the hub repos), no dynamic guidance
(the pipelines' default; the official 5B demo turns it on with the DPM sampler: ``options.use_dynamic_cfg`` and
``options.scheduler_class: CogVideoXDPMScheduler``).
"""

from __future__ import annotations

from vidax_core.registry import Option

SCHEDULER_CLASSES = ("CogVideoXDDIMScheduler", "CogVideoXDPMScheduler")

OPTIONS = {
    "use_dynamic_cfg": Option(False, bool, "cosine-ramped guidance scale over the steps (diffusers use_dynamic_cfg; "
                              "the official 5B demo uses it with the CogVideoX DPM sampler)"),
    "scheduler_class": Option(None, str | None, "load the checkpoint's scheduler config as this class instead of "
                              "its own (diffusers SchedulerClass.from_config(pipe.scheduler.config)); the official "
                              "5B demo: CogVideoXDPMScheduler", choices=(None,) + SCHEDULER_CLASSES),
}

FRAMES_1_0, FRAMES_1_5_T2V, FRAMES_1_5_I2V = 49, 81, 49


def _preset(height: int, width: int, frames: int, fps: int) -> dict:
    return {
        "sampling": {"num_steps": 50, "guidance_scale": 6.0, "height": height, "width": width, "num_frames": frames,
                     "max_sequence_length": 226},
        "options": {"use_dynamic_cfg": False, "scheduler_class": None},
        "output": {"fps": fps},
    }


# AutoencoderKLCogVideoX.enable_tiling's knobs: its tiles overlap by a fraction of the tile, not by a stride
TILING = {"enabled": bool, "tile_sample_min_height": int, "tile_sample_min_width": int,
          "tile_overlap_factor_height": float, "tile_overlap_factor_width": float}

MODELS = [
    {
        "id": "cogvideox-2b",
        "tasks": ("t2v",),
        "hub_repo": "THUDM/CogVideoX-2b",
        "default_config": "configs/cogvideox_2b_480p.yaml",
        "description": "CogVideoX 2B (30 blocks, width 1920, 3-D sin-cos positions), text-to-video at 720x480",
        "preset": _preset(480, 720, FRAMES_1_0, 8),
        "tiling": TILING,
    },
    {
        "id": "cogvideox-5b",
        "tasks": ("t2v",),
        "hub_repo": "THUDM/CogVideoX-5b",
        "default_config": "configs/cogvideox_5b_480p.yaml",
        "description": "CogVideoX 5B (42 blocks, width 3072, 3-D RoPE), text-to-video at 720x480",
        "preset": _preset(480, 720, FRAMES_1_0, 8),
        "tiling": TILING,
    },
    {
        "id": "cogvideox-5b-i2v",
        "tasks": ("i2v",),
        "hub_repo": "THUDM/CogVideoX-5b-I2V",
        "default_config": "configs/cogvideox_5b_i2v_480p.yaml",
        "description": "CogVideoX 5B image-to-video (3-D RoPE + learned positions: 720x480 only)",
        "preset": _preset(480, 720, FRAMES_1_0, 8),
        "tiling": TILING,
    },
    {
        "id": "cogvideox1.5-5b",
        "tasks": ("t2v",),
        "hub_repo": "THUDM/CogVideoX1.5-5B",
        "default_config": "configs/cogvideox1.5_5b_768p.yaml",
        "description": "CogVideoX1.5 5B (temporal patch 2, 3-D RoPE), text-to-video at 1360x768",
        "preset": _preset(768, 1360, FRAMES_1_5_T2V, 16),
        "tiling": TILING,
    },
    {
        "id": "cogvideox1.5-5b-i2v",
        "tasks": ("i2v",),
        "hub_repo": "THUDM/CogVideoX1.5-5B-I2V",
        "default_config": "configs/cogvideox1.5_5b_i2v_768p.yaml",
        "description": "CogVideoX1.5 5B image-to-video (ofs embedding), 1360x768",
        "preset": _preset(768, 1360, FRAMES_1_5_I2V, 16),
        "tiling": TILING,
    },
]
