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
# The image-to-video pipeline's DEFAULT_PROMPT_TEMPLATE: an <image> placeholder (576 CLIP-L/14-336 features at token
# positions 5..581 once expanded) and an assistant header; crop_start 103.
I2V_TEMPLATE = (
    "<|start_header_id|>system<|end_header_id|>\n\n<image>\nDescribe the video by detailing the following aspects "
    "according to the reference image: "
    "1. The main content and theme of the video."
    "2. The color, shape, size, texture, quantity, text, and spatial relationships of the objects."
    "3. Actions, events, behaviors temporal relationships, physical movement changes of the objects."
    "4. background environment, light, style and atmosphere."
    "5. camera angles, movements, and transitions used in the video:<|eot_id|>\n\n"
    "<|start_header_id|>user<|end_header_id|>\n\n{}<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\n"
)
I2V_CROP_START = 103
I2V_IMAGE_EMB = (5, 581, 576)  # image_emb_start, image_emb_end, image_emb_len

OPTIONS = {
    "true_cfg_scale": Option(1.0, float, "real classifier-free guidance with the negative prompt when > 1, on top of "
                             "the embedded guidance (diffusers true_cfg_scale)"),
    "prompt_template": Option(None, str | None, "the Llama prompt template, with one {} for the prompt; null = the "
                              "pipeline's default (diffusers prompt_template['template'])"),
    "crop_start": Option(None, int | None, "template tokens dropped from the front of the Llama embeddings; null = "
                         "the default template's 95, I2V 103 (diffusers prompt_template['crop_start'])"),
}
I2V_OPTIONS = {
    **OPTIONS,
    "image_embed_interleave": Option(4, int, "I2V: keep every k-th image feature of the prompt (diffusers "
                                     "image_embed_interleave; the negative prompt's black image always uses 2, as "
                                     "the pipeline)"),
    "image_emb_start": Option(None, int | None, "I2V: first expanded position of the image features; null = 5 "
                              "(diffusers prompt_template['image_emb_start'])"),
    "image_emb_len": Option(None, int | None, "I2V: image features per image; null = 576 "
                            "(diffusers prompt_template['image_emb_len'])"),
}


def _preset() -> dict:
    return {
        "sampling": {"num_steps": 50, "guidance_scale": 6.0, "height": 720, "width": 1280, "num_frames": 129,
                     "max_sequence_length": 256},
        "output": {"fps": 24},
    }


# AutoencoderKLHunyuanVideo.enable_tiling's knobs (vidax_core.vae.hunyuan.HunyuanTiling): spatial, and temporal above
# tile_sample_min_num_frames (framewise)
TILING = {"enabled": bool, "framewise": bool, "tile_sample_min_height": int, "tile_sample_min_width": int,
          "tile_sample_min_num_frames": int, "tile_sample_stride_height": int, "tile_sample_stride_width": int,
          "tile_sample_stride_num_frames": int}

MODELS = [
    {
        "id": "hunyuanvideo-t2v-13b",
        "tasks": ("t2v",),
        "hub_repo": "hunyuanvideo-community/HunyuanVideo",
        "original_repo": "tencent/HunyuanVideo",
        "default_config": "configs/hunyuan_t2v_13b_720p.yaml",
        "description": "HunyuanVideo 1.0 13B text-to-video (20 double + 40 single blocks, width 3072), "
                       "Llama-3 + CLIP-L text, embedded guidance",
        "preset": _preset(),
        "options": OPTIONS,
        "tiling": TILING,
    },
    {
        "id": "hunyuanvideo-i2v-13b",
        "tasks": ("i2v",),
        "hub_repo": "hunyuanvideo-community/HunyuanVideo-I2V",
        "original_repo": "tencent/HunyuanVideo-I2V",
        "default_config": "configs/hunyuan_i2v_13b_720p.yaml",
        "description": "HunyuanVideo-I2V 13B image-to-video (token_replace first frame), LLaVA-Llama-3 image+text, "
                       "embedded guidance",
        "preset": _preset(),
        "options": I2V_OPTIONS,
        "tiling": TILING,
    },
]


def template_problems(template: str | None, crop_start: int | None, i2v: bool) -> list[str]:
    """``options.prompt_template`` must be a str.format text with exactly one bare ``{}`` (literal braces doubled),
    and ``options.crop_start`` must leave part of the text: it counts template tokens, and a token covers at
    least one byte, so it is bounded by the template's length in bytes (a larger value only pads the encoder)."""
    import string

    problems = []
    text = template if template is not None else (I2V_TEMPLATE if i2v else T2V_TEMPLATE)
    if template is not None:
        try:
            fields = [(name, spec, conv) for _, name, spec, conv in string.Formatter().parse(template)
                      if name is not None]
        except ValueError as exc:
            return [f"options.prompt_template is not a str.format text ({exc}): write literal braces as {{{{ and "
                    "}}, and put one {} where the prompt goes"]
        if fields != [("", "", None)]:
            problems.append("options.prompt_template must hold exactly one {} where the prompt goes (a bare {}: no "
                            "names, indices or format specs; literal braces as {{ and }})")
    if crop_start is not None:
        limit = len(text.replace("{}", "").encode("utf-8")) + 8  # a token is >= 1 byte; + BOS and special tokens
        if crop_start < 0:
            problems.append(f"options.crop_start must be >= 0, got {crop_start}")
        elif crop_start > limit:
            problems.append(f"options.crop_start must be from 0 to {limit} (the template's tokens before the prompt; "
                            f"it has at most that many), got {crop_start}")
    return problems
