"""HunyuanVideo-I2V ``token_replace`` conditioning, as ``HunyuanVideoImageToVideoPipeline``:

* the image is resized to the run's size (``VideoProcessor.preprocess``: Lanczos, [-1, 1]), VAE-encoded (posterior
  mean) and scaled: ``image_latents`` (1, C, 1, h, w);
* the initial latents are ``noise * 0.999 + image_latents * (1 - 0.999)`` (float32, every frame) even when
  ``sampling.initial_noise`` is given;
* every model call sees the clean image latent as frame 0 (the DiT modulates those tokens with t = 0), and after
  every sampler step frame 0 is the clean image latent again (the reference steps frames 1.. only; the Euler
  update is elementwise, so stepping all frames and restoring frame 0 is the same).
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from vidax_core.model_api import Conditioning

T = np.float32(0.999)


def image_latents(run: Any, vae: Any) -> np.ndarray:
    import jax

    from vidax_core.io.image import load_image, preprocess_image

    from vidax_core.vae.hunyuan import encode

    s = run.sampling
    x = preprocess_image(load_image(run.image), s.height, s.width)  # (1, 3, H, W) in [-1, 1]
    mean, _ = encode(vae.vae, x[:, :, None], devices=jax.local_devices())
    return (mean * np.float32(vae.scaling_factor)).astype(np.float32)


def prepare(run: Any, vae: Any, latent_shape: tuple[int, int, int]) -> Conditioning:
    img = image_latents(run, vae)

    def latents(noise):
        noise = np.asarray(noise, np.float32)
        return noise * T + np.repeat(img, noise.shape[2], axis=2) * (np.float32(1.0) - T)

    def with_image(x, arrays):
        first = arrays["image_latents"].astype(x.dtype)
        return jnp.concatenate([jnp.broadcast_to(first, (x.shape[0],) + first.shape[1:]), x[:, :, 1:]], axis=2)

    return Conditioning(
        arrays={"image_latents": img},
        latents=latents,
        prepare=lambda x, t, arrays: (with_image(x, arrays), t),
        after_step=with_image,
    )
