"""Model ids of Kandinsky 6 (video with sound) and their reference recipes (diffusers ``Kandinsky6TI2VAPipeline``,
the Kandinsky team's release contract and model cards).

One id per published DiT, each text-to-video-and-audio and, given ``image:``, image-to-video-and-audio (the task
follows the input; the image conditions a masked reference frame appended after the video):

* ``kandinsky6-ti2va-pro`` (``Kandinsky-6.0-Pro-5s-Diffusers``): the 29B Pro DiT (4 text + 60 fused blocks,
  video width 4096, audio width 2048), 50 steps, guidance 5, flow Euler (shift 5);
* ``kandinsky6-ti2va-pro-distill`` (``Kandinsky-6.0-Pro-distill-5s-Diffusers``): the Pro DiT distilled for PiFlow
  (its heads predict a 10-point grid per channel), 10 steps (the model cards and the Kandinsky team's release
  configs; the pipeline's docstring still says 16), guidance 1 (the pipeline requires it with PiFlow);
* ``kandinsky6-ti2va-pro-pretrain`` (``Kandinsky-6.0-Pro-pretrain-5s-Diffusers``): the Pro checkpoint before its
  fine-tuning, the same architecture and recipe as Pro;
* ``kandinsky6-ti2va-lite`` / ``-lite-distill`` / ``-lite-pretrain`` (``Kandinsky-6.0-Lite[-distill|-pretrain]-5s-
  Diffusers``): the 3B Lite DiT (2 text + 32 fused blocks, widths 1792 / 896), the same recipes.

All: 480x864 (the release's size; the pipeline's own default is 512x768), 121 frames at 24 fps with 44.1 kHz sound,
Qwen2.5-VL-7B (template cropped at 129 tokens, up to 1024 prompt tokens) + CLIP-L, the HunyuanVideo VAE, MMAudio's
audio VAE and BigVGAN vocoder. Every id reads its architecture from the checkpoint's ``transformer/config.json``
and its sampler from ``scheduler/scheduler_config.json``.
"""

from __future__ import annotations

from vidax_core import Option

# The pipeline's Qwen prompt template ("promt" is the trained text) and where the prompt starts.
PROMPT_TEMPLATE = "\n".join([
    "<|im_start|>system\nYou are a promt engineer. Describe the video in detail.",
    "Describe how the camera moves or shakes, describe the zoom and view angle, whether it follows the objects.",
    "Describe the location of the video, main characters or objects and their action.",
    "Describe the dynamism of the video and presented actions.",
    "Name the visual style of the video: whether it is a professional footage, user generated content, "
    "some kind of animation, video game or scren content.",
    "Describe the visual effects, postprocessing and transitions if they are presented in the video.",
    "Pay attention to the order of key actions shown in the scene.<|im_end|>",
    "<|im_start|>user\n{}<|im_end|>",
])
CROP_START = 129
MAX_SEQUENCE_LENGTH = 1024
NEGATIVE_PROMPT = ("Static, 2D cartoon, cartoon, 2d animation, paintings, images, worst quality, low quality, ugly, "
                   "deformed, walking backwards")
TEMPORAL = 4
FRAME_RATE = 24.0

HUB = "kandinskylab/Kandinsky-6.0-{}-5s-Diffusers"
_PRO = "Kandinsky 6 Pro 29B (4 text + 60 fused video/audio blocks), Qwen2.5-VL-7B + CLIP-L, HunyuanVideo VAE, MMAudio"
_LITE = "Kandinsky 6 Lite 3B (2 text + 32 fused video/audio blocks), Qwen2.5-VL-7B + CLIP-L, HunyuanVideo VAE, MMAudio"

OPTIONS = {
    "frame_rate": Option(FRAME_RATE, float, "frames per second the video is made at; sets the sound's length "
                                            "(the pipeline's frame_rate)", load_bound=True),
    "sample_audio": Option(True, bool, "make the synchronized sound track (false: video only, as the pipeline's "
                                       "sample_audio=False)", load_bound=True),
    "expand_prompts": Option(False, bool, "the pipeline's prompt expansion (Qwen2.5-VL generating a longer prompt); "
                                          "not run by vidax: expand the prompt beforehand"),
    "super_resolution": Option(None, str | None, "run the frames through a Kandinsky 6 SR id as a second stage "
                                                  "(Kandinsky6SRPipeline after the generation; null: none, as the "
                                                  "generation pipeline alone)",
                               choices=(None, "kandinsky6-vsr", "kandinsky6-vsr-distill"), load_bound=True),
    "sr_checkpoint": Option(None, str | None, "the SR stage's checkpoint (folder or hub repo; null: the SR id's own "
                                              "hub repo)", load_bound=True),
    "sr_resolution_scale": Option(2.25, float, "the SR stage's resolution_scale: 2, 2.25 or 4",
                                  choices=(2.0, 2.25, 4.0), load_bound=True),
}


def recipe(distilled: bool) -> dict:
    steps, guidance = (10, 1.0) if distilled else (50, 5.0)
    return {
        "negative_prompt": NEGATIVE_PROMPT,
        "sampling": {"num_steps": steps, "guidance_scale": guidance, "height": 480, "width": 864,
                     "num_frames": 121, "max_sequence_length": MAX_SEQUENCE_LENGTH},
        "output": {"fps": 24},
    }


VARIANTS = {"": "50 steps, CFG", "distill": "PiFlow-distilled, 10 steps", "pretrain": "pretrained, 50 steps, CFG"}


def _model(size: str, variant: str) -> dict:
    name = f"{size}-{variant}" if variant else size
    label = _PRO if size == "Pro" else _LITE
    slug = f"kandinsky6-ti2va-{name.lower()}"
    return {"id": slug, "tasks": ("t2v", "i2v"), "hub_repo": HUB.format(name),
            "default_config": f"configs/{slug.replace('-', '_')}.yaml",
            "description": f"{label}, text/image-to-video with sound ({VARIANTS[variant]})",
            "preset": recipe(variant == "distill")}


MODELS = [_model(size, variant) for size in ("Pro", "Lite") for variant in VARIANTS]
K6_IDS = frozenset(m["id"] for m in MODELS)
