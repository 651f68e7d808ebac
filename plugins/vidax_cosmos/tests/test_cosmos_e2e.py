"""End to end: a tiny diffusers Cosmos2_5_PredictBasePipeline and the real `vidax run` CLI, from the same noise.

diffusers (PyTorch, fp32) is the reference, with its guardrail replaced by a no-op and torchvision's two calls
stubbed (:mod:`vidax_cosmos.tiny`). vidax runs in a subprocess exactly as a user would, from the folder the
reference saved with `save_pretrained`: text-to-world, image-to-world (an image of another size, nearest-resized
as the pipeline does) and video-to-world (the last 5 frames of an mp4, two conditioning latent frames).
"""

from __future__ import annotations

import numpy as np
import pytest

from vidax_core.testing.cli import run_args, run_e2e
from vidax_core.testing.parity import assert_run_matches
from vidax_core.testing.reference import reference_outputs
from vidax_cosmos.tiny import save_tiny_cosmos
from vidax_cosmos.bench_reference import stub_torchvision

pytestmark = pytest.mark.xdist_group("cosmos_e2e")

PROMPT = "a red car drives through the city streets at night"
NEGATIVE = "blurry, static, low quality"
H, W, FRAMES, STEPS, GUIDANCE, TEXT = 32, 48, 9, 3, 3.0, 128
CASES = ("t2w", "i2w", "v2w", "i2w-noguidance-cft-off")


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    import torch

    torch.manual_seed(0)
    return save_tiny_cosmos(tmp_path_factory.mktemp("cosmos") / "ckpt", seed=3)


def write_inputs(folder):
    from PIL import Image

    from vidax_core.io.video import write_mp4

    rng = np.random.default_rng(1)
    pixels = (rng.random((40, 56, 3)) * 255).astype(np.uint8)
    pixels[:20] = pixels[:20] // 2 + 100
    Image.fromarray(pixels).save(folder / "input.png")
    clip = np.clip(rng.random((7, 40, 56, 3)) * 0.5 + np.linspace(0, 0.5, 7)[:, None, None, None], 0, 1)
    write_mp4(str(folder / "input.mp4"), clip.astype(np.float32), 8)
    return folder / "input.png", folder / "input.mp4"


def reference(ckpt_dir, case, noise, image, clip, guidance=GUIDANCE, **extra):
    from diffusers.pipelines.cosmos.pipeline_cosmos2_5_predict import Cosmos2_5_PredictBasePipeline
    from PIL import Image

    from vidax_core.io.clip import read_video
    from vidax_cosmos.bench_reference import NoGuardrail

    stub_torchvision()
    pipe = Cosmos2_5_PredictBasePipeline.from_pretrained(str(ckpt_dir), safety_checker=NoGuardrail())
    kwargs = dict(prompt=PROMPT, negative_prompt=NEGATIVE, height=H, width=W, num_frames=FRAMES,
                  num_inference_steps=STEPS, guidance_scale=guidance, max_sequence_length=TEXT, **extra)
    if case.startswith("i2w"):
        kwargs["image"] = Image.open(image).convert("RGB")
    if case == "v2w":
        frames = np.round(read_video(str(clip)) * 255).astype(np.uint8)
        kwargs["video"] = [Image.fromarray(f) for f in frames]
    return reference_outputs(pipe, noise, **kwargs)


def run_vidax(tmp_path, ckpt_dir, case, image, clip, noise, model_id="cosmos-predict2.5-2b", extra=()):
    args = run_args(model_id, ckpt_dir, PROMPT, NEGATIVE, image=image if case.startswith("i2w") else None,
                    sampling=dict(num_steps=STEPS, height=H, width=W, num_frames=FRAMES, guidance_scale=GUIDANCE,
                                  max_sequence_length=TEXT))
    args += extra
    if case == "v2w":
        args.append(f"video={clip}")
    run = run_e2e(tmp_path, *args, noise=noise)
    return run.latents, run.frames


@pytest.mark.parametrize("case", CASES)
def test_cli_matches_diffusers(tmp_path, ckpt, case):
    image, clip = write_inputs(tmp_path)
    noise = np.random.default_rng(0).standard_normal((1, 4, (FRAMES - 1) // 4 + 1, H // 8, W // 8)).astype(np.float32)
    if case == "i2w-noguidance-cft-off":  # one pass; the conditioning frame gets the current sigma too
        ref_latents, ref_frames = reference(ckpt, case, noise, image, clip, guidance=1.0,
                                            conditional_frame_timestep=-1.0)
        latents, frames = run_vidax(tmp_path, ckpt, case, image, clip, noise, extra=(
            "sampling.guidance_scale=1.0", "options.conditional_frame_timestep=-1.0"))
    else:
        ref_latents, ref_frames = reference(ckpt, case, noise, image, clip)
        latents, frames = run_vidax(tmp_path, ckpt, case, image, clip, noise)
    assert_run_matches(case, latents, frames, ref_latents, ref_frames, latent_shape=noise.shape,
                       frame_shape=(1, FRAMES, H, W, 3))
