"""End to end: tiny diffusers CogVideoX pipelines and the real `vidax run` CLI, from the same initial latents.

diffusers (PyTorch, fp32) is the reference: CogVideoXPipeline for text-to-video (2B-like sin-cos positions with
snr shift 3, 5B-like RoPE with dynamic cosine guidance, 1.5 with its temporal patch and front pad frame; the 2B case decodes with tiling on, the same
``enable_tiling`` knobs on both sides) and
CogVideoXImageToVideoPipeline for image-to-video (5B-I2V with its learned positions, 1.5-I2V with ofs and the
inverted latent scale), all with the hub's CogVideoX DDIM config. vidax runs in a subprocess exactly as a user
would, from the checkpoint the reference saved with `save_pretrained`. The I2V image latent is a VAE posterior
sample each engine draws itself; the tiny VAE's posterior std is 3e-7, so both draws equal the mean.
"""

from __future__ import annotations

import numpy as np
import pytest

from vidax_core.testing.cli import vidax
from vidax_core.testing.parity import assert_run_matches
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


def write_image(path) -> None:
    from PIL import Image

    rng = np.random.default_rng(1)
    pixels = (rng.random((40, 56, 3)) * 255).astype(np.uint8)
    pixels[:20] = pixels[:20] // 2 + 100
    Image.fromarray(pixels).save(path)


def reference(pipe, noise, guidance, dynamic, image):
    """The pipeline's decoded frames and its ``output_type="latent"`` result (the final latents, taken from the
    last step's callback so that one run gives both)."""
    import torch
    from PIL import Image

    seen = {}

    def grab(p, i, t, kw):
        seen["latents"] = kw["latents"].detach().clone()
        return {}

    kwargs = dict(prompt=PROMPT, negative_prompt=NEGATIVE, height=SIZE, width=SIZE, num_frames=FRAMES,
                  num_inference_steps=STEPS, guidance_scale=guidance, use_dynamic_cfg=dynamic,
                  max_sequence_length=TEXT_LEN, callback_on_step_end=grab)
    if image is not None:
        kwargs["image"] = Image.open(image).convert("RGB")
    frames = pipe(latents=torch.from_numpy(noise), output_type="np", **kwargs).frames
    return seen["latents"].numpy().astype(np.float32), np.asarray(frames, np.float32)


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
    np.save(tmp_path / "noise.npy", noise)
    image = None
    if variant.endswith("i2v"):
        image = tmp_path / "input.png"
        write_image(image)

    ref_latents, ref_frames = reference(pipe, noise, guidance, dynamic, image)
    args = [
        "run", f"model.id={model_id}", f"model.checkpoint={ckpt}", f"prompt={PROMPT}", f"negative_prompt={NEGATIVE}",
        f"sampling.num_steps={STEPS}", f"sampling.height={SIZE}", f"sampling.width={SIZE}",
        f"sampling.num_frames={FRAMES}", f"sampling.guidance_scale={guidance}",
        f"sampling.max_sequence_length={TEXT_LEN}", f"sampling.initial_noise={tmp_path / 'noise.npy'}",
        f"options.use_dynamic_cfg={str(dynamic).lower()}",
        "vae.tiling={" + ", ".join(f"{k}: {v!r}" for k, v in TILES.items()) + "}" if tiled else "vae.tiling=false",
        f"output.path={tmp_path / 'out.mp4'}", f"output.save_latents={tmp_path / 'lat.npy'}",
        f"output.save_frames={tmp_path / 'frames.npy'}", f"runtime.compilation_cache_dir={tmp_path / 'jaxcache'}",
        "--quiet",
    ]
    if image is not None:
        args.append(f"image={image}")
    proc = vidax(*args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    latents = np.load(tmp_path / "lat.npy")
    got_frames = np.load(tmp_path / "frames.npy")
    assert_run_matches(case, latents, got_frames, ref_latents, ref_frames, latent_shape=noise.shape,
                       frame_shape=(1, FRAMES, SIZE, SIZE, 3))
