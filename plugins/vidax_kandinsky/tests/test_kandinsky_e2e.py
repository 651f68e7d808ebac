"""End to end: tiny diffusers ``Kandinsky5T2VPipeline`` / ``Kandinsky5I2VPipeline`` and the real ``vidax run`` CLI,
from the same noise.

diffusers (PyTorch, fp32) is the reference: its latents (``output_type="latent"``, channel-last) and the frames
its VAE and video processor make of them. vidax gets the noise the pipeline draws first from its generator as
``sampling.initial_noise`` (channel-last, the noise channels only) and builds the condition channels, the RoPE
scale of the run's size and, for image-to-video, the image's first latent frame itself. The VAE's posterior is made
sharp (log-variance -30), so the I2V pipeline's posterior sample of the image, drawn from its generator, equals the
mean vidax samples around with its own. Latents within 1e-4 and frames within 5e-3 relative L2 (the issue's bounds;
both land far below). Guidance 5 with a negative prompt (two calls per step, contexts of different lengths).

The inputs matter: the reference with the RoPE scale of another size, or I2V without its first-frame
renormalisation, lands far past the bound.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from vidax_core.testing.cli import plugin_env as cli_plugin_env, run_args, run_e2e  # noqa: E402
from vidax_core.testing.parity import RUN_BOUND, assert_run_matches, rel_l2  # noqa: E402
from vidax_core.testing.reference import write_test_image  # noqa: E402
from vidax_kandinsky.tiny import TINY_VAE, save_tiny_kandinsky  # noqa: E402

pytestmark = pytest.mark.xdist_group("kandinsky_e2e")

PROMPT = "a red fox runs across a snowy field at dawn"
NEGATIVE = "blurry, low quality"
H, W, STEPS, SEED = 32, 32, 3, 4
FRAMES = {"t2v": 9, "i2v": 17}  # I2V renormalises latent frames 0-3 against frames 4..: 5 latent frames at least
FRAME_BOUND = 5e-3


def latent_shape(task: str) -> tuple[int, ...]:
    return (1, (FRAMES[task] - 1) // 4 + 1, H // 8, W // 8, TINY_VAE["latent_channels"])


def noise(task: str) -> np.ndarray:
    """The pipeline's first draw from ``Generator().manual_seed(SEED)`` (channel-last, noise channels)."""
    return torch.randn(latent_shape(task), generator=torch.Generator().manual_seed(SEED)).numpy()


def reference(pipe, task: str, image=None) -> tuple[np.ndarray, np.ndarray]:
    """The pipeline's final latents and its frames of them (one sampling run, seeded as :func:`noise`)."""
    from PIL import Image

    extra = {} if image is None else {"image": Image.open(image).convert("RGB")}
    with torch.no_grad():
        latents = pipe(prompt=PROMPT, negative_prompt=NEGATIVE, height=H, width=W, num_frames=FRAMES[task],
                       num_inference_steps=STEPS, guidance_scale=5.0, generator=torch.Generator().manual_seed(SEED),
                       output_type="latent", **extra).frames
        z = latents.permute(0, 4, 1, 2, 3) / pipe.vae.config.scaling_factor
        frames = pipe.video_processor.postprocess_video(pipe.vae.decode(z, return_dict=False)[0], output_type="np")
    return np.asarray(latents, np.float32), np.asarray(frames, np.float32)


def case(tmp_path_factory, task: str) -> tuple:
    folder = tmp_path_factory.mktemp(f"kandinsky_{task}")
    ckpt, pipe = save_tiny_kandinsky(folder / "ckpt", task, seed=1, sharp_posterior=True)
    pipe.set_progress_bar_config(disable=True)
    image = write_test_image(folder / "input.png", size=(40, 24)) if task == "i2v" else None
    env = cli_plugin_env(folder / "entry", "kandinsky", "vidax_kandinsky.plugin:KandinskyPlugin")
    return ckpt, pipe, image, env, *reference(pipe, task, image)


@pytest.fixture(scope="module")
def t2v(tmp_path_factory):
    return case(tmp_path_factory, "t2v")


@pytest.fixture(scope="module")
def i2v(tmp_path_factory):
    return case(tmp_path_factory, "i2v")


def check_cli(tmp_path, task: str, model_id: str, case: tuple) -> None:
    ckpt, _, image, env, ref_latents, ref_frames = case
    args = run_args(model_id, ckpt, PROMPT, NEGATIVE, image=image,
                    sampling=dict(num_steps=STEPS, height=H, width=W, num_frames=FRAMES[task], guidance_scale=5.0))
    run = run_e2e(tmp_path, *args, noise=noise(task), env=env)
    rel, frel = assert_run_matches(f"kandinsky {task}", run.latents, run.frames, ref_latents, ref_frames,
                                   latent_shape=latent_shape(task), frame_shape=(1, FRAMES[task], H, W, 3))
    assert frel <= FRAME_BOUND


def test_t2v_cli_matches_diffusers(tmp_path, t2v):
    check_cli(tmp_path, "t2v", "kandinsky5-t2v-lite", t2v)


def test_i2v_cli_matches_diffusers(tmp_path, i2v):
    check_cli(tmp_path, "i2v", "kandinsky5-i2v-lite", i2v)


def test_rope_scale_and_first_frame_renormalisation_matter(t2v, i2v, monkeypatch):
    """The reference with the 480p RoPE scale at this 32x32 size, and I2V without ``normalize_first_frame``, each
    land far past the run bound: the run-size input and the renormalisation are exercised. (The scale moves the
    angles of a 2x2 patch grid only, so its effect is the smaller one: about 60 bounds.)"""
    from diffusers import Kandinsky5I2VPipeline, Kandinsky5T2VPipeline

    _, pipe, _, _, ref_latents, _ = t2v
    monkeypatch.setattr(Kandinsky5T2VPipeline, "_get_scale_factor", lambda self, h, w: (1, 2, 2))
    wrong_scale, _ = reference(pipe, "t2v")
    _, pipe, image, _, ref_i2v, _ = i2v
    monkeypatch.setattr(Kandinsky5I2VPipeline, "normalize_first_frame", lambda self, latents: latents)
    no_renorm, _ = reference(pipe, "i2v", image)
    for name, wrong, ref in (("480p rope scale", wrong_scale, ref_latents), ("no renormalisation", no_renorm,
                                                                           ref_i2v)):
        print(f"[kandinsky {name}] latents rel {rel_l2(wrong, ref):.3e}")
        assert rel_l2(wrong, ref) > 20 * RUN_BOUND, name
