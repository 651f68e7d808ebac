"""End to end: a tiny diffusers HunyuanVideoPipeline and the real `vidax run` CLI, from the same noise.

diffusers (PyTorch, fp32) is the reference; vidax runs in a subprocess exactly as a user would, from the folder the
reference saved with `save_pretrained`: embedded guidance alone, and with real classifier-free guidance
(``true_cfg_scale`` with a negative prompt). The default prompt template and crop_start 95 are used as they are.
"""

from __future__ import annotations

import numpy as np
import pytest

from vidax_core.testing.cli import run_args, run_e2e
from vidax_core.testing.parity import assert_run_matches
from vidax_core.testing.reference import reference_outputs
from vidax_core.testing.tiny.hunyuan import save_tiny_hunyuan

pytestmark = pytest.mark.xdist_group("hunyuan_e2e")

PROMPT = "a red car drives through the city streets at night"
NEGATIVE = "blurry, static, low quality"
# TEXT: the tiny tokenizer spends ~340 tokens on the template (crop_start 95 of them), so the prompt fits.
H, W, FRAMES, STEPS, GUIDANCE, TEXT = 32, 48, 9, 3, 6.0, 300
CASES = {"embedded": 1.0, "true_cfg": 3.0}


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return save_tiny_hunyuan(tmp_path_factory.mktemp("hunyuan") / "ckpt", seed=3)


def reference(ckpt_dir, noise, true_cfg):
    from diffusers import HunyuanVideoPipeline

    pipe = HunyuanVideoPipeline.from_pretrained(str(ckpt_dir))
    return reference_outputs(pipe, noise, prompt=PROMPT, negative_prompt=NEGATIVE, height=H, width=W,
                             num_frames=FRAMES, num_inference_steps=STEPS, guidance_scale=GUIDANCE,
                             true_cfg_scale=true_cfg, max_sequence_length=TEXT)


def run_vidax(tmp_path, ckpt_dir, true_cfg, noise, extra=()):
    run = run_e2e(tmp_path, *run_args("hunyuanvideo-t2v-13b", ckpt_dir, PROMPT, NEGATIVE,
                                      sampling=dict(num_steps=STEPS, height=H, width=W, num_frames=FRAMES,
                                                    guidance_scale=GUIDANCE, max_sequence_length=TEXT),
                                      options=dict(true_cfg_scale=true_cfg)),
                  *extra, noise=noise)
    return run.latents, run.frames


@pytest.mark.parametrize("case", list(CASES))
def test_cli_matches_diffusers(tmp_path, ckpt, case):
    noise = np.random.default_rng(0).standard_normal((1, 4, (FRAMES - 1) // 4 + 1, H // 8, W // 8)).astype(np.float32)
    ref_latents, ref_frames = reference(ckpt, noise, CASES[case])
    latents, frames = run_vidax(tmp_path, ckpt, CASES[case], noise)
    assert_run_matches(case, latents, frames, ref_latents, ref_frames, latent_shape=noise.shape,
                       frame_shape=(1, FRAMES, H, W, 3))
