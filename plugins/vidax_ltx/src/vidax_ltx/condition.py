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
* ``image:`` or ``video:`` (its first 8k+1 frames that fit) conditions the output with ``options.strength`` at pixel
  frame ``options.frame_index``. At frame 0 the item's latents replace the first latent frames by
  ``lerp(latents, item_latents, strength)``; at a later frame its first two latent frames (one for an image),
  ``lerp(noise, item_latents, strength)``, become extra tokens in front of the video's, placed at that frame by their
  RoPE coordinates and dropped after the last step, and a longer video's remaining latent frames replace the output's
  from latent frame ``frame_index // 8 + 2`` on, as at frame 0. Either way the model sees per-token timesteps
  ``min(t, (1 - mask) * 1000)`` (mask = strength on the conditioning tokens) and a conditioning token takes the
  sampler's update only once ``t / 1000 - 1e-6 < 1 - mask``. The image latents are a posterior sample with vidax's
  seeded noise (:meth:`vidax_ltx.autoencoder.LTXVideoAutoencoder.encode_image`); the extra tokens' noise is
  ``jax.random.normal(jax.random.fold_in(jax.random.key(seed), 4), shape)``.
* ``options.image_cond_noise_scale`` s > 0: before each step the fully-strong conditioning tokens (mask 1) are set
  to their starting values plus ``s * noise * (t / 1000)**2``, with fresh per-step noise (the core's
  ``step_noise``), as the pipeline's ``add_noise_to_image_conditioning_latents``. The model sees them so
  (``prepare``) and the step keeps them (``select_update``), so each step hands on, and the last one returns, the
  tokens the pipeline's loop holds after that step. In between only the sampler's update reads them, and it leaves
  a token of per-token timestep 0 as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import jax.numpy as jnp
import numpy as np

from vidax_core.errors import UserError
from vidax_core.model_api import Conditioning

from .autoencoder import pack
from .seeds import item_key
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


def _per_token_t(x, t, arrays):
    """The model's per-token timesteps ``min(t, (1 - mask) * 1000)`` (B, S)."""
    mask = arrays["cond_mask"]
    return x, jnp.minimum(t, (1.0 - mask) * 1000.0)


def _hold_until_due(new, old, t, arrays):
    """A conditioning token takes the update only once ``t / 1000 - 1e-6 < 1 - mask``."""
    due = (t / 1000.0 - 1e-6 < 1.0 - arrays["cond_mask"])[..., None]
    return jnp.where(due, new, old)


def _renoise_fns(scale: float):
    """``(prepare, select_update)`` with ``add_noise_to_image_conditioning_latents``: at every step the mask-1
    tokens are their start plus ``scale * step_noise * (t / 1000)**2`` (the step's noise and model timestep ``t``),
    in the model's input and in what the step keeps. The kept value adds whatever update the step gave the token
    (none at mask 1, whose per-token timestep is 0), as the pipeline's update of its re-noised latents does."""
    s = np.float32(scale)

    def renoised(t, arrays):
        tt = t / 1000.0
        hard = (arrays["cond_mask"] > 1.0 - 1e-6)[..., None]
        return arrays["cond_init"] + s * arrays["step_noise"] * (tt * tt), hard

    def prepare(x, t, arrays):
        noised, hard = renoised(t, arrays)
        return _per_token_t(jnp.where(hard, noised, x), t, arrays)

    def select_update(new, old, t, arrays):
        kept = _hold_until_due(new, old, t, arrays)
        noised, hard = renoised(t, arrays)
        return jnp.where(hard, noised + (kept - old), kept)

    return prepare, select_update


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


def keyframe_noise(seed: int, shape: Sequence[int], item: int = 0) -> np.ndarray:
    """The noise a later-frame item's extra tokens are mixed with (the reference draws it from its generator)."""
    import jax

    return np.asarray(jax.random.normal(item_key(seed, 4, item), tuple(shape), np.float32))


PREFIX_FRAMES = 2  # latent frames of a later-frame video item that become extra tokens (the rest is written in place)


@dataclass(frozen=True)
class Item:
    """One conditioning item (diffusers' ``LTXVideoCondition``): an image or a clip, its pixel frame, its strength."""

    path: str
    is_video: bool
    frame_index: int = 0
    strength: float = 1.0


def items(run) -> list[Item]:
    """``image:`` / ``video:`` (with ``options.frame_index`` / ``strength``), then ``options.conditions``."""
    o = run.options
    found = []
    if run.image is not None or run.video is not None:
        found.append(Item(run.image or run.video, run.image is None, int(o.get("frame_index") or 0),
                          float(o.get("strength", 1.0))))
    for c in o.get("conditions") or ():
        found.append(Item(c.get("image") or c.get("video"), "video" in c, int(c.get("frame_index", 0)),
                          float(c.get("strength", 1.0))))
    return found


