"""What the HunyuanVideo-1.5 DiT gets beside the latents and the prompt, as the pipelines build it.

The DiT takes ``2 C + 1`` channels: the noisy latents, a conditioning latent and a mask, concatenated on channels
at every model call (the sampler steps the ``C`` noisy channels only). Text-to-video feeds zeros for both (the
pipeline's ``prepare_cond_latents_and_mask``) and no SigLIP tokens (the pipeline's 729 zero tokens are masked
out by the DiT, so leaving them out gives the same video; see :mod:`vidax_hunyuan.dit15`). Image-to-video feeds
the image's latent (the VAE's posterior mean times ``scaling_factor`` of the resized, cropped image,
:mod:`.hunyuan15_image`) in latent frame 0 with zeros after it, and a mask of 1 on frame 0 and 0 elsewhere
(``prepare_cond_latents_and_mask``); the noisy latents start from the noise alone. The step-distilled DiT
(``use_meanflow``) also takes ``timestep_r``, the next step's timestep (0 at the last step), at every call.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from vidax_core.model_api import Conditioning


def with_zero_condition(x, t, arrays):
    """(B, C, F, H, W) -> (B, 2C + 1, F, H, W): the noisy latents, a zero conditioning latent and a zero mask."""
    b, c = x.shape[:2]
    return jnp.concatenate([x, jnp.zeros((b, c + 1) + x.shape[2:], x.dtype)], axis=1), t


def next_timestep(values) -> dict:
    """``Conditioning.step_kwargs`` of a meanflow DiT: ``timestep_r`` = the pipeline's ``timesteps[i + 1]``."""
    return {"timestep_r": values["next_timestep"]}


def text_to_video(meanflow: bool = False) -> Conditioning:
    return Conditioning(prepare=with_zero_condition, step_kwargs=next_timestep if meanflow else None)


def with_condition(x, t, arrays):
    """(B, C, F, H, W) -> (B, 2C + 1, F, H, W): the noisy latents, then ``arrays["condition"]`` (latent + mask)."""
    cond = arrays["condition"].astype(x.dtype)
    return jnp.concatenate([x, jnp.broadcast_to(cond, (x.shape[0],) + cond.shape[1:])], axis=1), t


def condition(image_latents: np.ndarray, frames: int) -> np.ndarray:
    """(1, C + 1, F, h, w): ``image_latents`` (1, C, 1, h, w) in frame 0 then zeros, and the frame-0 mask."""
    b, c, _, h, w = image_latents.shape
    out = np.zeros((b, c + 1, frames, h, w), np.float32)
    out[:, :c, 0] = image_latents[:, :, 0]
    out[:, c, 0] = 1.0
    return out


def image_to_video(run: Any, vae: Any, target_size: int, grid: tuple[int, int, int],
                   meanflow: bool = False) -> Conditioning:
    from vidax_core.io.image import load_image

    from .hunyuan15_image import resize_crop, vae_frames, video_size

    image = load_image(run.image)
    cropped = resize_crop(image, *video_size(image, target_size))
    latents = np.asarray(vae.encode_video(vae_frames(cropped)), np.float32)
    return Conditioning(arrays={"condition": condition(latents, grid[0])}, prepare=with_condition,
                        step_kwargs=next_timestep if meanflow else None)
