"""End to end: tiny diffusers AnyFlow pipelines against vidax, from the same noise (the pipelines' ``latents=``).

* AnyFlow-FAR text-to-video through the real ``vidax run`` CLI: four chunks (1 + 2 + 2 + 2 latent frames) at
  ``full_chunk_limit`` 2, so chunks leave the full-resolution cache for the compressed one; classifier-free
  guidance (each branch its own cache); the mp4 written chunk by chunk.
* AnyFlow-FAR image-to-video and video continuation in one loaded pipe, on a second architecture: ``t-r`` delta
  timesteps, another gate, ``full_chunk_limit`` 3, a 2 x 2 compressed patch, no cross-attention norm, an unused image
  embedder, five chunks, and the clip's last chunk partly zero (as the reference leaves it).
* AnyFlow (bidirectional) text-to-video and video continuation in one loaded pipe.

Latents within 1e-4 relative and frames too (the contract's bound for frames is 5e-3).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from vidax_core.testing.cli import run_args, run_e2e
from vidax_core.testing.parity import assert_run_matches
from vidax_core.testing.reference import save_pipeline, write_test_image

torch = pytest.importorskip("torch")

from vidax_anyflow.tiny import build_tiny_anyflow, no_ftfy  # noqa: E402

PROMPT, NEGATIVE = "a small red fox runs in the snow", "blurry, static"
SIZE, STEPS = 32, 2
VARIANT = dict(deltatime_type="t-r", gate_value=0.4, full_chunk_limit=3, compressed_patch_size=(1, 2, 2),
               cross_attn_norm=False, chunk_partition=(1, 2, 2, 2, 1), image_dim=8)


def latent_noise(frames: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, 4, frames, SIZE // 8, SIZE // 8)).astype(np.float32)


def reference(pipe, noise: np.ndarray, **kwargs) -> tuple[np.ndarray, np.ndarray]:
    """The pipeline's ``output_type="latent"`` result and its frames (decoded as the pipeline decodes them)."""
    from vidax_core.bench.torch_reference import decode_wan_latents

    frames = (noise.shape[2] - 1) * 4 + 1
    with torch.no_grad():
        lat = pipe(latents=torch.from_numpy(noise), output_type="latent", height=SIZE, width=SIZE,
                   num_frames=frames, num_inference_steps=STEPS, max_sequence_length=16, **kwargs).frames
        return lat.numpy(), np.asarray(decode_wan_latents(pipe, lat), np.float32)


def clip_tensor(frames: np.ndarray):
    """(T, H, W, 3) frames in [0, 1] as the pipelines' ``video=`` (1, T, 3, H, W)."""
    return torch.from_numpy(np.ascontiguousarray(frames[None])).permute(0, 1, 4, 2, 3).contiguous()


def write_clip(path: str, n: int) -> np.ndarray:
    """An mp4 of ``n`` random frames (near-lossless) and the frames vidax will read back from it."""
    from vidax_core.io.clip import read_video
    from vidax_core.io.ffmpeg import ffmpeg_module

    imageio_ffmpeg = ffmpeg_module()  # no Python between fork and exec in this threaded test process

    frames = (np.random.default_rng(5).random((n, SIZE, SIZE, 3)) * 255).astype(np.uint8)
    w = imageio_ffmpeg.write_frames(path, (SIZE, SIZE), fps=16, codec="libx264", pix_fmt_out="yuv444p",
                                    output_params=["-crf", "4"])
    w.send(None)
    for f in frames:
        w.send(np.ascontiguousarray(f))
    w.close()
    return read_video(path)


def test_far_t2v_cli_matches_diffusers(tmp_path):
    no_ftfy()
    pipe = build_tiny_anyflow("far", seed=3)
    ckpt = save_pipeline(pipe, tmp_path / "ckpt")
    noise = latent_noise(7, 0)
    ref_latents, ref_frames = reference(pipe, noise, prompt=PROMPT, negative_prompt=NEGATIVE, guidance_scale=3.0)
    sampling = dict(num_steps=STEPS, height=SIZE, width=SIZE, num_frames=25, guidance_scale=3.0,
                    max_sequence_length=16)
    run = run_e2e(tmp_path, *run_args("anyflow-far-wan2.1-1.3b", ckpt, PROMPT, NEGATIVE, sampling=sampling),
                  noise=noise)
    assert_run_matches("far-t2v-cfg", run.latents, run.frames, ref_latents, ref_frames, latent_shape=noise.shape,
                       frame_shape=(1, 25, SIZE, SIZE, 3))
    assert run.metrics["num_windows"] == 4 and all("cache_fill_s" in w for w in run.metrics["windows"])
    assert os.path.getsize(tmp_path / "run.mp4") > 0


