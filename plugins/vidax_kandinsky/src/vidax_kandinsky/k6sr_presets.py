"""Model ids of Kandinsky 6's video super-resolution stage (diffusers ``Kandinsky6SRPipeline``) and their reference
recipes (the pipeline's call defaults and the two VSR model cards).

* ``kandinsky6-vsr`` (``Kandinsky-6.0-VSR-5s-Diffusers``): the flow-matching SR DiT (1.4B), 4 Euler steps per
  tile (shift 5);
* ``kandinsky6-vsr-distill`` (``Kandinsky-6.0-VSR-distilled2steps-5s-Diffusers``): PiFlow-distilled, 2 steps.

Both: video in (``video:``, an mp4 or a ``.npy`` of float frames), video out at ``options.resolution_scale`` 2.25
(2 or 4), the same K-VAE and latent upscaler bank, no prompt and no guidance. ``sampling.height`` / ``width`` /
``num_frames`` describe the input clip (480 x 864 x 121, the generation ids' output); the output is that size
times the scale (2.25: 1088 x 1952).
"""

from __future__ import annotations

from vidax_core import Option

from .k6_presets import FRAME_RATE

HUB = "kandinskylab/Kandinsky-6.0-VSR-{}-Diffusers"
_LABEL = ("Kandinsky 6 VSR 1.4B (NABLA over 512-pixel tiles), K-VAE and latent upscalers, video super-resolution "
          "x2 / x2.25 / x4")

OPTIONS = {
    "resolution_scale": Option(2.25, float, "the total upscale: 2, 2.25 (a 1.125x bilinear pre-upscale, then 2x) "
                                            "or 4 (the pipeline's resolution_scale)", choices=(2.0, 2.25, 4.0),
                               load_bound=True),
    "lq_noise_scale": Option(0.7, float, "the share of Gaussian noise mixed (variance preserving) into the "
                                         "low-quality tile latents, in (0, 1]"),
    "min_overlap": Option(0.2, float, "the least overlap of neighbouring tiles as a fraction of a tile, in [0, 1)",
                          load_bound=True),
    "tiles_batch_size": Option(1, int, "tiles denoised per DiT call (each call draws its own noise)",
                               load_bound=True),
}


def recipe(distilled: bool) -> dict:
    return {
        "sampling": {"num_steps": 2 if distilled else 4, "guidance_scale": 1.0, "height": 480, "width": 864,
                     "num_frames": 121, "max_sequence_length": 1},
        "output": {"fps": int(FRAME_RATE)},
    }


def _model(distilled: bool) -> dict:
    slug = "kandinsky6-vsr-distill" if distilled else "kandinsky6-vsr"
    what = "PiFlow-distilled, 2 steps per tile" if distilled else "4 steps per tile"
    return {"id": slug, "tasks": ("v2v",), "hub_repo": HUB.format("distilled2steps-5s" if distilled else "5s"),
            "default_config": f"configs/{slug.replace('-', '_')}.yaml",
            "description": f"{_LABEL} ({what})", "preset": recipe(distilled)}


MODELS = [_model(False), _model(True)]
SR_IDS = frozenset(m["id"] for m in MODELS)
