"""The two latent streams of LTX2Pipeline / LTX2ImageToVideoPipeline around the sampler.

Layouts. What ``sampling.initial_noise`` holds (an .npz, LTX2Pipeline's ``latents=`` and ``audio_latents=``) and
what ``output.save_latents`` writes (``output_type="latent"``) are the same: ``video`` (1, 128, F, H, W) and
``audio`` (1, C, L, M) in the VAEs' raw, denormalised spaces. The sampler works on what the DiT sees: ``video``
tokens (1, F*H*W, 128) normalised per channel (``(z - mean) * scaling_factor / std``) and ``audio`` tokens
(1, L, C*M) normalised per packed feature. Given latents are normalised and packed (and mixed with
``options.noise_scale`` of vidax's own noise, as the pipeline's ``_create_noised_state``); without them the seeded
draw is taken as already normalised, as the pipeline's own ``randn``. After the last step both streams are
unpacked and denormalised (:attr:`Conditioning.finalize`).

Model inputs: ``use_cross_timestep`` as a (1,) flag (an input, so a loaded model follows each call's option), RoPE
positions of both streams (:func:`vidax_ltx.ltx2_dit.video_positions` at the conditioning frame
rate ``frame_rate / motion_speed``, :func:`vidax_ltx.ltx2_dit.audio_positions`); the DiT's timestep is the plan's
model timestep for both streams, and ``sigma`` is that same value, as the pipeline passes it.

Image-to-video (``image:``): the first latent frame is the conditioning. Without given latents the image is
H.264-compressed at ``image_crf``, resized (bilinear), VAE-encoded (the posterior mean), normalised with scale 1 and
written over the first frame of the draw; given latents already hold it (the image is then unused, as in the
pipeline) and ``noise_scale`` spares that frame. Its tokens get model timestep ``t * (1 - mask)`` = 0 while the audio
stream and ``sigma`` keep ``t``; only the later frames take the sampler's update.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from vidax_core.model_api import Conditioning

from .conditioning import first_frame_mask
from .ltx2_dit import audio_positions, video_positions


def conditioning_frame_rate(run: Any) -> float:
    """``get_conditioning_frame_rate``: the RoPE's frame rate, ``frame_rate / motion_speed``."""
    o = run.options
    return float(o["frame_rate"]) / float(o["motion_speed"])


def _pack_video(z):
    b, c = z.shape[:2]
    return jnp.moveaxis(z, 1, -1).reshape(b, -1, c)


def _pack_audio(z):
    b, c, n, m = z.shape
    return jnp.transpose(z, (0, 2, 1, 3)).reshape(b, n, c * m)


class Streams:
    """The two streams' latent statistics of ``vae`` (:class:`LTX2Autoencoder`) and the maps between the raw layouts
    (``latents=`` / ``audio_latents=``) and the DiT's normalised tokens."""

    def __init__(self, vae: Any):
        vc = vae.video_cfg
        shape = (1, -1, 1, 1, 1)
        self.v_mean = jnp.asarray(np.asarray(vc.latents_mean, np.float32).reshape(shape))
        self.v_std = jnp.asarray(np.asarray(vc.latents_std, np.float32).reshape(shape))
        self.v_scale = jnp.float32(vc.scaling_factor)
        self.a_mean = jnp.asarray(vae.audio_vae.latents_mean[...], jnp.float32)
        self.a_std = jnp.asarray(vae.audio_vae.latents_std[...], jnp.float32)

    def tokens(self, raw: Any) -> tuple[jax.Array, jax.Array]:
        """Raw ``{"video": (B, C, F, H, W), "audio": (B, C, L, M)}`` -> normalised (B, F H W, C), (B, L, C M)."""
        v = _pack_video((jnp.asarray(raw["video"], jnp.float32) - self.v_mean) * self.v_scale / self.v_std)
        a = (_pack_audio(jnp.asarray(raw["audio"], jnp.float32)) - self.a_mean) / self.a_std
        return v, a

    def raw(self, video: Any, audio: Any, grid: tuple[int, int, int], audio_shape: tuple[int, int, int]) -> dict:
        """The inverse of :meth:`tokens` for the latent ``grid`` and audio (channels, frames, bins)."""
        f, h, w = grid
        channels, frames, bins = audio_shape
        v = jnp.moveaxis(video.astype(jnp.float32).reshape(-1, f, h, w, video.shape[-1]), -1, 1)
        a = audio.astype(jnp.float32) * self.a_std + self.a_mean
        a = jnp.transpose(a.reshape(a.shape[0], frames, channels, bins), (0, 2, 1, 3))
        return {"video": v * self.v_std / self.v_scale + self.v_mean, "audio": a}


