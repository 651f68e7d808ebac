"""Image-to-video without given latents: the image is resized as diffusers' VideoProcessor does, VAE-encoded, a
posterior sample is drawn (vidax's own seeded noise, here re-drawn to build the expectation from diffusers'
posterior mean and std), normalised, and written over the first latent frame's tokens of the initial noise."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from vidax_core.io.checkpoint import Checkpoint  # noqa: E402
from vidax_core.plugins import get_plugins  # noqa: E402
from vidax_ltx.plugin import LTXPlugin  # noqa: E402
from vidax_core.testing.tiny.ltx import build_tiny_ltx_pipeline  # noqa: E402

plugin = LTXPlugin()

pytestmark = pytest.mark.xdist_group("ltx_conditioning")

SIZE, FRAMES, SEED = 64, 17, 7


def test_image_latents_follow_the_reference_posterior(tmp_path):
    import jax
    from PIL import Image

    pipe = build_tiny_ltx_pipeline("i2v", seed=2)
    pipe.save_pretrained(str(tmp_path / "ckpt"), safe_serialization=True)
    rng = np.random.default_rng(3)
    pixels = (rng.random((40, 56, 3)) * 255).astype(np.uint8)
    Image.fromarray(pixels).save(tmp_path / "img.png")
    s = SimpleNamespace(num_steps=2, guidance_scale=3.0, height=SIZE, width=SIZE, num_frames=FRAMES, seed=SEED,
                        max_sequence_length=16, initial_noise=None)
    run = SimpleNamespace(sampling=s, options={"frame_rate": 25.0, "decode_timestep": 0.05, "pipeline": "ltx",
                                               "decode_noise_scale": 0.0}, image=str(tmp_path / "img.png"), video=None)
    spec = get_plugins().registry.get("ltx-video-13b-0.9.8-dev")
    ckpt = Checkpoint(str(tmp_path / "ckpt"))
    vae = plugin.build_vae(spec, ckpt, run)
    grid = vae.latent_shape(FRAMES, SIZE, SIZE)
    cond = plugin.prepare_conditioning(spec, ckpt, run, vae, grid)
    hw = grid[1] * grid[2]
    noise = np.random.default_rng(0).standard_normal((1, int(np.prod(grid)), 8)).astype(np.float32)
    got = cond.latents(noise)

    with torch.no_grad():
        image = pipe.video_processor.preprocess(Image.open(tmp_path / "img.png").convert("RGB"), SIZE, SIZE)
        post = pipe.vae.encode(image.unsqueeze(2)).latent_dist
        mean, std = post.mean.double().numpy(), post.std.double().numpy()
    eps = np.asarray(jax.random.normal(jax.random.fold_in(jax.random.key(SEED), 3), mean.shape, np.float32))
    z = mean + std * eps
    lm = pipe.vae.latents_mean.double().numpy().reshape(1, -1, 1, 1, 1)
    ls = pipe.vae.latents_std.double().numpy().reshape(1, -1, 1, 1, 1)
    want = ((z - lm) / ls)[:, :, 0].transpose(0, 2, 3, 1).reshape(1, hw, -1)
    err = float(np.abs(got[:, :hw] - want).max())
    print(f"ltx i2v image latents: max_abs={err:.3e} (|ref| max {np.abs(want).max():.2f})")
    assert err <= 2e-5  # fp32 VAE encode vs the float64-read reference posterior
    np.testing.assert_array_equal(got[:, hw:], noise[:, hw:])
    # per-token timesteps: the image tokens at 0, the rest at t
    x, t = cond.prepare(noise, np.float32(800.0), dict(cond.arrays))
    t = np.asarray(t)
    assert t.shape == (1, noise.shape[1]) and (t[:, :hw] == 0).all() and (t[:, hw:] == 800.0).all()
    assert cond.per_token_update is True
