"""Model ids of the SANA-Video family, their reference recipes and the pipelines' own call arguments.

The recipe is the model card's and diffusers' ``SanaVideoPipeline`` / ``SanaImageToVideoPipeline`` call defaults:
832x480, 81 frames at 16 fps, 50 steps of the checkpoint's scheduler (DPM-Solver++ on flow sigmas, shift 8),
guidance 6.0, 300 prompt tokens after the "complex human instruction", resolution binning on. The model card's
negative prompt is the preset's; its prompts end in " motion score: 30." (a part of the prompt text the model was
trained on: write it into ``prompt``). One id makes text-to-video and image-to-video: the task follows whether
``image:`` is given, as the two pipelines share the checkpoint.

``sana-video-2b-720p`` (``Efficient-Large-Model/SANA-Video_2B_720p_diffusers``) decodes with the LTX-2 video VAE
(AutoencoderKLLTX2Video), which this plugin does not build: it is not registered (docs/models/sana-video.md).
"""

from __future__ import annotations

from vidax_core import Option

NEGATIVE_PROMPT = (
    "A chaotic sequence with misshapen, deformed limbs in heavy motion blur, sudden disappearance, jump cuts, jerky "
    "movements, rapid shot changes, frames out of sync, inconsistent character shapes, temporal artifacts, jitter, and "
    "ghosting effects, creating a disorienting visual experience."
)

#: The pipelines' default ``complex_human_instruction``: its lines joined by newlines precede the prompt (not the
#: negative prompt) before Gemma-2 encodes it; the encoder's states of the instruction are then dropped.
COMPLEX_HUMAN_INSTRUCTION = [
    "Given a user prompt, generate an 'Enhanced prompt' that provides detailed visual descriptions suitable for video "
    "generation. Evaluate the level of detail in the user prompt:",
    "- If the prompt is simple, focus on adding specifics about colors, shapes, sizes, textures, motion, and temporal "
    "relationships to create vivid and dynamic scenes.",
    "- If the prompt is already detailed, refine and enhance the existing details slightly without overcomplicating.",
    "Here are examples of how to transform or refine prompts:",
    "- User Prompt: A cat sleeping -> Enhanced: A small, fluffy white cat slowly settling into a curled position, "
    "peacefully falling asleep on a warm sunny windowsill, with gentle sunlight filtering through surrounding pots of "
    "blooming red flowers.",
    "- User Prompt: A busy city street -> Enhanced: A bustling city street scene at dusk, featuring glowing street "
    "lamps gradually lighting up, a diverse crowd of people in colorful clothing walking past, and a double-decker "
    "bus smoothly passing by towering glass skyscrapers.",
    "Please generate only the enhanced description for the prompt below and avoid including any additional "
    "commentary or evaluations:",
    "User Prompt: ",
]

#: The pipelines' aspect-ratio bins (height / width -> (height, width)), chosen by the transformer's sample_size.
ASPECT_RATIO_480_BIN = {
    "0.5": (448, 896), "0.57": (480, 832), "0.68": (528, 768), "0.78": (560, 720), "1.0": (624, 624),
    "1.13": (672, 592), "1.29": (720, 560), "1.46": (768, 528), "1.67": (816, 496), "1.75": (832, 480),
    "2.0": (896, 448),
}
ASPECT_RATIO_720_BIN = {
    "0.5": (672, 1344), "0.57": (704, 1280), "0.68": (800, 1152), "0.78": (832, 1088), "1.0": (960, 960),
    "1.13": (1024, 896), "1.29": (1088, 832), "1.46": (1152, 800), "1.67": (1248, 736), "1.75": (1280, 704),
    "2.0": (1344, 672),
}
BINS_BY_SAMPLE_SIZE = {30: ("480p", ASPECT_RATIO_480_BIN), 22: ("720p", ASPECT_RATIO_720_BIN)}

SIZE_MULTIPLE = 32  # the pipelines' check_inputs: height and width (after binning) multiples of 32
TEMPORAL = 4  # the Wan VAE compresses time by 4: 4k + 1 frames

OPTIONS = {
    "use_resolution_binning": Option(True, bool, "sample at the aspect-ratio bin closest to sampling.height / width "
                                                 "(the transformer's sample_size picks the 480p or 720p table), then "
                                                 "resize and centre-crop the frames back"),
    "complex_human_instruction": Option(COMPLEX_HUMAN_INSTRUCTION, list[str] | None,
                                        "lines put before the prompt (not the negative prompt) for Gemma-2; "
                                        "null or [] encodes the prompt alone"),
    "clean_caption": Option(False, bool, "the pipelines' caption cleaning (BeautifulSoup and ftfy), which vidax "
                                         "does not run: only false is accepted"),
}

MODELS = [
    {
        "id": "sana-video-2b-480p",
        "tasks": ("t2v", "i2v"),
        "hub_repo": "Efficient-Large-Model/SANA-Video_2B_480p_diffusers",
        "default_config": "configs/sana_video_2b_480p.yaml",
        "description": "SANA-Video 2B, 480p: linear-attention DiT, Gemma-2 prompts, Wan2.1 VAE; text-to-video, and "
                       "image-to-video when image: is given",
        "preset": {
            "negative_prompt": NEGATIVE_PROMPT,
            "sampling": {"num_steps": 50, "guidance_scale": 6.0, "height": 480, "width": 832, "num_frames": 81,
                         "max_sequence_length": 300},
            "output": {"fps": 16},
        },
    },
]
