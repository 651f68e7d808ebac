"""What the LTX DiT gets beyond the prompt, as LTXPipeline / LTXImageToVideoPipeline build it.

* Always: ``rope_coords`` (1, S, 3), the fractional RoPE coordinates of the latent token grid scaled by
  ``options.frame_rate`` (:func:`vidax_ltx.dit.video_coords`).
* Image-to-video (``image:``): a (1, S) mask marks the first latent frame's tokens. Their model timestep is
  ``t * (1 - mask)`` = 0 (``min(t, 1 - mask)`` for a 0/1 mask) and the sampler's per-token update leaves them
  where they are. Latents given as ``sampling.initial_noise`` already hold the image's tokens (as diffusers'
  ``latents=``) and are used as given; otherwise the image is resized, VAE-encoded (a posterior sample with vidax's
  seeded noise), normalised and written over the first frame's tokens of the drawn noise.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vidax_core.model_api import Conditioning

from .autoencoder import pack
from .dit import LTXDiTConfig, video_coords


def first_frame_mask(grid: tuple[int, int, int]) -> np.ndarray:
    """(1, S) float32: 1 on the first latent frame's tokens."""
    f, h, w = grid
    m = np.zeros((1, f, h, w), np.float32)
    m[:, 0] = 1.0
    return m.reshape(1, -1)


def _i2v_prepare(x, t, arrays):
    """Per-token model timesteps (B, S): the conditioning frame's tokens at 0."""
    return x, t * (1.0 - arrays["cond_mask"])


def prepare(run, vae: Any, grid: tuple[int, int, int], dit: LTXDiTConfig, factors: tuple[int, int]) -> Conditioning:
    temporal, spatial = factors
    frame_rate = float(run.options.get("frame_rate") or 25.0)
    coords = video_coords(grid, frame_rate, temporal_factor=temporal, spatial_factor=spatial,
                          patch_size=dit.patch_size, patch_size_t=dit.patch_size_t)[None]
    if run.image is None:
        return Conditioning(arrays={"rope_coords": coords}, model_kwargs=("rope_coords",))
    mask = first_frame_mask(grid)
    make_latents = None
    if run.sampling.initial_noise is None:
        from vidax_core.io.image import load_image, preprocess_image

        s = run.sampling
        pixels = preprocess_image(load_image(run.image), s.height, s.width, spatial)
        image_tokens = pack(np.repeat(vae.encode_image(pixels, int(s.seed)), grid[0], axis=2))
        m = mask[..., None]

        def make_latents(noise):
            return (image_tokens * m + np.asarray(noise, np.float32) * (1.0 - m)).astype(np.float32)

    return Conditioning(arrays={"rope_coords": coords, "cond_mask": mask}, model_kwargs=("rope_coords",),
                        prepare=_i2v_prepare, per_token_update=True, latents=make_latents)

