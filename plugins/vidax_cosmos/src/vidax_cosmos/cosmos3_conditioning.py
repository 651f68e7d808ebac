"""What the Cosmos3 DiT gets beyond the prompt tokens, as ``Cosmos3OmniPipeline`` builds it.

* ``fps`` (1,): the ``fps`` option, for the mRoPE temporal modulation (every task).
* ``noisy_frames`` (1, F): 0 on the conditioning latent frames, 1 elsewhere. The DiT adds the timestep embedding to
  the noisy frames only and returns zero velocity on the others, which is the pipeline's velocity mask; the
  sampler then steps every frame with that velocity (the latents are never rewritten).
* Image-to-video: the preprocessed image (:mod:`vidax_cosmos.cosmos3_image`) repeated over every frame is
  encoded with the VAE's posterior mean and normalised with the VAE's latent mean/std; latent frame 0 is the
  conditioning frame and the initial latents are ``mask * x0 + (1 - mask) * noise``, as the pipeline draws them.
  The Wan VAE is causal in time, so latent frame 0 depends on the first pixel frame alone and vidax encodes only
  that frame.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vidax_core.model_api import Conditioning


def image_latents(path: str, vae: Any, height: int, width: int) -> np.ndarray:
    """(1, C, 1, h, w) normalised latents of the conditioning image."""
    from vidax_core.io.image import load_image
    from vidax_core.vae.wan21 import normalize_latents

    from .cosmos3_image import preprocess

    pixels = preprocess(np.asarray(load_image(path), np.uint8), height, width)[None, :, None]
    return normalize_latents(vae.vae.cfg, vae.vae.encode(pixels))[:, :, :1]


def prepare(run, vae: Any, grid: tuple[int, int, int]) -> Conditioning:
    f, h, w = grid
    s = run.sampling
    noisy = np.ones((1, f), np.float32)
    arrays = {"fps": np.asarray([float(run.options.get("fps", 24.0))], np.float32), "noisy_frames": noisy}
    latents = None
    if run.image is not None:
        x0 = image_latents(run.image, vae, int(s.height), int(s.width))
        noisy[:, 0] = 0.0

        def latents(noise):
            out = np.array(noise, np.float32, copy=True)
            out[:, :, :1] = x0
            return out

    return Conditioning(arrays=arrays, model_kwargs=("fps", "noisy_frames"), latents=latents)
