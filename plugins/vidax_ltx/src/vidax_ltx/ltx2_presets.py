"""Model ids of LTX-2.x and their reference recipes (diffusers 0.42.1 ``LTX2Pipeline``; JAX-free).

Dev (``ltx-2.5-22b-dev``, ``ltx-2-19b-dev``): the pipeline's call defaults, 30 flow-Euler steps over
``linspace(1, 1/N, N)`` with dynamic shifting and ``shift_terminal`` 0.1 (the published diffusers ``scheduler/`` is
set up for the distilled model, so the dev ids switch both on over it), classifier-free guidance 3 (audio 7),
guidance rescale 0.7, spatio-temporal guidance 1 at block 28 (29 for LTX-2.0, as the pipeline's docs recommend) and
modality-isolation guidance 3, 512x768 at 24 fps, 1024 text tokens. Distilled (``ltx-2.5-22b-distilled``): the 8
distilled sigmas, no guidance of any kind. LTX-2.0 has no duration head, so its ``num_frames`` defaults to the
pipeline's 121; the LTX-2.5 ids leave it unset: the checkpoint's ``duration_head/`` predicts it from the prompt
(``options.min_seconds`` / ``max_seconds`` bound it), and a checkpoint without one needs ``sampling.num_frames``.

With ``image:`` a run is ``LTX2ImageToVideoPipeline``'s: the image, H.264-compressed at ``image_crf``, becomes the
first latent frame, held clean.

Every ``LTX2Pipeline`` call argument that shapes the result and is not a ``sampling.*`` key is an option under its
diffusers name; an audio scale left at null (or 0, as the pipeline's ``or`` reads it) takes the video one.
"""

from __future__ import annotations

from vidax_core.registry import Option

#: ``DISTILLED_SIGMA_VALUES`` of ``diffusers.pipelines.ltx2.utils`` (the scheduler appends the final 0).
DISTILLED_SIGMAS = [1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875]
#: ``STAGE_2_DISTILLED_SIGMA_VALUES``: the second stage of the distilled two-stage recipe.
STAGE_2_SIGMAS = [0.909375, 0.725, 0.421875]
#: The dev recipe's flow-Euler settings over the checkpoint's scheduler config.
DEV_SCHEDULER = {"use_dynamic_shifting": True, "shift_terminal": 0.1}
#: ``image_crf`` defaults (``diffusers.pipelines.ltx2.utils``): LTX-2.5 (a Gemma-4 prompt encoder) and earlier.
IMAGE_CRF_25, IMAGE_CRF = 18, 33
#: The pipeline's ``calculate_shift`` defaults where the scheduler config lacks a key.
SHIFT_DEFAULTS = {"base_image_seq_len": 1024, "max_image_seq_len": 4096, "base_shift": 0.95, "max_shift": 2.05}

#: ``options.video_decoder``: the convolutional VAE or the LTX-2.5 diffusion decoder.
VIDEO_DECODERS = ("vae", "diffusion")

_SCALE = float | None
OPTIONS = {
    "frame_rate": Option(24.0, float, "frames per second of the video: sets the audio length and, divided by "
                         "motion_speed, the RoPE time axis (diffusers frame_rate)", load_bound=True),
    "motion_speed": Option(1.0, float, "motion relative to real time: the RoPE is conditioned on frame_rate / "
                           "motion_speed (diffusers motion_speed)"),
    "guidance_rescale": Option(0.7, float, "guidance rescale of the video stream, in the clean-sample space "
                               "(diffusers guidance_rescale)"),
    "stg_scale": Option(1.0, float, "spatio-temporal guidance of the video stream (diffusers stg_scale); 0 = off"),
    "modality_scale": Option(3.0, float, "modality-isolation guidance of the video stream, against a pass without "
                             "the audio<->video attention (diffusers modality_scale); 1 = off"),
    "audio_guidance_scale": Option(7.0, _SCALE, "classifier-free guidance of the audio stream; null or 0 = "
                                   "sampling.guidance_scale (diffusers audio_guidance_scale)"),
    "audio_stg_scale": Option(1.0, _SCALE, "spatio-temporal guidance of the audio stream; null or 0 = stg_scale "
                              "(diffusers audio_stg_scale)"),
    "audio_modality_scale": Option(3.0, _SCALE, "modality-isolation guidance of the audio stream; null or 0 = "
                                   "modality_scale (diffusers audio_modality_scale)"),
    "audio_guidance_rescale": Option(0.7, _SCALE, "guidance rescale of the audio stream; null or 0 = "
                                     "guidance_rescale (diffusers audio_guidance_rescale)"),
    "spatio_temporal_guidance_blocks": Option([28], list[int] | None, "blocks (0-based) whose self-attention the "
                                              "STG pass perturbs (diffusers spatio_temporal_guidance_blocks)"),
    "noise_scale": Option(0.0, float, "share of fresh noise mixed into given latents (sampling.initial_noise) "
                          "before denoising (diffusers noise_scale)"),
    "use_cross_timestep": Option(True, bool, "drive each stream's cross-modal AdaLN by the other stream's sigma: "
                                 "true for LTX-2.3/2.5, false for LTX-2.0 (diffusers use_cross_timestep)"),
    "sigmas": Option(None, list[float] | None, "explicit sigmas instead of linspace(1, 1/N, N) (diffusers sigmas; "
                     "the distilled model's list)"),
    "image_crf": Option(None, int | None, "H.264 CRF the image: is re-compressed at before encoding (image-to-video); "
                        "null = the model's (18 for LTX-2.5, 33 before), 0 = off (diffusers image_crf)"),
    "decode_timestep": Option(0.0, float, "timestep a timestep-conditioned video VAE decodes at (diffusers "
                              "decode_timestep)"),
    "decode_noise_scale": Option(None, float | None, "share of fresh noise mixed into the latents before a "
                                 "timestep-conditioned decode; null = decode_timestep (diffusers "
                                 "decode_noise_scale)"),
    "min_seconds": Option(1.0, float, "lower bound of the duration head's prediction when sampling.num_frames is "
                          "unset (diffusers min_seconds)"),
    "max_seconds": Option(20.0, float, "upper bound of the duration head's prediction when sampling.num_frames is "
                          "unset (diffusers max_seconds)"),
    "two_stage": Option(False, bool, "the official distilled recipe: a first stage at half the size, the LTX-2 latent "
                        "upsampler (x2), a second stage at the size with options.stage_2_sigmas"),
    "stage_2_sigmas": Option(list(STAGE_2_SIGMAS), list[float], "sigmas of the second stage (diffusers "
                             "STAGE_2_DISTILLED_SIGMA_VALUES)"),
    "stage_2_noise_scale": Option(None, float | None, "noise mixed into the upsampled latents before the second "
                                  "stage (the second call's noise_scale); null = the first stage-2 sigma"),
    "spatial_upsampler": Option(None, str | None, "the LTX-2 latent upsampler of options.two_stage (a diffusers "
                                "latent_upsampler folder or file); null = the checkpoint's latent_upsampler/"),
    "video_decoder": Option("vae", str, "vae: the convolutional video VAE (vae/); diffusion: the LTX-2.5 diffusion "
                            "decoder (diffusion_decoder/, diffusers LTX2VideoDiffusionDecodePipeline)",
                            choices=VIDEO_DECODERS),
}

