"""What the Cosmos-Predict2.5 DiT gets beyond the prompt, as ``Cosmos2_5_PredictBasePipeline`` builds it.

Every task runs the same step (text-to-world has no conditioning frames: the mask is zero and every term below
reduces to the plain model call):

* ``condition_mask`` (1, 1, F, h, w): 1 on the first ``n`` latent frames (image-to-world: n = 1; video-to-world:
  ``num_latent_conditional_frames``), an input channel of the DiT;
* before each model call the clean conditioning latents replace the sampler's latents where the mask is 1, and the
  model timestep is one value per latent frame: ``conditional_frame_timestep`` on the conditioning frames, the
  sampler's sigma elsewhere (the pipeline feeds sigma in [0, 1], not the 0..1000 timestep);
* after each model call the velocity of the conditioning frames is replaced by ``noise - condition`` (the initial
  noise, no separate noise is drawn for them): the DiT does it, given that velocity as ``condition_velocity``
  (:class:`vidax_cosmos.dit.CosmosDiT`);
* the sampler's latents are never overwritten: what comes out (and is saved) is what the pipeline returns.

Conditioning latents: the image (``image:``, taken as ``to_tensor`` then nearest-resized as the pipeline does) or
the last ``4 (n - 1) + 1`` frames of the clip (``video:``, bilinear-resized), mapped to [-1, 1] and encoded with
the VAE's posterior mean, then normalised with the Wan latent mean/std. The pipeline encodes them followed by
padding frames; the Wan VAE is causal in time, so the first ``n`` latent frames (the only ones the mask keeps)
depend on the conditioning frames alone and vidax encodes just those.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from vidax_core.errors import UserError
from vidax_core.model_api import Conditioning


def resize_nearest(x: np.ndarray, height: int, width: int) -> np.ndarray:
    """(..., H, W) -> (..., height, width) by torch's ``interpolate(mode="nearest")`` (source index
    ``floor(dst * in / out)``)."""
    h, w = x.shape[-2:]
    rows = np.minimum(np.floor(np.arange(height, dtype=np.float32) * np.float32(h / height)).astype(np.int64), h - 1)
    cols = np.minimum(np.floor(np.arange(width, dtype=np.float32) * np.float32(w / width)).astype(np.int64), w - 1)
    return x[..., rows[:, None], cols[None, :]]


def image_pixels(path: str, height: int, width: int) -> np.ndarray:
    """(1, 3, 1, H, W) in [-1, 1]: ``to_tensor`` of the RGB image, nearest-resized, ``2 x - 1``."""
    from vidax_core.io.image import load_image

    img = np.asarray(load_image(path), np.float32) / np.float32(255.0)  # (H0, W0, 3) in [0, 1]
    x = resize_nearest(np.ascontiguousarray(img.transpose(2, 0, 1)), height, width)
    return (np.float32(2.0) * x - np.float32(1.0))[None, :, None]


def video_pixels(path: str, height: int, width: int, keep: int) -> np.ndarray:
    """(1, 3, keep, H, W) in [-1, 1]: the clip's last ``keep`` frames, bilinear-resized (PIL) as the pipeline's
    video processor does."""
    from PIL import Image

    from vidax_core.io.clip import read_video

    frames = read_video(path, max_frames=keep)
    if frames.shape[0] < keep:
        raise UserError(f"video {path} has {frames.shape[0]} frames; video-to-world with "
                        f"num_latent_conditional_frames={(keep - 1) // 4 + 1} needs at least {keep}")
    u8 = np.round(frames * 255.0).astype(np.uint8)
    out = []
    for f in u8:
        im = Image.fromarray(f).resize((width, height), resample=Image.Resampling.BILINEAR)
        out.append(np.asarray(im, np.float32) / np.float32(255.0))
    x = np.stack(out).transpose(3, 0, 1, 2)  # (3, T, H, W)
    return (np.float32(2.0) * x - np.float32(1.0))[None]


def _prepare(cft: float):
    def prepare(x, t, arrays):
        m = arrays["condition_mask"]
        x_in = m * arrays["cond_latents"] + (1.0 - m) * x
        sigma = arrays["sigma"].astype(jnp.float32)
        ind = arrays["cond_indicator"]
        t_in = ind * cft + (1.0 - ind) * sigma if cft >= 0 else jnp.broadcast_to(sigma, ind.shape)
        return x_in.astype(x.dtype), t_in

    return prepare


def prepare(run, vae: Any, grid: tuple[int, int, int], channels: int) -> Conditioning:
    """The Conditioning of one run (every task)."""
    f, h, w = grid
    s = run.sampling
    cond = np.zeros((1, channels, f, h, w), np.float32)
    n = 0
    if run.image is not None or run.video is not None:
        if run.image is not None:
            pixels = image_pixels(run.image, s.height, s.width)
        else:
            k = int(run.options.get("num_latent_conditional_frames") or 2)
            pixels = video_pixels(run.video, s.height, s.width, 4 * (k - 1) + 1)
        from vidax_core.vae.wan21 import normalize_latents

        z = normalize_latents(vae.vae.cfg, vae.vae.encode(pixels))
        n = z.shape[2]
        cond[:, :, :n] = z
    indicator = np.zeros((1, f), np.float32)
    indicator[:, :n] = 1.0
    mask = np.broadcast_to(indicator[:, None, :, None, None], (1, 1, f, h, w)).astype(np.float32)
    arrays = {"condition_mask": mask, "cond_latents": cond, "cond_indicator": indicator,
              "condition_velocity": np.zeros_like(cond)}

    def latents(noise):
        arrays["condition_velocity"] = ((np.asarray(noise, np.float32) - cond) * mask).astype(np.float32)
        return noise

    cft = float(run.options.get("conditional_frame_timestep", 0.0001))
    return Conditioning(arrays=arrays, model_kwargs=("condition_mask", "condition_velocity"), prepare=_prepare(cft),
                        latents=latents)
