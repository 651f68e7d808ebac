"""LTXConditionPipeline semantics (``options.pipeline: condition``, what the presets and the multi-scale recipe use).

How it differs from the single-pass LTXPipeline / LTXImageToVideoPipeline (:mod:`vidax_ltx.conditioning`):

* Layout: ``sampling.initial_noise`` and ``output.save_latents`` are UNPACKED normalised latents (B, C, F, H, W),
  what the pipeline takes as ``latents=`` and returns with ``output_type="latent"``; the sampler works on the packed
  tokens (B, F*H*W, C) in between (``start`` packs, ``finalize`` unpacks).
* ``latents=`` is not noise: with ``options.denoise_strength`` s < 1 the plan keeps its last ``int(N * s)`` steps and
  the start is ``sigma0 * noise + (1 - sigma0) * latents`` with vidax's seeded noise; with s = 1 the pipeline
  ignores ``latents=``, so vidax refuses it (:func:`vidax_ltx.plugin.check_run`).
* RoPE coordinates are causal: latent frame k sits at pixel frame ``max(8k + 1 - 8, 0)`` (+ the condition's frame
  index), divided by the frame rate (:func:`causal_coords`).
* Without ``options.timesteps`` the schedule is ``linear_quadratic_schedule(num_steps) * 1000`` handed to the
  scheduler as timesteps (no dynamic shift: the pipeline passes no ``mu``).
* ``image:`` conditions the video with ``options.strength`` at pixel frame ``options.frame_index``. At frame 0 it
  replaces latent frame 0 by ``lerp(latents, image_latents, strength)``; at a later frame its latents,
  ``lerp(noise, image_latents, strength)``, become extra tokens in front of the video's, placed at that frame by
  their RoPE coordinates and dropped after the last step. Either way the model sees per-token timesteps
  ``min(t, (1 - mask) * 1000)`` (mask = strength on the conditioning tokens) and a conditioning token takes the
  sampler's update only once ``t / 1000 - 1e-6 < 1 - mask``. The image latents are a posterior sample with vidax's
  seeded noise (:meth:`vidax_ltx.autoencoder.LTXVideoAutoencoder.encode_image`); the extra tokens' noise is
  ``jax.random.normal(jax.random.fold_in(jax.random.key(seed), 4), shape)``.
* ``options.image_cond_noise_scale`` s > 0: before each step the fully-strong conditioning tokens (mask 1) are set
  to their starting values plus ``s * noise * (t / 1000)**2``, with fresh per-step noise (the core's
  ``step_noise``), as the pipeline's ``add_noise_to_image_conditioning_latents``.
"""

from __future__ import annotations

from typing import Any, Sequence

import jax.numpy as jnp
import numpy as np

from vidax_core.model_api import Conditioning

from .autoencoder import pack
from .dit import BASE_HEIGHT, BASE_NUM_FRAMES, BASE_WIDTH, LTXDiTConfig


def linear_quadratic_timesteps(num_steps: int, threshold_noise: float = 0.025,
                               linear_steps: int | None = None) -> np.ndarray:
    """The pipeline's default schedule ``linear_quadratic_schedule(N) * 1000`` as float32 model timesteps: N/2 steps
    falling linearly to ``threshold_noise``, then a quadratic down to 0 (the list excludes the final 0)."""
    if num_steps < 2:
        return np.asarray([1.0], np.float32) * np.float32(1000.0)
    linear_steps = num_steps // 2 if linear_steps is None else linear_steps
    linear = [i * threshold_noise / linear_steps for i in range(linear_steps)]
    step_diff = linear_steps - threshold_noise * num_steps
    quad_steps = num_steps - linear_steps
    quad_coef = step_diff / (linear_steps * quad_steps**2)
    lin_coef = threshold_noise / linear_steps - 2 * step_diff / (quad_steps**2)
    const = quad_coef * (linear_steps**2)
    quad = [quad_coef * (i**2) + lin_coef * i + const for i in range(linear_steps, num_steps)]
    sigmas = np.asarray([1.0 - x for x in linear + quad], np.float32)
    return sigmas * np.float32(1000.0)


def causal_coords(grid: Sequence[int], frame_rate: float, *, temporal_factor: int = 8, spatial_factor: int = 32,
                  patch_size: int = 1, patch_size_t: int = 1, frame_index: int = 0) -> np.ndarray:
    """(S, 3) float32 RoPE coordinates of a (f, h, w) latent grid as LTXConditionPipeline builds ``video_coords``,
    divided by the transformer's base sizes: integer pixel coordinates, the frame one made causal
    (``max(k * temporal + 1 - temporal, 0) + frame_index``) and multiplied by ``1 / frame_rate``."""
    f, h, w = (int(v) for v in grid)
    gf, gh, gw = np.meshgrid(np.arange(0, f, patch_size_t), np.arange(0, h, patch_size),
                             np.arange(0, w, patch_size), indexing="ij")
    frames = np.maximum(gf * temporal_factor + 1 - temporal_factor, 0) + frame_index
    f32 = np.float32
    cf = frames.astype(f32) * f32(1.0 / frame_rate) / f32(BASE_NUM_FRAMES)
    ch = (gh * spatial_factor).astype(f32) / f32(BASE_HEIGHT)
    cw = (gw * spatial_factor).astype(f32) / f32(BASE_WIDTH)
    return np.stack([cf, ch, cw], axis=-1).reshape(-1, 3).astype(f32)


def frame_strength_mask(grid: Sequence[int], strength: float) -> np.ndarray:
    """(1, S) float32: ``strength`` on latent frame 0's tokens (the conditioning image), 0 elsewhere."""
    f, h, w = (int(v) for v in grid)
    m = np.zeros((1, f, h, w), np.float32)
    m[:, 0] = np.float32(strength)
    return m.reshape(1, -1)