def item_pixels(item: Item, run, spatial: int) -> np.ndarray:
    """(1, 3, T, H, W) in [-1, 1] of one item, as the pipeline preprocesses it: an image (T = 1), or the first
    frames of a clip that fit after its frame index, trimmed to 8k+1; each frame resized as
    ``VideoProcessor.preprocess`` does."""
    from PIL import Image

    from vidax_core.io.image import load_image, preprocess_image

    s = run.sampling
    if not item.is_video:
        return preprocess_image(load_image(item.path), s.height, s.width, spatial)[:, :, None]
    from vidax_core.io.clip import read_video

    frames = read_video(item.path)
    n = min(frames.shape[0], s.num_frames - item.frame_index)
    n = (n - 1) // 8 * 8 + 1
    u8 = np.round(frames[:n] * np.float32(255.0)).astype(np.uint8)
    return np.stack([preprocess_image(Image.fromarray(f), s.height, s.width, spatial)[0] for f in u8], axis=1)[None]


def prepare(run, vae: Any, grid: tuple[int, int, int], dit: LTXDiTConfig, factors: tuple[int, int]) -> Conditioning:
    temporal, spatial = factors
    frame_rate = float(run.options.get("frame_rate") or 25.0)
    coord_args = dict(temporal_factor=temporal, spatial_factor=spatial, patch_size=dit.patch_size,
                      patch_size_t=dit.patch_size_t)
    coords = causal_coords(grid, frame_rate, **coord_args)[None]
    s = run.sampling
    frame_mask = np.zeros(grid[0], np.float32)
    writes = []  # (first latent frame, item latents, strength): lerped into the latents in order
    extras, extra_coords, extra_masks = [], [], []
    conds = items(run)
    for k, item in enumerate(conds):
        latents = vae.encode_frames(item_pixels(item, run, spatial), int(s.seed), item=k)  # (1, C, Fc, h, w)
        strength, fc = np.float32(item.strength), latents.shape[2]
        if item.frame_index == 0:
            writes.append((0, latents, strength))
            frame_mask[:fc] = strength
            continue
        if fc > PREFIX_FRAMES:  # the frames after the prefix go in place, from the item's latent frame on
            a = item.frame_index // temporal + PREFIX_FRAMES
            if a + fc - PREFIX_FRAMES > grid[0]:
                raise UserError(f"a conditioning clip at frame {item.frame_index} reaches past the "
                                f"{s.num_frames}-frame output; lower its frame_index")
            writes.append((a, latents[:, :, PREFIX_FRAMES:], strength))
            frame_mask[a:a + fc - PREFIX_FRAMES] = strength
        head = latents[:, :, :PREFIX_FRAMES]
        extras.append(pack(lerp(keyframe_noise(int(s.seed), head.shape, item=k), head, strength)))
        extra_coords.append(causal_coords((head.shape[2],) + tuple(grid[1:]), frame_rate,
                                          frame_index=item.frame_index, **coord_args)[None])
        extra_masks.append(np.full((1, extras[-1].shape[1]), strength, np.float32))
    arrays: dict[str, np.ndarray] = {"rope_coords": np.concatenate(extra_coords + [coords], axis=1)}
    n_extra = sum(e.shape[1] for e in extras)
    if extras:
        sp = int(getattr(getattr(run, "parallel", None), "sp", 1) or 1)
        total = arrays["rope_coords"].shape[1]
        if total % sp:
            raise UserError(f"the later-frame conditioning items add {n_extra} tokens: {total} tokens do not split "
                            f"over parallel.sp={sp}; change parallel.sp or the size")
    if conds:
        video_mask = np.repeat(frame_mask, int(np.prod(grid[1:])))[None]
        arrays["cond_mask"] = np.concatenate(extra_masks + [video_mask], axis=1)

    def start(noise, given, sigma):
        z = np.asarray(noise, np.float32)
        if given is not None:
            sig = np.float32(sigma)
            z = (sig * z + (np.float32(1.0) - sig) * np.asarray(given, np.float32)).astype(np.float32)
        if writes:
            z = z.copy()
        for a, latents, strength in writes:  # torch.lerp(latents, condition, strength) on the item's frames
            b = a + latents.shape[2]
            z[:, :, a:b] = lerp(z[:, :, a:b], latents, strength)
        tokens = np.concatenate(extras + [pack(z)], axis=1)
        if renoise:
            arrays["cond_init"] = tokens  # the pipeline's init_latents
        return tokens

    renoise = bool(conds) and float(run.options.get("image_cond_noise_scale") or 0.0) > 0.0
    finalize = _unpack_fn(grid, n_extra)
    if not conds:
        return Conditioning(arrays=arrays, model_kwargs=("rope_coords",), start=start, finalize=finalize)
    prep, select, more = _per_token_t, _hold_until_due, {}
    if renoise:
        prep, select = _renoise_fns(float(run.options["image_cond_noise_scale"]))
        more = dict(step_noise_shape=(1, arrays["cond_mask"].shape[1], int(vae.cfg.latent_channels)))
    return Conditioning(arrays=arrays, model_kwargs=("rope_coords",), prepare=prep, per_token_update=True,
                        start=start, select_update=select, finalize=finalize, **more)
