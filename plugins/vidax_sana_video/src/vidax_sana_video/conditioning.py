"""Image-to-video (``SanaImageToVideoPipeline``, the same checkpoint; a run with ``image:``):

* the image is resized to the run's size (the resolution bin when binning: lanczos, the video processor's) and
  encoded by the VAE, its posterior mean normalised by the VAE's latent statistics; it replaces latent frame 0 of
  the initial latents, drawn or given (the pipeline overwrites frame 0 of ``latents=`` too);
* each step the DiT sees timestep 0 on the token frame 0 and the step's timestep on the others (the pipeline's
  per-token timestep ``t * (1 - conditioning_mask)``; here one value per token frame, the DiT modulating frame
  by frame);
* the sampler steps frames 1.. only: frame 0 keeps the image's latents (``select_update``; the samplers update
  elementwise, so stepping all frames and restoring frame 0 is the pipeline's step on frames 1..).

Text-to-video needs nothing beyond the prompt.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from vidax_core import Conditioning


def image_latents(run: Any, vae: Any) -> np.ndarray:
    """(1, C, 1, h, w): the run's image at the run's size through the VAE (posterior mean, normalised)."""
    from vidax_core import load_image, preprocess_image

    s = run.sampling
    pixels = preprocess_image(load_image(run.image), s.height, s.width)  # (1, 3, H, W) in [-1, 1]
    frames = (np.moveaxis(pixels, 1, -1)[:, None] + np.float32(1.0)) / np.float32(2.0)  # (1, 1, H, W, 3) in [0, 1]
    return np.asarray(vae.encode_video(frames), np.float32)


def prepare(run: Any, vae: Any, token_frames: int) -> Conditioning | None:
    """The run's :class:`Conditioning` (None for text-to-video)."""
    if run.image is None:
        return None
    first = image_latents(run, vae)

    def start(noise):
        out = np.array(noise, np.float32, copy=True)
        out[:, :, :1] = first
        return out

    def per_frame_timesteps(x, t, arrays):
        frame = jnp.arange(token_frames)
        t = jnp.broadcast_to(jnp.asarray(t, jnp.float32).reshape(-1, 1), (x.shape[0], token_frames))
        return x, jnp.where(frame[None] == 0, jnp.float32(0.0), t)

    def keep_first_frame(new, old, t, arrays):
        return new.at[:, :, 0].set(old[:, :, 0])

    return Conditioning(latents=start, prepare=per_frame_timesteps, select_update=keep_first_frame)
