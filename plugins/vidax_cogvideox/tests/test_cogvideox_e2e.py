"""End to end: tiny diffusers CogVideoX pipelines and the real `vidax run` CLI, from the same initial latents.

diffusers (PyTorch, fp32) is the reference: CogVideoXPipeline for text-to-video (2B-like sin-cos positions with
snr shift 3, 5B-like RoPE with dynamic cosine guidance, 1.5 with its temporal patch and front pad frame;
the 2B case decodes with tiling on, the same
``enable_tiling`` knobs on both sides) and
CogVideoXImageToVideoPipeline for image-to-video (5B-I2V with its learned positions, 1.5-I2V with ofs and the
inverted latent scale), all with the hub's CogVideoX DDIM config. vidax runs in a subprocess exactly as a user
would, from the checkpoint the reference saved with `save_pretrained`. The I2V image latent is a VAE posterior
sample each engine draws itself; the tiny VAE's posterior std is 3e-7, so both draws equal the mean.
"""

from __future__ import annotations

import numpy as np
import pytest

from vidax_core.testing.cli import run_args, run_e2e
from vidax_core.testing.parity import assert_run_matches
from vidax_core.testing.reference import reference_outputs, write_test_image
from vidax_core.testing.tiny.cogvideox import LATENT_CHANNELS, TEXT_LEN, build_tiny_cogvideox_pipeline, save_pipeline

pytestmark = pytest.mark.xdist_group("cogvideox_e2e")

PROMPT = "a small red fox runs in the snow"
NEGATIVE = "blurry, static, low quality"
SIZE, FRAMES, STEPS = 32, 9, 2
# Tiles of 3 x 4 latents every 2 x 3 latents, blended over 8 pixels: 2 x 2 tiles over 32 x 32 frames. (At this size
# enable_tiling()'s defaults, 16 x 24 pixel tiles, step by less than they keep, and diffusers then returns 50 x 36
# frames; vidax reproduces that too, but the test uses tiles that tile.)
TILES = dict(tile_sample_min_height=24, tile_sample_min_width=32, tile_overlap_factor_height=1 / 3,
             tile_overlap_factor_width=1 / 4)
# case -> (tiny variant, model id, guidance scale, dynamic cfg, tiled decode)
CASES = {
    "2b-t2v-tiled-decode": ("2b", "cogvideox-2b", 6.0, False, True),
    "5b-t2v-dynamic-cfg": ("5b", "cogvideox-5b", 6.0, True, False),
    "5b-i2v": ("5b-i2v", "cogvideox-5b-i2v", 6.0, False, False),
    "1.5-t2v": ("1.5", "cogvideox1.5-5b", 6.0, False, False),
    "1.5-i2v": ("1.5-i2v", "cogvideox1.5-5b-i2v", 4.0, True, False),
}


def reference(pipe, noise, guidance, dynamic, image, steps=STEPS):
    """The pipeline's decoded frames and its ``output_type="latent"`` result (the final latents, taken from the
    last step's callback so that one run gives both)."""
    from PIL import Image

    kwargs = dict(prompt=PROMPT, negative_prompt=NEGATIVE, height=SIZE, width=SIZE, num_frames=FRAMES,
                  num_inference_steps=steps, guidance_scale=guidance, use_dynamic_cfg=dynamic,
                  max_sequence_length=TEXT_LEN)
    if image is not None:
        kwargs["image"] = Image.open(image).convert("RGB")
    return reference_outputs(pipe, noise, **kwargs)


def latent_frames(variant: str) -> int:
    f = (FRAMES - 1) // 4 + 1
    return f + f % 2 if variant.startswith("1.5") else f


