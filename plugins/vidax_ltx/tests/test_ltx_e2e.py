"""End to end: tiny diffusers LTX-Video pipelines and the real `vidax run` CLI, from the same initial latents.

diffusers (PyTorch, fp32) is the reference: LTXPipeline for text-to-video (classifier-free guidance with guidance
rescale), LTXImageToVideoPipeline for image-to-video (latents holding the conditioning frame's tokens, per-token
timesteps, first frame fixed). vidax runs in a subprocess exactly as a user would, from the checkpoint the reference
saved with `save_pretrained`, with the decoder conditioned on a non-zero decode timestep and decode noise 0 (the
noise a non-zero scale mixes in is each engine's own draw).
"""

from __future__ import annotations

import numpy as np
import pytest

from vidax_core.testing.cli import run_args, run_e2e
from vidax_core.testing.parity import assert_run_matches
from vidax_core.testing.reference import reference_outputs, write_test_image
from vidax_core.testing.tiny.ltx import build_tiny_ltx_pipeline

pytestmark = pytest.mark.xdist_group("ltx_e2e")

PROMPT = "a small red fox runs in the snow"
NEGATIVE = "blurry, static, low quality"
SIZE, FRAMES, STEPS, FPS = 64, 17, 3, 24
DECODE_T = 0.05
# case -> (pipeline kind, guidance scale, guidance rescale, model id)
CASES = {
    "t2v-cfg-rescale": ("t2v", 3.0, 0.7, "ltx-video-13b-0.9.8-dev"),
    "t2v-no-guidance": ("t2v", 1.0, 0.0, "ltx-video-2b-0.9.8-distilled"),
    "i2v-cfg": ("i2v", 3.0, 0.0, "ltx-video-13b-0.9.8-distilled"),
}


def reference(pipe, kind, noise, guidance, rescale, image):
    from PIL import Image

    kwargs = dict(prompt=PROMPT, negative_prompt=NEGATIVE, height=SIZE, width=SIZE, num_frames=FRAMES,
                  num_inference_steps=STEPS, guidance_scale=guidance, guidance_rescale=rescale, frame_rate=FPS,
                  decode_timestep=DECODE_T, decode_noise_scale=0.0, max_sequence_length=16)
    if kind == "i2v":
        kwargs["image"] = Image.open(image).convert("RGB")
    return reference_outputs(pipe, noise, final_latents="output", **kwargs)


@pytest.mark.parametrize("case", list(CASES))
def test_cli_matches_diffusers(tmp_path, case):
    import torch

    kind, guidance, rescale, model_id = CASES[case]
    torch.manual_seed(0)
    pipe = build_tiny_ltx_pipeline(kind, seed=3)
    ckpt = tmp_path / "ckpt"
    pipe.save_pretrained(str(ckpt), safe_serialization=True)
    tokens = ((FRAMES - 1) // 8 + 1) * (SIZE // 32) ** 2
    noise = np.random.default_rng(0).standard_normal((1, tokens, 8)).astype(np.float32)
    image = write_test_image(tmp_path / "input.png") if kind == "i2v" else None

    ref_latents, ref_frames = reference(pipe, kind, noise, guidance, rescale, image)
    args = run_args(model_id, ckpt, PROMPT, NEGATIVE, image=image,
                    sampling=dict(num_steps=STEPS, height=SIZE, width=SIZE, num_frames=FRAMES, guidance_scale=guidance,
                                  max_sequence_length=16, scheduler=None),
                    options=dict(timesteps=None, frame_rate=FPS, guidance_rescale=rescale, decode_timestep=DECODE_T,
                                 decode_noise_scale=0.0, pipeline="ltx", multiscale=False))
    run = run_e2e(tmp_path, *args, noise=noise)
    latents, got_frames = run.latents, run.frames
    assert_run_matches(case, latents, got_frames, ref_latents, ref_frames, latent_shape=noise.shape,
                       frame_shape=(1, FRAMES, SIZE, SIZE, 3))
    if kind == "i2v":  # the conditioning frame's tokens never move
        first = (SIZE // 32) ** 2
        np.testing.assert_array_equal(latents[:, :first], noise[:, :first])
