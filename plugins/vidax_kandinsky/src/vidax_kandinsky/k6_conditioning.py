"""The two latent streams of ``Kandinsky6TI2VAPipeline`` around the sampler, and its image conditioning.

Layouts. What ``sampling.initial_noise`` holds (the pipeline's ``latents=`` and ``audio_latents=``) and what
``output.save_latents`` writes (``output_type="latent"``) are the same: an .npz with ``video`` (B, C, F, H, W) and
``audio`` (B, C_a, L), or, with ``options.sample_audio=false``, the video alone as an .npy. The sampler works on
the transformer's channel-last layouts, video (B, F, H, W, C) and audio (B, L, C_a); :attr:`Conditioning.start`
and :attr:`Conditioning.finalize` permute between them. ``L = ceil(((F - 1) 4 + 1) / frame_rate x sample_rate /
latent_hop)`` audio latent frames (the audio VAE's rate and hop: 44.1 kHz, 1024 samples).

Model inputs. With ``visual_cond`` the DiT takes ``2 C + 1`` video channels: the latents, a condition latent the
pipeline leaves at zero and a mask. Image-to-video appends the image's latent as one more frame after the video
(its mask 1, its token type 1, its RoPE frame index 0); before every model call that frame is set back to the
image (the pipeline's ``latents[:, -1] = first_frame_latents``), and it is dropped after the last step. The image
is resized to cover the video size and centre-cropped (``resize_mode="crop"``), VAE-encoded and sampled from the
posterior with vidax's own generator (seeded by ``sampling.seed``), times ``scaling_factor``.
"""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp
import numpy as np

from vidax_core import Conditioning

from .conditioning import image_latent


def audio_frames(num_frames: int, temporal: int, frame_rate: float, sample_rate: int, hop: int) -> int:
    """Audio latent frames of a video of ``num_frames`` (the pipeline's ``audio_length``, from the latent frames)."""
    latent_frames = (num_frames - 1) // temporal + 1
    return math.ceil(((latent_frames - 1) * temporal + 1) / frame_rate * sample_rate / hop)


def latent_shapes(channels: int, audio: tuple[int, Any] | None):
    """``DitBuild.latent_shapes``: the raw layout of ``latents=``, and of ``audio_latents=`` when ``audio`` is
    ``(audio channels, latent frames -> audio frames)``."""

    def shapes(batch: int, grid):
        video = (batch, channels) + tuple(int(v) for v in grid)
        if audio is None:
            return video
        channels_a, length = audio
        return {"video": video, "audio": (batch, channels_a, length(int(grid[0])))}

    return shapes


def _with_inputs(image_tail: bool, visual_cond: bool):
    def prepare(x, t, arrays):
        video = x["video"] if isinstance(x, dict) else x
        if image_tail:
            video = video.at[:, -1].set(arrays["image_latent"][:, 0].astype(video.dtype))
        if visual_cond:
            cond = arrays["visual_cond"].astype(video.dtype)
            video = jnp.concatenate([video, jnp.broadcast_to(cond, video.shape[:-1] + cond.shape[-1:])], axis=-1)
        return ({**x, "video": video} if isinstance(x, dict) else video), t

    return prepare


def prepare(run: Any, vae: Any, grid: tuple[int, int, int], dit_cfg: Any) -> Conditioning:
    """The run's :class:`Conditioning` for the latent ``grid`` with ``vae`` (:class:`.k6_autoencoder.
    Kandinsky6Autoencoder`): layouts, condition channels and, given ``image:``, the reference tail frame."""
    f, h, w = (int(v) for v in grid)
    c = dit_cfg.in_visual_dim
    tail = run.image is not None
    arrays: dict[str, np.ndarray] = {}
    kwargs: tuple[str, ...] = ()
    if tail:
        arrays["image_latent"] = image_latent(run, vae.video, crop=True)
        pt = dit_cfg.patch_size[0]
        arrays["frame_positions"] = np.concatenate([np.arange(f // pt), [0]]).astype(np.int32)[None]
        arrays["token_types"] = np.array([[0] * (f // pt) + [1]], np.int32)
        kwargs = ("frame_positions", "token_types")
    if dit_cfg.visual_cond:
        cond = np.zeros((1, f + int(tail), h, w, c + 1), np.float32)
        if tail:
            cond[:, -1, ..., c] = 1.0
        arrays["visual_cond"] = cond
    image = arrays.get("image_latent")

    def start(noise, given, sigma):
        src = noise if given is None else given
        video = src["video"] if isinstance(src, dict) else src
        video = np.moveaxis(np.asarray(video, np.float32), 1, -1)
        if image is not None:
            video = np.concatenate([video, np.broadcast_to(image, (video.shape[0],) + image.shape[1:])], axis=1)
        if not isinstance(src, dict):
            return np.ascontiguousarray(video)
        return {"video": np.ascontiguousarray(video),
                "audio": np.ascontiguousarray(np.moveaxis(np.asarray(src["audio"], np.float32), 1, -1))}

    def finalize(x, arrays):
        video = x["video"] if isinstance(x, dict) else x
        if tail:
            video = video[:, :-1]
        video = jnp.moveaxis(video, -1, 1)
        return {"video": video, "audio": jnp.moveaxis(x["audio"], -1, 1)} if isinstance(x, dict) else video

    needs_prepare = tail or dit_cfg.visual_cond
    return Conditioning(arrays=arrays, model_kwargs=kwargs, start=start, finalize=finalize,
                        prepare=_with_inputs(tail, dit_cfg.visual_cond) if needs_prepare else None)


def example_inputs(cfg: Any, shapes: Any, batch: int, grid, text: int):
    """``DitBuild.example_inputs``: both streams channel-last with the DiT's input channels, and the text context."""
    raw = shapes(batch, grid)
    video_raw = raw["video"] if isinstance(raw, dict) else raw
    b, _, f, h, w = video_raw
    video = ((b, f, h, w, cfg.in_channels), "float32")
    latents = video if not isinstance(raw, dict) else \
        {"video": video, "audio": ((b, raw["audio"][2], raw["audio"][1]), "float32")}
    context = {"hidden": ((batch, text, cfg.in_text_dim), cfg.dtype), "pooled": ((batch, cfg.in_text_dim2), cfg.dtype)}
    return latents, context, {}