@pytest.fixture(scope="module")
def far_variant(tmp_path_factory):
    import vidax

    no_ftfy()
    folder = tmp_path_factory.mktemp("far_variant")
    pipe = build_tiny_anyflow("far", seed=7, dit=VARIANT)
    ckpt = save_pipeline(pipe, folder / "ckpt")
    loaded = vidax.load("anyflow-far-wan2.1-1.3b", f"model.checkpoint={ckpt}", f"prompt={PROMPT}",
                        f"sampling.height={SIZE}", f"sampling.width={SIZE}", f"sampling.num_steps={STEPS}",
                        "sampling.num_frames=29", "sampling.max_sequence_length=16", "model.dtype=float32")
    yield pipe, loaded, folder
    loaded.close()


def test_far_i2v_matches_diffusers(far_variant):
    from PIL import Image

    pipe, loaded, folder = far_variant
    image = write_test_image(folder / "first.png", size=(SIZE, SIZE))
    frame = np.asarray(Image.open(image).convert("RGB"), np.float32) / 255.0
    noise = latent_noise(8, 1)
    np.save(folder / "i2v_noise.npy", noise)
    ref_latents, ref_frames = reference(pipe, noise, prompt=PROMPT, video=clip_tensor(frame[None]))
    out = loaded(image=str(image), initial_noise=str(folder / "i2v_noise.npy"))
    assert_run_matches("far-i2v", out.latents, out.frames, ref_latents, ref_frames, latent_shape=noise.shape,
                       frame_shape=(1, 29, SIZE, SIZE, 3))


def test_far_v2v_continuation_matches_diffusers(far_variant):
    """A 5-frame clip: 2 latent frames in the chunks 1 + 2, whose second chunk's last frame stays zero, as in the
    reference."""
    pipe, loaded, folder = far_variant
    for n, seed in ((5, 3),):
        clip = write_clip(str(folder / f"clip{n}.mp4"), n)
        noise = latent_noise(8, seed)
        np.save(folder / f"v2v_noise{n}.npy", noise)
        ref_latents, ref_frames = reference(pipe, noise, prompt=PROMPT, video=clip_tensor(clip))
        out = loaded(video=str(folder / f"clip{n}.mp4"), initial_noise=str(folder / f"v2v_noise{n}.npy"))
        assert_run_matches(f"far-v2v-{n}", out.latents, out.frames, ref_latents, ref_frames,
                           latent_shape=noise.shape, frame_shape=(1, 29, SIZE, SIZE, 3))


def test_bidirectional_matches_diffusers(tmp_path):
    import vidax

    no_ftfy()
    pipe = build_tiny_anyflow("bidirectional", seed=5, dit=dict(deltatime_type="t-r", gate_value=0.3))
    ckpt = save_pipeline(pipe, tmp_path / "ckpt")
    noise = latent_noise(5, 4)
    np.save(tmp_path / "noise.npy", noise)
    clip = write_clip(str(tmp_path / "clip.mp4"), 5)
    with vidax.load("anyflow-wan2.1-t2v-1.3b", f"model.checkpoint={ckpt}", f"prompt={PROMPT}",
                    f"negative_prompt={NEGATIVE}", f"sampling.height={SIZE}", f"sampling.width={SIZE}",
                    f"sampling.num_steps={STEPS}", "sampling.num_frames=17", "sampling.max_sequence_length=16",
                    "model.dtype=float32", f"sampling.initial_noise={tmp_path / 'noise.npy'}") as loaded:
        for label, media, kwargs in (("t2v-cfg", {}, dict(negative_prompt=NEGATIVE, guidance_scale=2.0)),
                                     ("v2v", {"video": str(tmp_path / "clip.mp4")}, {})):
            ref_latents, ref_frames = reference(pipe, noise, prompt=PROMPT, **kwargs,
                                                **({"video": clip_tensor(clip)} if media else {}))
            out = loaded(**media, guidance_scale=kwargs.get("guidance_scale", 1.0))
            assert_run_matches(f"bidirectional-{label}", out.latents, out.frames, ref_latents, ref_frames,
                               latent_shape=noise.shape, frame_shape=(1, 17, SIZE, SIZE, 3))
