"""What the Kandinsky 5 DiT gets beside the noise and the prompt, as the pipelines build it.

* **The RoPE scale, a run-size input.** The pipelines divide the RoPE angles by ``scale_factor``: ``(1, 2, 2)``
  when both the pixel height and width lie in [480, 854], else ``(1, 3.16, 3.16)``. The DiT cannot see the pixel
  size, so the conditioning hands it over as the model keyword input ``scale_factor`` (B, 3) of every call (the
  core's documented way to give a denoiser a value of the run: ``Conditioning.arrays`` + ``model_kwargs``).
* **The condition channels** (``visual_cond``, every published checkpoint): the DiT takes ``2 C + 1`` channels,
  the noisy latents then a condition latent and a mask, which the pipeline concatenates once to its ``latents``
  and vidax concatenates at every call (:func:`with_condition`; the sampler steps the ``C`` noise channels only).
  Text-to-video: zeros. Image-to-video: the condition latent is zeros too and the mask is 1 on latent frame 0.
* **Image-to-video's first frame.** The image is resized to the video size (lanczos, ``VideoProcessor``),
  VAE-encoded and sampled from the posterior, times ``scaling_factor``, and replaces latent frame 0 of the initial
  noise; the sampler never updates that frame (the pipeline steps frames ``1:`` only). The posterior sample uses
  vidax's own generator (seeded by ``sampling.seed``), not the reference's. After the last step the first four
  latent frames are renormalised towards the statistics of the next five (the pipeline's
  ``normalize_first_frame``), before ``output.save_latents`` and decoding.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from vidax_core import Conditioning

LITE_SIZES = (480, 854)  # _get_scale_factor's "between_480p" bounds
NORMALIZED_FRAMES, REFERENCE_FRAMES = 4, 5
MEAN_CLAMP, STD_CLAMP = (0.05, 0.1), (0.1, 0.25)  # normalize_first_frame's (low, high) clamps


def scale_factor(height: int, width: int) -> tuple[float, float, float]:
    """The pipeline's ``_get_scale_factor``: the RoPE angles' divisors (frames, rows, columns)."""
    lo, hi = LITE_SIZES
    return (1.0, 2.0, 2.0) if lo <= height <= hi and lo <= width <= hi else (1.0, 3.16, 3.16)


def with_condition(x, t, arrays):
    """Channel-last latents (B, T, H, W, C) -> (B, T, H, W, 2 C + 1): the noise channels, then the condition
    latent and the mask of ``arrays["visual_cond"]`` (1, T, H, W, C + 1)."""
    cond = arrays["visual_cond"].astype(x.dtype)
    return jnp.concatenate([x, jnp.broadcast_to(cond, x.shape[:-1] + cond.shape[-1:])], axis=-1), t


def keep_first_frame(new, old, t, arrays):
    """Image-to-video: latent frame 0 (the image) keeps its value; the sampler's update lands on frames 1.."""
    return new.at[:, 0].set(old[:, 0])


def normalize_first_frame(latents, arrays):
    """The I2V pipeline's ``normalize_first_frame`` on channel-last latents (B, T, H, W, C): frames 0..3 are
    standardised per sample and given the mean and (unbiased) standard deviation of frames 4..8 over the batch,
    each clamped to a band around the frames' own statistics."""
    x = latents.astype(jnp.float32)
    first = x[:, :NORMALIZED_FRAMES]
    ref = x[:, NORMALIZED_FRAMES:NORMALIZED_FRAMES + min(REFERENCE_FRAMES, x.shape[1] - 1)]
    axes = tuple(range(1, first.ndim))
    mean = jnp.mean(first, axis=axes, keepdims=True)
    std = jnp.std(first, axis=axes, keepdims=True, ddof=1)
    ref_mean = jnp.clip(jnp.mean(ref), mean - MEAN_CLAMP[0], mean + MEAN_CLAMP[1])
    ref_std = jnp.clip(jnp.std(ref, ddof=1), std - STD_CLAMP[0], std + STD_CLAMP[1])
    first = (first - mean) / std * ref_std + ref_mean
    return x.at[:, :NORMALIZED_FRAMES].set(first).astype(latents.dtype)


def condition_channels(grid: tuple[int, int, int], channels: int, image: bool) -> np.ndarray:
    """(1, T, H, W, C + 1): a zero condition latent and its mask (1 on latent frame 0 for image-to-video)."""
    cond = np.zeros((1, *grid, channels + 1), np.float32)
    if image:
        cond[:, 0, ..., channels] = 1.0
    return cond


def image_latent(run: Any, vae: Any, *, crop: bool = False) -> np.ndarray:
    """(1, 1, h, w, C): the run's image as the I2V pipeline encodes it (resized to the video size, or with ``crop``
    resized to cover it and centre-cropped as Kandinsky 6's ``resize_mode="crop"``; a posterior sample of the
    HunyuanVideo VAE times ``scaling_factor``), the sample drawn from vidax's generator."""
    import jax

    from vidax_core import load_image, preprocess_image
    from vidax_core.io.image import resize_crop
    from vidax_core.vae.hunyuan import encode

    s = run.sampling
    image = load_image(run.image)
    if crop:
        image = resize_crop(image, s.height, s.width)
    pixels = preprocess_image(image, s.height, s.width)[:, :, None]  # (1, 3, 1, H, W) in [-1, 1]
    mean, logvar = encode(vae.vae, pixels, devices=jax.local_devices())
    noise = np.random.default_rng(int(s.seed)).standard_normal(mean.shape).astype(np.float32)
    sample = (mean + np.exp(np.float32(0.5) * logvar) * noise) * np.float32(vae.scaling_factor)
    return np.ascontiguousarray(np.moveaxis(sample, 1, -1))


def prepare(run: Any, vae: Any, grid: tuple[int, int, int], channels: int, *, visual_cond: bool,
            i2v: bool) -> Conditioning:
    """The run's :class:`Conditioning`: the RoPE scale always, the condition channels with ``visual_cond``, the
    image's first latent frame, its hold and the final renormalisation for image-to-video."""
    arrays = {"scale_factor": np.asarray([scale_factor(run.sampling.height, run.sampling.width)], np.float32)}
    if visual_cond:
        arrays["visual_cond"] = condition_channels(grid, channels, i2v)
    if not i2v:
        return Conditioning(arrays=arrays, model_kwargs=("scale_factor",),
                            prepare=with_condition if visual_cond else None)
    first = image_latent(run, vae)

    def start_latents(noise):
        out = np.array(noise, np.float32, copy=True)
        out[:, :1] = first
        return out

    return Conditioning(arrays=arrays, model_kwargs=("scale_factor",), prepare=with_condition if visual_cond else None,
                        latents=start_latents, select_update=keep_first_frame, finalize=normalize_first_frame)
