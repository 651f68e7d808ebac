"""End to end image-to-video: a tiny diffusers HunyuanVideoImageToVideoPipeline (``token_replace``, a tiny LLaVA
text encoder) and the real `vidax run` CLI from the same noise, with true CFG (the negative prompt gets a black
image and interleave 2, as the pipeline). The tiny template keeps the reference's structure (system turn with the
<image> placeholder, user turn, assistant header) on one line; its crop_start and image positions are computed
from the tiny tokenizer the same way the published numbers (103; 5, 576) follow from Llama-3's."""

from __future__ import annotations

import numpy as np
import pytest

from vidax_core.testing.cli import run_args, run_e2e
from vidax_core.testing.parity import assert_run_matches
from vidax_core.testing.reference import reference_outputs, write_test_image
from vidax_core.testing.tiny.hunyuan import I2V_IMAGE, save_tiny_hunyuan_i2v

pytestmark = pytest.mark.xdist_group("hunyuan_e2e_i2v")

PROMPT = "a red car drives through the city streets at night"
NEGATIVE = "blurry, static, low quality"
TEMPLATE = ("<|start_header_id|>system<|end_header_id|><image> Describe the video according to the image.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>{}<|eot_id|><|start_header_id|>assistant<|end_header_id|>")
H, W, FRAMES, STEPS, GUIDANCE, TRUE_CFG, TEXT = 32, 48, 9, 3, 6.0, 3.0, 40
N_IMAGE = (I2V_IMAGE // 14) ** 2


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return save_tiny_hunyuan_i2v(tmp_path_factory.mktemp("hunyuan_i2v") / "ckpt", seed=3)


def template_numbers(ckpt_dir):
    """(crop_start, image_emb_start) of TEMPLATE for the tiny tokenizer: tokens before the prompt, and the
    <image> placeholder's index (with BOS)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(ckpt_dir / "tokenizer"))
    ids = tok(TEMPLATE.split("{}")[0])["input_ids"]
    return len(ids), ids.index(tok.convert_tokens_to_ids("<image>"))


def reference(ckpt_dir, noise, image, crop, start):
    from diffusers import HunyuanVideoImageToVideoPipeline
    from PIL import Image

    pipe = HunyuanVideoImageToVideoPipeline.from_pretrained(str(ckpt_dir))
    tpl = {"template": TEMPLATE, "crop_start": crop, "image_emb_start": start, "image_emb_end": start + N_IMAGE,
           "image_emb_len": N_IMAGE}
    return reference_outputs(pipe, noise, image=Image.open(image).convert("RGB"), prompt=PROMPT,
                             negative_prompt=NEGATIVE, height=H, width=W, num_frames=FRAMES, num_inference_steps=STEPS,
                             guidance_scale=GUIDANCE, true_cfg_scale=TRUE_CFG, max_sequence_length=TEXT,
                             prompt_template=tpl)


def run_vidax(tmp_path, ckpt_dir, image, crop, start, noise):
    run = run_e2e(tmp_path, *run_args("hunyuanvideo-i2v-13b", ckpt_dir, PROMPT, NEGATIVE, image=image,
                                      sampling=dict(num_steps=STEPS, height=H, width=W, num_frames=FRAMES,
                                                    guidance_scale=GUIDANCE, max_sequence_length=TEXT),
                                      options=dict(true_cfg_scale=TRUE_CFG, crop_start=crop, image_emb_start=start,
                                                   image_emb_len=N_IMAGE)),
                  f"options.prompt_template='{TEMPLATE}'", noise=noise)
    return run.latents, run.frames


def test_cli_matches_diffusers_i2v(tmp_path, ckpt):
    image = write_test_image(tmp_path / "input.png")
    crop, start = template_numbers(ckpt)
    noise = np.random.default_rng(0).standard_normal((1, 4, (FRAMES - 1) // 4 + 1, H // 8, W // 8)).astype(np.float32)
    ref_latents, ref_frames = reference(ckpt, noise, image, crop, start)
    latents, frames = run_vidax(tmp_path, ckpt, image, crop, start, noise)
    assert_run_matches(f"i2v, crop_start {crop}, image at {start}", latents, frames, ref_latents, ref_frames,
                       latent_shape=noise.shape,
                       frame_shape=(1, FRAMES, H, W, 3))
