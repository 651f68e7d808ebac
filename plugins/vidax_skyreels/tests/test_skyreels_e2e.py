"""End to end: tiny diffusers SkyReels-V2 pipelines and the real `vidax run` CLI, from the same noise.

The text-to-video and image-to-video pipelines from one `latents=` array; the diffusion-forcing pipeline
from its every draw (each
window's noise, each row's re-noising of the prefix) recorded while it runs and replayed by vidax from the
`.npz`: synchronous over three overlapping windows with `addnoise_condition`, and asynchronous causal blocks
over two windows.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from vidax_core.testing.cli import run_args, run_e2e
from vidax_core.testing.parity import assert_run_matches
from vidax_core.testing.reference import reference_outputs, save_pipeline, write_test_image
from vidax_skyreels.tiny import build_tiny_skyreels, no_ftfy

pytest.importorskip("torch")

PROMPT = "a small red fox runs in the snow"
NEGATIVE = "blurry, static, low quality"
SIZE, STEPS = 32, 3

# case -> (model id, frames, options)
DF_CASES = {
    "sync-3-windows-addnoise": (17, dict(base_num_frames=9, overlap_history=5, addnoise_condition=20.0)),
    "async-causal-2-windows": (21, dict(base_num_frames=13, overlap_history=5, ar_step=1, causal_block_size=2,
                                        addnoise_condition=20.0)),
}


def vidax_run(tmp_path, model_id, ckpt, frames, noise, options=None):
    sampling = dict(num_steps=STEPS, height=SIZE, width=SIZE, num_frames=frames, guidance_scale=5.0,
                    max_sequence_length=16, scheduler=None)
    args = run_args(model_id, ckpt, PROMPT, NEGATIVE, sampling=sampling, options=options or {}, output={"fps": 24})
    return run_e2e(tmp_path, *args, noise=noise)


def test_t2v_matches_diffusers(tmp_path):
    no_ftfy()
    pipe = build_tiny_skyreels("t2v", seed=3)
    ckpt = save_pipeline(pipe, tmp_path / "ckpt")
    noise = np.random.default_rng(0).standard_normal((1, 4, 3, SIZE // 8, SIZE // 8)).astype(np.float32)
    ref_latents, ref_frames = reference_outputs(
        pipe, noise, final_latents="output", prompt=PROMPT, negative_prompt=NEGATIVE, height=SIZE, width=SIZE,
        num_frames=9, num_inference_steps=STEPS, guidance_scale=5.0, max_sequence_length=16)
    run = vidax_run(tmp_path, "skyreels-v2-t2v-14b-540p", ckpt, 9, noise)
    assert_run_matches("t2v", run.latents, run.frames, ref_latents, ref_frames, latent_shape=noise.shape,
                       frame_shape=(1, 9, SIZE, SIZE, 3))


def test_i2v_matches_diffusers(tmp_path):
    """SkyReelsV2ImageToVideoPipeline: the image's VAE latents and mask on channels, CLIP image tokens through the
    image embedder and the added key/value cross-attention. Its attention finds the image tokens by assuming 512
    text tokens, so this case runs with max_sequence_length 512 (vidax passes them separately)."""
    from PIL import Image

    no_ftfy()
    pipe = build_tiny_skyreels("i2v", seed=4)
    ckpt = save_pipeline(pipe, tmp_path / "ckpt")
    image = write_test_image(tmp_path / "input.png")
    noise = np.random.default_rng(1).standard_normal((1, 4, 3, SIZE // 8, SIZE // 8)).astype(np.float32)
    ref_latents, ref_frames = reference_outputs(
        pipe, noise, final_latents="output", image=Image.open(image).convert("RGB"), prompt=PROMPT,
        negative_prompt=NEGATIVE, height=SIZE, width=SIZE, num_frames=9, num_inference_steps=STEPS,
        guidance_scale=5.0, max_sequence_length=512)
    sampling = dict(num_steps=STEPS, height=SIZE, width=SIZE, num_frames=9, guidance_scale=5.0,
                    max_sequence_length=512, scheduler=None)
    args = run_args("skyreels-v2-i2v-14b-540p", ckpt, PROMPT, NEGATIVE, image=image, sampling=sampling,
                    output={"fps": 24})
    run = run_e2e(tmp_path, *args, noise=noise)
    assert_run_matches("i2v", run.latents, run.frames, ref_latents, ref_frames, latent_shape=noise.shape,
                       frame_shape=(1, 9, SIZE, SIZE, 3))


@pytest.mark.parametrize("case", list(DF_CASES))
def test_diffusion_forcing_matches_diffusers(tmp_path, case):
    from diffusers.pipelines.skyreels_v2 import pipeline_skyreels_v2_diffusion_forcing as module

    from vidax_core.testing.draws import reference_windowed_outputs

    no_ftfy()
    frames, options = DF_CASES[case]
    pipe = build_tiny_skyreels("df", seed=4)
    ckpt = save_pipeline(pipe, tmp_path / "ckpt")
    ref_latents, ref_frames, draws = reference_windowed_outputs(
        pipe, module, prompt=PROMPT, negative_prompt=NEGATIVE, height=SIZE, width=SIZE, num_frames=frames,
        num_inference_steps=STEPS, guidance_scale=5.0, max_sequence_length=16, fps=24, **options)
    run = vidax_run(tmp_path, "skyreels-v2-df-1.3b-540p", ckpt, frames, draws, options)
    latent_frames = (frames - 1) // 4 + 1
    assert_run_matches(case, run.latents, run.frames, ref_latents, ref_frames,
                       latent_shape=(1, 4, latent_frames, SIZE // 8, SIZE // 8), frame_shape=(1, frames, SIZE, SIZE, 3))
    assert run.metrics["num_windows"] == len(run.metrics["windows"]) > 1
    assert os.path.getsize(tmp_path / "run.mp4") > 0
