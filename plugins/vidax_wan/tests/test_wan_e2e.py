"""End to end: tiny diffusers Wan pipelines and the real `vidax run` CLI, from the same initial noise.

diffusers (PyTorch, fp32) is the reference; vidax runs in a subprocess exactly as a user would call it, loading the
checkpoint the reference saved with `save_pretrained`. One case per Wan model kind: text-to-video with both
samplers, Wan2.1 image-to-video (CLIP + first-frame latents), Wan2.2 A14B two experts for text and image, and
Wan2.2 TI2V in both modes (per-token timesteps, 48-channel-style VAE).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from vidax_core.testing.cli import run_args, run_e2e
from vidax_core.testing.parity import assert_run_matches
from vidax_core.testing.reference import reference_outputs, save_pipeline, write_test_image
from vidax_core.testing.tiny.wan import build_tiny_wan_pipeline, build_tiny_wan_variant

PROMPT = "a small red fox runs in the snow"
NEGATIVE = "blurry, static, low quality"

# case -> (model id, builder, height/width, latent channels, spatial factor, needs image, guidance_scale_2)
# diffusers' Wan2.1 I2V attention finds the image tokens by assuming exactly 512 text tokens, so that case runs
# with max_sequence_length=512 (vidax passes the image tokens separately and has no such assumption).
CASES = {
    "t2v-unipc": ("wan2.1-t2v-1.3b", lambda: build_tiny_wan_pipeline(seed=3, scheduler="unipc"), 64, 4, 8, False, None),
    "t2v-euler": ("wan2.1-t2v-1.3b", lambda: build_tiny_wan_pipeline(seed=3, scheduler="euler"), 64, 4, 8, False, None),
    "wan2.1-i2v": ("wan2.1-i2v-14b-480p", lambda: build_tiny_wan_variant("wan2.1-i2v", seed=4), 64, 4, 8, True, None),
    "wan2.2-t2v-a14b": ("wan2.2-t2v-a14b", lambda: build_tiny_wan_variant("wan2.2-t2v-a14b", seed=5),
                        64, 4, 8, False, 3.0),
    # the same two experts streamed block by block: only the active expert's chunks are ever on the device
    "wan2.2-t2v-a14b-offload": ("wan2.2-t2v-a14b", lambda: build_tiny_wan_variant("wan2.2-t2v-a14b", seed=5), 64, 4, 8,
                                False, 3.0),
    "wan2.2-i2v-a14b": ("wan2.2-i2v-a14b", lambda: build_tiny_wan_variant("wan2.2-i2v-a14b", seed=6),
                        64, 4, 8, True, 3.5),
    "wan2.2-ti2v-t2v": ("wan2.2-ti2v-5b", lambda: build_tiny_wan_variant("wan2.2-ti2v-t2v", seed=7),
                        64, 4, 16, False, None),
    "wan2.2-ti2v-i2v": ("wan2.2-ti2v-5b", lambda: build_tiny_wan_variant("wan2.2-ti2v-i2v", seed=8),
                        64, 4, 16, True, None),
}


def text_length(case: str) -> int:
    return 512 if case == "wan2.1-i2v" else 16


def reference(pipe, noise, steps, size, frames, image, guidance_2, max_len):
    import types

    from diffusers.pipelines.wan import pipeline_wan_i2v
    from PIL import Image

    # diffusers' I2V pipeline calls ftfy even when it is not installed; ftfy.fix_text is the identity on these
    # ASCII prompts (vidax, like the T2V reference without ftfy, applies only the HTML/whitespace cleaning).
    if not hasattr(pipeline_wan_i2v, "ftfy"):
        pipeline_wan_i2v.ftfy = types.SimpleNamespace(fix_text=lambda text: text)

    kwargs = dict(
        prompt=PROMPT, negative_prompt=NEGATIVE, height=size, width=size, num_frames=frames, num_inference_steps=steps,
        guidance_scale=5.0, max_sequence_length=max_len,
    )
    if guidance_2 is not None:
        kwargs["guidance_scale_2"] = guidance_2
    if image is not None:
        kwargs["image"] = Image.open(image).convert("RGB")
    # Final latents as the reference hands them to its VAE (after TI2V's first-frame substitution), then frames.
    return reference_outputs(pipe, noise, final_latents="output", **kwargs)


@pytest.mark.parametrize("case", list(CASES))
def test_cli_matches_diffusers(tmp_path, case):
    import torch

    model_id, build, size, channels, spatial, needs_image, guidance_2 = CASES[case]
    torch.manual_seed(0)
    steps, frames = 4, 9
    pipe = build()
    ckpt = tmp_path / "ckpt"
    save_pipeline(pipe, ckpt)
    noise = np.random.default_rng(0).standard_normal(
        (1, channels, 3, size // spatial, size // spatial)).astype(np.float32)
    image = write_test_image(tmp_path / "input.png") if needs_image else None

    ref_latents, ref_frames = reference(pipe, noise, steps, size, frames, image, guidance_2, text_length(case))

    sampling = dict(num_steps=steps, height=size, width=size, num_frames=frames, guidance_scale=5.0,
                    max_sequence_length=text_length(case), scheduler=None)
    if guidance_2 is not None:
        sampling["guidance_scale_2"] = guidance_2
    args = run_args(model_id, ckpt, PROMPT, NEGATIVE, image=image, sampling=sampling)
    if case.endswith("-offload"):
        args += ["offload.enabled=true", "offload.chunk_size=1"]
    run = run_e2e(tmp_path, *args, noise=noise)
    assert_run_matches(case, run.latents, run.frames, ref_latents, ref_frames, latent_shape=noise.shape,
                       frame_shape=(1, frames, size, size, 3))
    assert os.path.getsize(tmp_path / "run.mp4") > 0
    metrics = run.metrics
    for key in ("load_s", "compile_s", "per_step_s", "decode_s", "total_s", "peak_rss_mb"):
        assert metrics[key] >= 0
    assert len(metrics["experts"]) == (2 if guidance_2 is not None else 1)
    assert set(metrics["expert_per_step"]) == set(metrics["experts"])  # both experts really ran
    if case.endswith("-offload"):
        off = metrics["offload"]
        # both experts' non-block params stay resident; of the blocks, at most two chunks of ONE expert at a time
        assert (metrics["peak_resident_weight_bytes"]
                <= off["non_block_weight_bytes"] + 2 * off["chunk_weight_bytes"]["blocks"])
    assert not [p for p in os.listdir(tmp_path) if ".partial" in p]


def test_the_image_encoder_runs_before_the_denoiser_is_placed(tmp_path, monkeypatch):
    """`vidax run` of Wan2.1 I2V makes its conditioning (the CLIP image encoder at float32, 2.5 GB at full size,
    and the VAE's encode) with the prompts, before the denoiser's weights are placed: the two never sit side by
    side (the 14B run's host peak was 3.5 GB above its dry run while CLIP loaded beside the placed blocks)."""
    import torch

    from vidax_core import cli
    from vidax_core.encoders import clip_vision
    from vidax_core.runner import loaded

    torch.manual_seed(0)
    ckpt = tmp_path / "ckpt"
    save_pipeline(build_tiny_wan_variant("wan2.1-i2v", seed=4), ckpt)
    order = []
    real_clip, real_dit = clip_vision.load_clip_vision, loaded.load_dit
    monkeypatch.setattr(clip_vision, "load_clip_vision", lambda *a, **k: order.append("clip") or real_clip(*a, **k))
    monkeypatch.setattr(loaded, "load_dit", lambda *a, **k: order.append("dit") or real_dit(*a, **k))
    args = run_args("wan2.1-i2v-14b-480p", ckpt, PROMPT, NEGATIVE, image=write_test_image(tmp_path / "in.png"),
                    sampling=dict(num_steps=2, height=64, width=64, num_frames=5, max_sequence_length=512))
    assert cli.main(["run", *args, f"output.path={tmp_path / 'v.mp4'}", "output.overwrite=true"]) == 0
    assert order == ["clip", "dit"], order


def test_a_loaded_image_pipe_keeps_its_image_encoder(tmp_path, monkeypatch):
    """A loaded Wan2.1 I2V pipe builds its CLIP image encoder on the first call and keeps it (parked on the host,
    ``runtime.text_encoder=host``): later calls with new images read no checkpoint tensor and build nothing, and
    each image still reaches the result."""
    import torch

    import vidax
    from vidax_core.encoders import clip_vision
    from vidax_core.testing.counters import Counters

    torch.manual_seed(0)
    ckpt = tmp_path / "ckpt"
    save_pipeline(build_tiny_wan_variant("wan2.1-i2v", seed=4), ckpt)
    images = [write_test_image(tmp_path / f"in{n}.png", seed=n) for n in range(3)]
    builds = []
    real_clip = clip_vision.load_clip_vision
    monkeypatch.setattr(clip_vision, "load_clip_vision", lambda *a, **k: builds.append(1) or real_clip(*a, **k))
    args = run_args("wan2.1-i2v-14b-480p", ckpt, PROMPT, NEGATIVE, image=images[0],
                    sampling=dict(num_steps=1, height=64, width=64, num_frames=5, max_sequence_length=512),
                    runtime=dict(compilation_cache=False))
    counters = Counters(monkeypatch)
    with vidax.load({}, *args) as pipe:
        latents = [np.asarray(pipe(seed=0).latents)]
        for image in images[1:]:
            counters.reset()
            latents.append(np.asarray(pipe(image=str(image), seed=0).latents))
            assert counters.tensor_reads == 0, f"a new image read {counters.tensor_reads} checkpoint tensors"
        kept = pipe._model.ckpt.kept_models
        assert kept.builds("image_encoder") == 1 and len(builds) == 1, "the image encoder was built per call"
    assert kept.builds("image_encoder") == 0  # closing the pipe drops it
    assert min(np.abs(a - b).max() for a, b in zip(latents, latents[1:])) > 1e-2  # each image reaches the result