def prepare(run: Any, vae: Any, grid: tuple[int, int, int], dit_cfg: Any, image_crf: int = 0) -> Conditioning:
    """The conditioning of ``run`` for the latent ``grid`` with ``vae`` (:class:`LTX2Autoencoder`): text-to-video,
    or image-to-video when ``run.image`` is set (the image compressed at ``image_crf`` first)."""
    f, h, w = (int(v) for v in grid)
    streams = Streams(vae)
    audio_shape = vae.audio_shape(run.sampling.num_frames, float(run.options["frame_rate"]))
    frames = audio_shape[1]
    noise_scale = float(run.options.get("noise_scale") or 0.0)

    mask = image_tokens = None
    if run.image is not None:
        mask = first_frame_mask((f, h, w))[..., None]  # (1, S, 1)
        if run.sampling.initial_noise is None:  # given latents hold the conditioning frame (the image is unused)
            pixels = image_pixels(run, image_crf)
            image_tokens = _pack_video(jnp.repeat(jnp.asarray(vae.encode_image(pixels)), f, axis=2))
    video_noise_scale = noise_scale if mask is None else noise_scale * (1.0 - mask)

    def start(noise, given, sigma):
        video, audio = _pack_video(jnp.asarray(noise["video"])), _pack_audio(jnp.asarray(noise["audio"]))
        if given is None:  # the pipeline's own draw: already in the normalised space
            if image_tokens is not None:
                video = image_tokens * mask + video * (1.0 - mask)
            return {"video": np.asarray(video, np.float32), "audio": np.asarray(audio, np.float32)}
        v, a = streams.tokens(given)
        v = video_noise_scale * video + (1.0 - video_noise_scale) * v
        a = noise_scale * audio + (1.0 - noise_scale) * a
        return {"video": np.asarray(v, np.float32), "audio": np.asarray(a, np.float32)}

    def finalize(x, arrays):
        return streams.raw(x["video"], x["audio"], (f, h, w), audio_shape)

    arrays = {"video_positions": video_positions(dit_cfg, (f, h, w), conditioning_frame_rate(run))[None],
              "audio_positions": audio_positions(dit_cfg, frames)[None],
              "use_cross_timestep": np.full((1,), float(bool(run.options["use_cross_timestep"])), np.float32)}
    common = dict(model_kwargs=("video_positions", "audio_positions", "use_cross_timestep"), start=start,
                  finalize=finalize)
    if mask is None:
        return Conditioning(arrays=arrays, **common)
    return Conditioning(arrays={**arrays, "cond_mask": mask[..., 0]}, prepare=_i2v_prepare, step_kwargs=_i2v_step,
                        select_update=_hold_first_frame, **common)


def example_inputs(dit_cfg: Any, shapes: Any, frame_rate: float, batch: int, grid, text: int):
    """``DitBuild.example_inputs``: both streams' tokens (video (B, F H W, C), audio (B, L, C M) from the raw
    ``shapes``), the Gemma context of both streams through the connectors (the caption width when the DiT projects
    it, else each stream's width) with its mask, and both streams' positions at ``frame_rate``."""
    raw = shapes(batch, grid)
    _, c, f, h, w = raw["video"]
    _, ca, la, m = raw["audio"]
    wide = dit_cfg.use_prompt_embeddings
    v_ctx = dit_cfg.caption_channels if wide else dit_cfg.cross_attention_dim
    a_ctx = dit_cfg.caption_channels if wide else dit_cfg.audio_cross_attention_dim
    context = {"video": ((batch, text, v_ctx), "float32"), "audio": ((batch, text, a_ctx), "float32"),
               "mask": ((batch, text), bool)}
    vpos = video_positions(dit_cfg, (f, h, w), frame_rate)
    apos = audio_positions(dit_cfg, la)
    kwargs = {"video_positions": np.broadcast_to(vpos, (batch,) + vpos.shape),
              "audio_positions": np.broadcast_to(apos, (batch,) + apos.shape),
              "use_cross_timestep": np.zeros((batch,), np.float32)}
    return {"video": ((batch, f * h * w, c), "float32"), "audio": ((batch, la, ca * m), "float32")}, context, kwargs


def image_pixels(run: Any, crf: int) -> np.ndarray:
    """``image:`` as LTX2ImageToVideoPipeline feeds its VAE: H.264-compressed at ``crf`` (0: off), resized to the
    run's size (bilinear, as its video processor), (1, 3, H, W) in [-1, 1]."""
    from vidax_core.io.image import h264_roundtrip, load_image, preprocess_image

    s = run.sampling
    image = h264_roundtrip(load_image(run.image), crf)
    return preprocess_image(image, s.height, s.width, 32, resample="bilinear")


def _i2v_prepare(x, t, arrays):
    """The video tokens' model timesteps ``t * (1 - mask)`` (B, S): the conditioning frame at 0."""
    return x, t * (1.0 - arrays["cond_mask"])


def _i2v_step(values):
    """The audio stream and both streams' ``sigma`` keep the step's scalar timestep, as the pipeline passes them."""
    return {"audio_timestep": values["timestep"], "sigma": values["timestep"]}


def _hold_first_frame(new, old, t, arrays):
    """Only the frames after the conditioning one take the sampler's update (the pipeline steps ``[:, :, 1:]``)."""
    keep = arrays["cond_mask"][..., None] > 0
    return {**new, "video": jnp.where(keep, old["video"], new["video"])}


def latent_shapes(audio_cfg: Any, channels: int, frame_rate: float, temporal: int = 8):
    """``DitBuild.latent_shapes``: the raw layouts of both streams (what ``latents=`` / ``audio_latents=`` take).
    The video length is ``temporal * (F - 1) + 1`` frames (the run checks ``num_frames`` is of that form); the audio
    length follows it at ``frame_rate`` (the loading run's: a call at another ``frame_rate`` needs a new load)."""
    from .ltx2_audio import audio_latent_frames

    def shapes(batch: int, grid):
        f = int(grid[0])
        la = audio_latent_frames(audio_cfg, temporal * (f - 1) + 1, frame_rate)
        return {"video": (batch, channels) + tuple(int(v) for v in grid),
                "audio": (batch, int(audio_cfg.latent_channels), la, int(audio_cfg.latent_mel_bins))}

    return shapes