_HUB25 = "Lightricks/LTX-2.5-Diffusers"
#: ComfyUI's LTX-2.0 files (``ModelSpec.comfy_files``): Lightricks' release file in ``checkpoints/`` (bf16 or fp8;
#: it holds every part but the prompt encoder) and Comfy-Org's Gemma-3 12B (``Comfy-Org/ltx-2`` ``split_files/
#: text_encoders/``, bf16 or fp8-scaled).
_RELEASE_20 = ("ltx-2-19b-dev.safetensors", "ltx-2-19b-dev-fp8.safetensors")
COMFY_20 = {"transformer": _RELEASE_20, "vae": _RELEASE_20,
            "text_encoder": ("gemma_3_12b_it.safetensors", "gemma_3_12b_it_bf16.safetensors",
                             "gemma_3_12b_it_fp8_scaled.safetensors")}


def _preset(*, frames: int | None, steps: int, guidance: float, **options) -> dict:
    sampling = {"num_steps": steps, "guidance_scale": guidance, "height": 512, "width": 768,
                "max_sequence_length": 1024}
    if frames is not None:
        sampling["num_frames"] = frames
    return {"negative_prompt": "", "sampling": sampling, "output": {"fps": 24}, "options": options}


_DISTILLED = dict(sigmas=DISTILLED_SIGMAS, guidance_rescale=0.0, stg_scale=0.0, modality_scale=1.0,
                  audio_guidance_scale=1.0, audio_stg_scale=0.0, audio_modality_scale=1.0,
                  audio_guidance_rescale=0.0)

MODELS = [
    {"id": "ltx-2.5-22b-dev", "tasks": ("t2v", "i2v"), "hub_repo": _HUB25,
     "original_repo": "Lightricks/LTX-2.5", "default_config": "configs/ltx25_22b_dev.yaml",
     "description": "LTX-2.5 22B dev: joint video + audio, Gemma-4 prompt encoder (diffusers transformer_full/)",
     "preset": _preset(frames=None, steps=30, guidance=3.0), "predicts": ("num_frames",)},
    {"id": "ltx-2.5-22b-distilled", "tasks": ("t2v", "i2v"), "hub_repo": _HUB25,
     "original_repo": "Lightricks/LTX-2.5", "default_config": "configs/ltx25_22b_distilled.yaml",
     "description": "LTX-2.5 22B distilled: 8 fixed sigmas, no guidance (diffusers transformer/)",
     "preset": _preset(frames=None, steps=len(DISTILLED_SIGMAS), guidance=1.0, **_DISTILLED),
     "predicts": ("num_frames",)},
    {"id": "ltx-2-19b-dev", "tasks": ("t2v", "i2v"), "hub_repo": "Lightricks/LTX-2",
     "original_repo": "Lightricks/LTX-2/ltx-2-19b-dev.safetensors", "default_config": "configs/ltx2_19b_dev.yaml",
     "comfy_files": COMFY_20,
     "description": "LTX-2.0 19B dev: joint video + audio, Gemma-3 prompt encoder",
     "preset": _preset(frames=121, steps=30, guidance=3.0, use_cross_timestep=False,
                       spatio_temporal_guidance_blocks=[29])},
]
LTX2_IDS = frozenset(m["id"] for m in MODELS)
DEV_IDS = frozenset(i for i in LTX2_IDS if i.endswith("-dev"))
