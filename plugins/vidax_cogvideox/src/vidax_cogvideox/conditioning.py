"""What the CogVideoX DiT gets beyond the prompt, as CogVideoXImageToVideoPipeline builds it.

Image-to-video: the image is resized (diffusers' VideoProcessor), VAE-encoded to its first-frame latent (a
posterior sample with vidax's own seeded noise), scaled (``scaling_factor``, or its inverse for 1.5), zero-padded
in time to the latent frame count and concatenated to the sampler's latents on the channel axis at every model
call (the sampler itself only moves the noise half). 1.5-I2V also gets ``ofs`` = 2.0. ``sampling.initial_noise``
is only the noise half (diffusers ``latents=``): the image is encoded either way.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from vidax_core.model_api import Conditioning

OFS = 2.0  # the value CogVideoXImageToVideoPipeline passes to a DiT with an ofs embedding


def image_latents(first: np.ndarray, frames: int) -> np.ndarray:
    """(1, 1, C, h, w) first-frame latent -> (1, frames, C, h, w), zeros after the first frame."""
    out = np.zeros((first.shape[0], frames) + first.shape[2:], np.float32)
    out[:, :1] = first
    return out


def _prepare(x, t, arrays):
    img = arrays["image_latents"].astype(x.dtype)
    img = jnp.broadcast_to(img, (x.shape[0],) + img.shape[1:])
    return jnp.concatenate([x, img], axis=2), t


def example_inputs(dit: Any, batch: int, grid, text: int):
    """``DitBuild.example_inputs`` of an image-to-video DiT: the latents with the image latents concatenated on
    the channel axis (``in_channels`` in all, (B, F, C, H, W)), the T5 context and, with an ofs embedding, ``ofs``."""
    f, h, w = grid
    kwargs = {"ofs": np.full((batch,), OFS, np.float32)} if dit.ofs_embed_dim else {}
    return ((batch, f, dit.in_channels, h, w), "float32"), ((batch, text, dit.text_embed_dim), dit.dtype), kwargs


def prepare(run, vae: Any, grid: tuple[int, int, int], dit: Any) -> Conditioning | None:
    if run.image is None:
        return None
    from vidax_core.io.image import load_image, preprocess_image

    s = run.sampling
    pixels = preprocess_image(load_image(run.image), s.height, s.width, vae.spatial_factor)
    arrays = {"image_latents": image_latents(vae.encode_image(pixels, int(s.seed)), grid[0])}
    kwargs: tuple[str, ...] = ()
    if dit.ofs_embed_dim:
        arrays["ofs"] = np.full((1,), OFS, np.float32)
        kwargs = ("ofs",)
    return Conditioning(arrays=arrays, model_kwargs=kwargs, prepare=_prepare)
