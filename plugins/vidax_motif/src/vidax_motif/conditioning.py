"""What the Motif-Video DiT gets beside the noisy latents and the prompt, as the pipelines build it.

The DiT takes ``2 C + 1`` channels: the noisy latents, a first-frame condition latent and its mask, concatenated on
channels at every model call (the sampler steps the ``C`` noisy channels only).

* Text-to-video (no ``image:``), and image-to-video of a single latent frame (fewer than 5 frames: the pipeline
  then ignores the image): both zero, and no image tokens.
* Image-to-video: the image is resized to the video size (``VideoProcessor``: lanczos, [-1, 1]); its VAE posterior
  is sampled (the pipeline's ``latent_dist.sample``; vidax draws the noise with its own generator, seeded by
  ``sampling.seed``), normalised by the VAE's ``latents_mean`` / ``latents_std`` and put in latent frame 0 of the
  condition latent, whose mask is 1 there and 0 elsewhere; the noisy latents are not replaced. The same resized
  frame, back in [0, 1], goes through the checkpoint's SigLIP image processor (``feature_extractor``: its PIL
  backend, :func:`vidax_core.io.image.processor_pixels`) to T5Gemma2's SigLIP vision tower, whose
  ``last_hidden_state`` reaches the DiT as ``image_embeds`` (every guidance branch gets the same).
"""

from __future__ import annotations

import os
from typing import Any

import jax.numpy as jnp
import numpy as np

from vidax_core.model_api import Conditioning


def with_condition(x, t, arrays):
    """(B, C, F, H, W) -> (B, 2 C + 1, F, H, W): the noisy latents, then ``arrays["condition"]`` (latent + mask)."""
    cond = arrays["condition"].astype(x.dtype)
    return jnp.concatenate([x, jnp.broadcast_to(cond, (x.shape[0],) + cond.shape[1:])], axis=1), t


def condition(channels: int, grid: tuple[int, int, int], first: np.ndarray | None = None) -> np.ndarray:
    """(1, C + 1, F, h, w): ``first`` (1, C, 1, h, w) in latent frame 0 with its mask, or zeros."""
    out = np.zeros((1, channels + 1, *grid), np.float32)
    if first is not None:
        out[:, :channels, 0] = first[:, :, 0]
        out[:, channels, 0] = 1.0
    return out


def uses_image(run: Any, grid: tuple[int, int, int]) -> bool:
    """The pipeline conditions on the image only when the video has more than one latent frame."""
    return run.image is not None and grid[0] > 1


def first_frame(run: Any) -> np.ndarray:
    """(1, 3, H, W) float32 in [-1, 1]: the image as ``VideoProcessor.preprocess_video`` gives it."""
    from vidax_core.io.image import load_image, preprocess_image

    return preprocess_image(load_image(run.image), run.sampling.height, run.sampling.width)


def image_latent(run: Any, vae: Any, pixels: np.ndarray) -> np.ndarray:
    """(1, C, 1, h, w): a posterior sample of the frame (vidax's generator), normalised."""
    from vidax_core.vae.wan21 import normalize_latents

    frames = np.clip((pixels + np.float32(1)) / np.float32(2), 0.0, 1.0)
    mean, logvar = vae.encode_posterior(np.moveaxis(frames, 1, -1)[:, None])
    noise = np.random.default_rng(int(run.sampling.seed)).standard_normal(mean.shape).astype(np.float32)
    return normalize_latents(vae.vae.cfg, mean + np.exp(np.float32(0.5) * logvar) * noise)


def image_embeds(ckpt: Any, run: Any, pixels: np.ndarray) -> np.ndarray:
    """(1, N, D) float32: SigLIP's ``last_hidden_state`` of the frame, as the pipeline's ``_get_image_embeds``."""
    from vidax_core.encoders.t5gemma2 import load_vision
    from vidax_core.encoders.towers import encode_vit
    from vidax_core.io.checkpoint import read_json_file
    from vidax_core.io.image import processor_pixels

    processor = read_json_file(os.path.join(ckpt.require("feature_extractor"), "preprocessor_config.json"))
    frame = np.clip((pixels[0] + np.float32(1)) / np.float32(2), np.float32(0), np.float32(1))
    siglip = processor_pixels(frame, processor)

    def build():
        return load_vision(ckpt.config("text_encoder"), ckpt.tensors("text_encoder"))

    with ckpt.model("text_encoder/vision_tower", build) as tower:
        hidden, _ = encode_vit(tower, siglip)
    return hidden


def prepare(ckpt: Any, run: Any, vae: Any, grid: tuple[int, int, int], channels: int) -> Conditioning:
    if not uses_image(run, grid):
        return Conditioning(arrays={"condition": condition(channels, grid)}, prepare=with_condition)
    pixels = first_frame(run)
    arrays = {"condition": condition(channels, grid, image_latent(run, vae, pixels)),
              "image_embeds": image_embeds(ckpt, run, pixels)}
    return Conditioning(arrays=arrays, model_kwargs=("image_embeds",), prepare=with_condition)
