"""Model ids of HunyuanVideo-1.5 and their reference defaults (diffusers ``HunyuanVideo15Pipeline`` /
``HunyuanVideo15ImageToVideoPipeline``): 121 frames, 50 steps, 24 fps, classifier-free guidance 6 (the published
checkpoints' ``guider/guider_config.json``), the Qwen prompt padded to 1000 tokens after the template and the byT5
glyph text to 256 (both pipeline attributes), flow shift from the checkpoint's scheduler config (5 at 480p, 9 for
720p text-to-video, 7 for 720p image-to-video).

Text-to-video's default size is the pipeline's: the bucket of the model's ``target_size`` (640 at 480p, 960 at
720p) closest to 16:9, i.e. 848x480 and 1280x720 (:func:`default_size` computes it); image-to-video's is the bucket
closest to the image's aspect (the presets hold the 16:9 one). The step-distilled 480p I2V checkpoint
(``use_meanflow``: the DiT also embeds the next timestep) has its own id, with its model card's recipe: 8 steps
(12 also recommended), no guidance, flow shift 7 (its scheduler config). The CFG-distilled checkpoints
(``..._distilled``: 480p T2V, 480p and 720p I2V in the diffusers layout, 720p T2V only in the original release)
share the ids of their base models (``hub_variants``); their configs set guidance 1.
"""

from __future__ import annotations

from vidax_core.registry import Option

# The pipelines' ``system_message`` (their continuation lines keep the source's indentation: the model was
# trained on this exact text).
SYSTEM_MESSAGE = (
    "You are a helpful assistant. Describe the video by detailing the following aspects:         "
    "1. The main content and theme of the video.         "
    "2. The color, shape, size, texture, quantity, text, and spatial relationships of the objects.         "
    "3. Actions, events, behaviors temporal relationships, physical movement changes of the objects.         "
    "4. background environment, light, style and atmosphere.         "
    "5. camera angles, movements, and transitions used in the video."
)
CROP_START = 108  # prompt_template_encode_start_idx: the system turn and the user header, dropped after encoding
QWEN_LENGTH = 1000  # tokenizer_max_length
BYT5_LENGTH = 256  # tokenizer_2_max_length
HIDDEN_LAYER = -3  # hidden_states[-(num_hidden_layers_to_skip + 1)], skip 2
IMAGE_TOKENS = 729  # vision_num_semantic_tokens: SigLIP 384 px / patch 14 -> 27 x 27
ASPECT = (16, 9)  # default_aspect_ratio (width, height) of text-to-video

OPTIONS = {
    "tokenizer_2_max_length": Option(
        BYT5_LENGTH, int, "byT5 tokens of the prompt's quoted text (the pipeline attribute tokenizer_2_max_length)"),
}


def crop_sizes(target: int, patch: int = 16, max_ratio: float = 4.0) -> list[tuple[int, int]]:
    """The reference's size buckets of ``target**2`` pixels: (height, width) pairs, multiples of ``patch``."""
    n = round((target / patch) ** 2)
    out, wp, hp = [], n, 1
    while wp > 0:
        if max(wp, hp) / min(wp, hp) <= max_ratio:
            out.append((wp * patch, hp * patch))
        if (hp + 1) * wp <= n:
            hp += 1
        else:
            wp -= 1
    return out


def closest_size(height: float, width: float, target: int, patch: int = 16) -> tuple[int, int]:
    """The bucket whose aspect ratio (rounded to 5 digits, as the reference) is closest to ``height / width``
    without crossing it toward square: the reference's ``get_closest_ratio``."""
    buckets = crop_sizes(target, patch)
    ratios = [round(h / w, 5) for h, w in buckets]
    aspect = float(height) / float(width)
    diffs = [(i, r - aspect) for i, r in enumerate(ratios)]
    keep = [d for d in diffs if (d[1] <= 0 if aspect >= 1 else d[1] >= 0)]
    return buckets[min(keep, key=lambda d: abs(d[1]))[0]]


def default_size(target: int) -> tuple[int, int]:
    """Text-to-video's default (height, width) for the model's ``target_size``."""
    return closest_size(ASPECT[1], ASPECT[0], target)