@pytest.mark.parametrize("case", list(CASES))
def test_cli_matches_diffusers(tmp_path, case):
    import torch

    variant, model_id, guidance, dynamic, tiled = CASES[case]
    torch.manual_seed(0)
    pipe = build_tiny_cogvideox_pipeline(variant, seed=3)
    if tiled:
        pipe.vae.enable_tiling(**TILES)
    ckpt = tmp_path / "ckpt"
    save_pipeline(pipe, ckpt)  # the hub layout: tokenizer/spiece.model, no tokenizer.json
    shape = (1, latent_frames(variant), LATENT_CHANNELS, SIZE // 8, SIZE // 8)
    noise = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    image = write_test_image(tmp_path / "input.png") if variant.endswith("i2v") else None

    ref_latents, ref_frames = reference(pipe, noise, guidance, dynamic, image)
    args = run_args(model_id, ckpt, PROMPT, NEGATIVE, image=image,
                    sampling=dict(num_steps=STEPS, height=SIZE, width=SIZE, num_frames=FRAMES, guidance_scale=guidance,
                                  max_sequence_length=TEXT_LEN),
                    options=dict(use_dynamic_cfg=dynamic), vae=dict(tiling=TILES if tiled else False))
    run = run_e2e(tmp_path, *args, noise=noise)
    assert_run_matches(case, run.latents, run.frames, ref_latents, ref_frames, latent_shape=noise.shape,
                       frame_shape=(1, FRAMES, SIZE, SIZE, 3))


def vidax_step_noise(seed: int, steps: int, shape) -> list[np.ndarray]:
    """The per-step noise a stochastic sampler gets in ``vidax run`` (the runner's seeded draw: key(seed) folded
    with 1, then with the step index), so the reference can be fed the same draws."""
    import jax

    key = jax.random.fold_in(jax.random.key(seed), 1)
    return [np.asarray(jax.random.normal(jax.random.fold_in(key, i), tuple(shape), np.float32)) for i in range(steps)]


def test_dpm_with_dynamic_cfg_matches_diffusers(tmp_path, monkeypatch):
    """The official 5B demo's sampler (CogVideoX DPM, stochastic, second order in the middle steps) with dynamic
    guidance, against CogVideoXPipeline with the same scheduler config, fed vidax's own per-step noise (diffusers
    draws twice in a second-order step and uses the second draw: both are this step's noise)."""
    import torch
    from diffusers import CogVideoXDPMScheduler
    from diffusers.schedulers import scheduling_dpm_cogvideox as dpm_mod

    steps, seed = 4, 0
    torch.manual_seed(0)
    pipe = build_tiny_cogvideox_pipeline("5b", seed=3)
    pipe.scheduler = CogVideoXDPMScheduler.from_config(pipe.scheduler.config)
    ckpt = tmp_path / "ckpt"
    save_pipeline(pipe, ckpt)
    shape = (1, latent_frames("5b"), LATENT_CHANNELS, SIZE // 8, SIZE // 8)
    noise = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    draws = vidax_step_noise(seed, steps, shape)
    index = {"i": -1}
    step = pipe.scheduler.step

    def counting_step(*a, **k):
        index["i"] += 1
        return step(*a, **k)

    monkeypatch.setattr(pipe.scheduler, "step", counting_step)
    monkeypatch.setattr(dpm_mod, "randn_tensor",
                        lambda shape_, **k: torch.from_numpy(draws[index["i"]].copy()).reshape(shape_))
    ref_latents, ref_frames = reference(pipe, noise, 6.0, True, None, steps)
    assert index["i"] == steps - 1
    run = run_e2e(tmp_path, *run_args("cogvideox-5b", ckpt, PROMPT, NEGATIVE,
                                      sampling=dict(num_steps=steps, height=SIZE, width=SIZE, num_frames=FRAMES,
                                                    guidance_scale=6.0, max_sequence_length=TEXT_LEN, seed=seed),
                                      options=dict(use_dynamic_cfg=True, scheduler_class="CogVideoXDPMScheduler")),
                  noise=noise)
    assert run.metrics["sampler"] == "cogvideox_dpm" and run.metrics["num_steps"] == steps
    assert_run_matches("5b-t2v-dpm-dynamic-cfg", run.latents, run.frames, ref_latents, ref_frames,
                       latent_shape=shape, frame_shape=(1, FRAMES, SIZE, SIZE, 3))