def _per_token_t(x, t, arrays):
    """The model's per-token timesteps ``min(t, (1 - mask) * 1000)`` (B, S)."""
    mask = arrays["cond_mask"]
    return x, jnp.minimum(t, (1.0 - mask) * 1000.0)


def _hold_until_due(new, old, t, arrays):
    """A conditioning token takes the update only once ``t / 1000 - 1e-6 < 1 - mask``."""
    due = (t / 1000.0 - 1e-6 < 1.0 - arrays["cond_mask"])[..., None]
    return jnp.where(due, new, old)


def _renoise_fn(scale: float):
    """``add_noise_to_image_conditioning_latents``: the mask-1 tokens from their start plus scaled, t^2 noise."""
    s = np.float32(scale)

    def before_step(latents, t, arrays):
        tt = t / 1000.0
        noised = arrays["cond_init"] + s * arrays["step_noise"] * (tt * tt)
        hard = (arrays["cond_mask"] > 1.0 - 1e-6)[..., None]
        return jnp.where(hard, noised, latents)

    return before_step


def _unpack_fn(grid: Sequence[int], extra: int = 0):
    """Packed tokens (B, extra + F*H*W, C) -> the video's unpacked latents (B, C, F, H, W), extra tokens dropped."""
    f, h, w = (int(v) for v in grid)

    def finalize(x, arrays):
        b, _, c = x.shape
        return jnp.moveaxis(x[:, extra:].reshape(b, f, h, w, c), -1, 1)

    return finalize


def lerp(start: np.ndarray, end: np.ndarray, weight: np.float32) -> np.ndarray:
    """``torch.lerp`` with a scalar weight, its two formulas included (exact ends at weight 0 and 1)."""
    diff = end - start
    return start + weight * diff if weight < 0.5 else end - diff * (np.float32(1.0) - weight)


def keyframe_noise(seed: int, shape: Sequence[int]) -> np.ndarray:
    """The noise a keyframe's extra tokens are mixed with (the reference draws it from its generator)."""
    import jax

    return np.asarray(jax.random.normal(jax.random.fold_in(jax.random.key(seed), 4), tuple(shape), np.float32))


def prepare(run, vae: Any, grid: tuple[int, int, int], dit: LTXDiTConfig, factors: tuple[int, int]) -> Conditioning:
    temporal, spatial = factors
    frame_rate = float(run.options.get("frame_rate") or 25.0)
    coords = causal_coords(grid, frame_rate, temporal_factor=temporal, spatial_factor=spatial,
                           patch_size=dit.patch_size, patch_size_t=dit.patch_size_t)[None]
    arrays: dict[str, np.ndarray] = {"rope_coords": coords}
    image_latents, keyframe = None, None
    strength = np.float32(run.options.get("strength", 1.0))
    frame_index = int(run.options.get("frame_index") or 0)
    s = run.sampling
    if run.image is not None:
        from vidax_core.io.image import load_image, preprocess_image

        pixels = preprocess_image(load_image(run.image), s.height, s.width, spatial)
        image_latents = vae.encode_image(pixels, int(s.seed))  # (1, C, 1, h, w)
        if frame_index == 0:
            arrays["cond_mask"] = frame_strength_mask(grid, float(strength))
        else:  # extra tokens in front, at the keyframe's coordinates
            noise = keyframe_noise(int(s.seed), image_latents.shape)
            keyframe = pack(lerp(noise, image_latents, strength))
            kgrid = (1,) + tuple(grid[1:])
            kcoords = causal_coords(kgrid, frame_rate, temporal_factor=temporal, spatial_factor=spatial,
                                    patch_size=dit.patch_size, patch_size_t=dit.patch_size_t, frame_index=frame_index)
            arrays["rope_coords"] = np.concatenate([kcoords[None], coords], axis=1)
            arrays["cond_mask"] = np.concatenate([np.full((1, keyframe.shape[1]), strength, np.float32),
                                                  np.zeros((1, int(np.prod(grid))), np.float32)], axis=1)

    def start(noise, given, sigma):
        z = np.asarray(noise, np.float32)
        if given is not None:
            sig = np.float32(sigma)
            z = (sig * z + (np.float32(1.0) - sig) * np.asarray(given, np.float32)).astype(np.float32)
        if image_latents is not None and keyframe is None:  # torch.lerp(latents, condition, strength), frame 0
            n = image_latents.shape[2]
            z = z.copy()
            z[:, :, :n] = lerp(z[:, :, :n], image_latents, strength)
        tokens = pack(z)
        tokens = tokens if keyframe is None else np.concatenate([keyframe, tokens], axis=1)
        if renoise:
            arrays["cond_init"] = tokens  # the pipeline's init_latents
        return tokens

    renoise = image_latents is not None and float(run.options.get("image_cond_noise_scale") or 0.0) > 0.0
    finalize = _unpack_fn(grid, 0 if keyframe is None else keyframe.shape[1])
    if image_latents is None:
        return Conditioning(arrays=arrays, model_kwargs=("rope_coords",), start=start, finalize=finalize)
    extra = {}
    if renoise:
        tokens = arrays["cond_mask"].shape[1]
        extra = dict(before_step=_renoise_fn(float(run.options["image_cond_noise_scale"])),
                     step_noise_shape=(1, tokens, image_latents.shape[1]))
    return Conditioning(arrays=arrays, model_kwargs=("rope_coords",), prepare=_per_token_t, per_token_update=True,
                        start=start, select_update=_hold_until_due, finalize=finalize, **extra)