def _preset(target: int, *, steps: int = 50, guidance: float = 6.0) -> dict:
    height, width = default_size(target)
    return {
        "negative_prompt": "",
        "sampling": {"num_steps": steps, "guidance_scale": guidance, "height": height, "width": width,
                     "num_frames": 121, "max_sequence_length": QWEN_LENGTH},
        "output": {"fps": 24},
    }


HUB = "hunyuanvideo-community/HunyuanVideo-1.5-Diffusers-{}"
RELEASE = "tencent/HunyuanVideo-1.5"  # the original release: every DiT under transformer/<res>_<task>[_...]/
_DIT = "HunyuanVideo-1.5 8.3B (54 double-stream blocks, width 2048), Qwen2.5-VL-7B + byT5 glyph text"


#: ``vae.tiling`` knobs of the HunyuanVideo-1.5 VAE (``ModelSpec.tiling``), as
#: ``AutoencoderKLHunyuanVideo15.enable_tiling`` names them; :mod:`.vae15` reads them.
TILING15 = {"enabled": bool, "tile_sample_min_height": int, "tile_sample_min_width": int,
            "tile_latent_min_height": int, "tile_latent_min_width": int, "tile_overlap_factor": float}


def _comfy(res: str, task: str, suffix: str) -> dict:
    """Comfy-Org's file names (``Comfy-Org/HunyuanVideo_1.5_repackaged`` ``split_files/``): the DiT per resolution
    and task (fp16 / bf16 / fp8), Qwen2.5-VL-7B, the glyph byT5, the VAE and, for image-to-video, SigLIP."""
    dit = f"hunyuanvideo1.5_{res}_{task}" + (f"_{suffix.replace('-', '_')}" if suffix else "")
    files = {"transformer": (dit + "_fp*", dit + "_bf16*"), "text_encoder": ("qwen_2.5_vl_7b*",),
             "text_encoder_2": ("byt5_small_glyphxl*",), "vae": ("hunyuanvideo15_vae*",)}
    if task == "i2v":
        files["image_encoder"] = ("sigclip_vision_patch14_384*",)
    return files


def _model(res: str, task: str, shift: int, *, suffix: str = "", cfg_distilled: str = "", **preset) -> dict:
    """``cfg_distilled``: where the CFG-distilled DiT of this id is published: "diffusers" (a community repo) or
    "release" (only inside the original release, a folder the user assembles)."""
    target = 640 if res == "480p" else 960
    name = f"hunyuanvideo-1.5-{task}-{res}" + (f"-{suffix}" if suffix else "")
    what = "text-to-video" if task == "t2v" else "image-to-video (SigLIP image tokens, latent + mask concat)"
    return {
        "id": name,
        "tasks": (task,),
        "hub_repo": HUB.format(f"{res}_{task}" + (f"_{suffix.replace('-', '_')}" if suffix else "")),
        "original_repo": f"{RELEASE}/transformer/{res}_{task}" + (f"_{suffix.replace('-', '_')}" if suffix else ""),
        "hub_variants": {"diffusers": (HUB.format(f"{res}_{task}_distilled"),),
                         "release": (f"{RELEASE}/transformer/{res}_{task}_distilled",)}.get(cfg_distilled, ()),
        "default_config": f"configs/hunyuan15_{task}_{res}" + (f"_{suffix.replace('-', '_')}" if suffix else "")
                          + ".yaml",
        "description": f"{_DIT}, {what}, {res} (flow shift {shift})"
                       + (", step-distilled (meanflow timestep_r)" if suffix else ""),
        "preset": _preset(target, **preset),
        "options": dict(OPTIONS),
        "tiling": TILING15,
        "comfy_files": _comfy(res, task, suffix),
    }


MODELS = [
    _model("480p", "t2v", 5, cfg_distilled="diffusers"),
    _model("720p", "t2v", 9, cfg_distilled="release"),
    _model("480p", "i2v", 5, cfg_distilled="diffusers"),
    _model("720p", "i2v", 7, cfg_distilled="diffusers"),
    _model("480p", "i2v", 7, suffix="step-distilled", steps=8, guidance=1.0),
]
HUNYUAN15_IDS = frozenset(m["id"] for m in MODELS)
TARGET_SIZE = {m["id"]: 640 if "480p" in m["id"] else 960 for m in MODELS}
