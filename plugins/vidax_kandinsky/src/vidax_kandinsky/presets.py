"""Model ids of Kandinsky 5 video and their reference recipes (diffusers ``Kandinsky5T2VPipeline`` /
``Kandinsky5I2VPipeline`` and the Kandinsky team's release configs).

* ``kandinsky5-t2v-lite``: the 2B Lite text-to-video DiT (32 visual blocks, width 1792). Its eight published
  diffusers checkpoints are configs of this one id (``hub_variants``; one YAML each under ``configs/``): ``sft``
  (50 steps, guidance 5), ``pretrain`` (the same recipe), ``nocfg`` (CFG-distilled: guidance 1), ``distilled16steps``
  (16 steps, guidance 1), each for 5 s (121 frames) and 10 s (241 frames; their configs ask for NABLA sparse
  attention, which the DiT runs). 512x768, 24 fps, flow shift 5 (the release's ``scheduler_scale``).
* ``kandinsky5-t2v-pro``: the 19B Pro text-to-video DiT (60 visual blocks, width 4096), 768x1024 HD, 121 frames,
  50 steps, guidance 5 (its config asks for NABLA sparse attention, which the DiT runs).
* ``kandinsky5-i2v-lite``: the Lite image-to-video DiT, 512x768, 121 frames, 50 steps, guidance 5, flow shift 10.

Every id reads its architecture from the checkpoint's ``transformer/config.json`` and its flow shift from
``scheduler/scheduler_config.json``; the presets fill what the pipeline fixes itself (size, frames, steps, guidance,
the negative prompt it substitutes for None, fps).
"""

from __future__ import annotations

# The pipelines' Qwen prompt template (the model was trained on this exact text) and where the prompt starts.
PROMPT_TEMPLATE = "\n".join([
    "<|im_start|>system\nYou are a prompt engineer. Describe the video in detail.",
    "Describe how the camera moves or shakes, describe the zoom and view angle, whether it follows the objects.",
    "Describe the location of the video, main characters or objects and their action.",
    "Describe the dynamism of the video and presented actions.",
    "Name the visual style of the video: whether it is a professional footage, user generated content, some kind "
    "of animation, video game or scren content.",
    "Describe the visual effects, postprocessing and transitions if they are presented in the video.",
    "Pay attention to the order of key actions shown in the scene.<|im_end|>",
    "<|im_start|>user\n{}<|im_end|>",
])
CROP_START = 128  # prompt_template_encode_start_idx: the system turn and the user header, dropped after encoding
CLIP_LENGTH = 77
MAX_SEQUENCE_LENGTH = 512  # the pipelines' default max_sequence_length
MAX_SEQUENCE_LIMIT = 1024  # check_inputs: "max_sequence_length must be less than 1024"
NEGATIVE_PROMPT = ("Static, 2D cartoon, cartoon, 2d animation, paintings, images, worst quality, low quality, ugly, "
                   "deformed, walking backwards")  # what the pipelines use for negative_prompt=None
SIZE_MULTIPLE = 16  # check_inputs: height and width divisible by 16
TEMPORAL = 4  # the VAE compresses time by 4: num_frames = 4 k + 1
I2V_MIN_FRAMES = 17  # normalize_first_frame reads latent frames 4.. as its reference: at least 5 latent frames

HUB = "kandinskylab/Kandinsky-5.0-{}-Diffusers"
LITE_VARIANTS = ("sft", "pretrain", "nocfg", "distilled16steps")
_LITE = "Kandinsky 5 Lite 2B (2 text + 32 visual blocks, width 1792), Qwen2.5-VL-7B + CLIP-L, HunyuanVideo VAE"
_PRO = "Kandinsky 5 Pro 19B (4 text + 60 visual blocks, width 4096), Qwen2.5-VL-7B + CLIP-L, HunyuanVideo VAE"


def _preset(height: int, width: int, *, frames: int = 121, steps: int = 50, guidance: float = 5.0) -> dict:
    return {
        "negative_prompt": NEGATIVE_PROMPT,
        "sampling": {"num_steps": steps, "guidance_scale": guidance, "height": height, "width": width,
                     "num_frames": frames, "max_sequence_length": MAX_SEQUENCE_LENGTH},
        "output": {"fps": 24},
    }


def lite_recipe(variant: str, seconds: int) -> dict:
    """The sampling keys of one Lite T2V checkpoint (its YAML under ``configs/``)."""
    steps, guidance = {"distilled16steps": (16, 1.0), "nocfg": (50, 1.0)}.get(variant, (50, 5.0))
    return _preset(512, 768, frames=121 if seconds == 5 else 241, steps=steps, guidance=guidance)


MODELS = [
    {
        "id": "kandinsky5-t2v-lite",
        "tasks": ("t2v",),
        "hub_repo": HUB.format("T2V-Lite-sft-5s"),
        "hub_variants": tuple(HUB.format(f"T2V-Lite-{v}-{s}s") for v in LITE_VARIANTS for s in (5, 10)
                              if (v, s) != ("sft", 5)),
        "default_config": "configs/kandinsky5_t2v_lite_sft_5s.yaml",
        "description": f"{_LITE}, text-to-video (sft / pretrain / nocfg / distilled16steps, 5 s and 10 s)",
        "preset": lite_recipe("sft", 5),
    },
    {
        "id": "kandinsky5-t2v-pro",
        "tasks": ("t2v",),
        "hub_repo": HUB.format("T2V-Pro-sft-5s"),
        "hub_variants": (HUB.format("T2V-Pro-sft-10s"), HUB.format("T2V-Pro-pretrain-5s"),
                         HUB.format("T2V-Pro-pretrain-10s")),
        "default_config": "configs/kandinsky5_t2v_pro_5s.yaml",
        "description": f"{_PRO}, text-to-video, HD",
        "preset": _preset(768, 1024),
    },
    {
        "id": "kandinsky5-i2v-lite",
        "tasks": ("i2v",),
        "hub_repo": HUB.format("I2V-Lite-5s"),
        "default_config": "configs/kandinsky5_i2v_lite_5s.yaml",
        "description": f"{_LITE}, image-to-video (first frame)",
        "preset": _preset(512, 768),
    },
]
KANDINSKY_IDS = frozenset(m["id"] for m in MODELS)
