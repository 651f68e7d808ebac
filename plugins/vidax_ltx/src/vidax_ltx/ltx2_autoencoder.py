"""LTX-2.x's decoders as the generic pipeline sees them: one object holding the video VAE, the audio VAE and the
vocoder (:class:`vidax_core.model_api.VideoAutoencoder` returning :class:`vidax_core.model_api.Decoded`).

It receives the latents ``output.save_latents`` writes, LTX2Pipeline's ``output_type="latent"`` layouts:
``{"video": (B, 128, F, H, W), "audio": (B, C, L, M)}`` in the VAEs' raw (denormalised) spaces. Video: for a
timestep-conditioned decoder the latents are normalised, mixed with decode noise ``(1 - s) z + s n`` (``s`` =
``decode_noise_scale``, by default ``decode_timestep``; ``n`` is vidax's own seeded draw, so parity with diffusers
holds at ``s = 0``) and denormalised again, then decoded at ``decode_timestep``; frames ``x / 2 + 1/2`` clipped to
[0, 1]. With ``options.video_decoder=diffusion`` the video is decoded by the LTX-2.5 diffusion decoder instead
(:mod:`.ltx2_diffusion_decode`; the convolutional VAE is then read only for its latent statistics, or whole when an
image is encoded). Audio: audio VAE to a mel spectrogram, vocoder to a waveform at the vocoder's output rate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class LTX2Autoencoder:
    video_vae: Any
    video_cfg: Any  # LTX2VAEConfig with its latent statistics
    audio_vae: Any
    vocoder: Any
    decode_timestep: float = 0.0
    decode_noise_scale: float | None = None
    seed: int = 0
    diffusion: Any = None  # the LTX-2.5 diffusion decoder, when options.video_decoder=diffusion
    placement: Any = None  # where it runs (ltx2_diffusion_decode.Placement)
    noise_path: str | None = None  # sampling.initial_noise (its decoder_k draws replay the reference's)

    def latent_shape(self, num_frames: int, height: int, width: int) -> tuple[int, int, int]:
        from .autoencoder import latent_grid

        c = self.video_cfg
        return latent_grid(num_frames, height, width, int(c.temporal_compression_ratio or 8),
                           int(c.spatial_compression_ratio or 32))

    def audio_shape(self, num_frames: int, frame_rate: float) -> tuple[int, int, int]:
        """(channels, latent frames, latent mel bins) of the audio latents for a video of ``num_frames`` at
        ``frame_rate``."""
        from .ltx2_audio import audio_latent_frames

        c = self.audio_vae.cfg
        return int(c.latent_channels), audio_latent_frames(c, num_frames, frame_rate), int(c.latent_mel_bins)

    def _video(self, z: np.ndarray, on_chunk, params) -> np.ndarray:
        import jax

        from . import ltx2_vae

        if self.diffusion is not None:
            from .ltx2_diffusion_decode import decode, noise_source

            video = decode(self.diffusion, z, noise_source(self.seed, self.noise_path), placement=self.placement,
                           on_stage=(lambda: on_chunk(0, 1)) if on_chunk else None)
            if on_chunk:
                on_chunk(1, 1)
            return _frames(video)
        cfg = self.video_cfg
        timestep = None
        if getattr(cfg, "timestep_conditioning", False):
            s = self.decode_timestep if self.decode_noise_scale is None else self.decode_noise_scale
            if s:
                key = jax.random.fold_in(jax.random.key(self.seed), 2)
                noise = np.asarray(jax.random.normal(key, z.shape, np.float32))
                z = ltx2_vae.denormalize_latents(
                    ltx2_vae.mix_decode_noise(ltx2_vae.normalize_latents(z, cfg), noise, s), cfg)
            timestep = np.full((z.shape[0],), self.decode_timestep, np.float32)
        video = ltx2_vae.decode(self.video_vae, z, timestep=timestep, tiling=params.get("tiling"),
                                on_chunk=on_chunk, devices=params.get("devices") or jax.local_devices())
        return _frames(video)

    def decode_video(self, latents, on_chunk=None, **params):
        from vidax_core.model_api import Decoded

        from .ltx2_audio import decode_audio, sample_rate

        frames = self._video(np.asarray(latents["video"], np.float32), on_chunk, params)
        wave = decode_audio(self.audio_vae, self.vocoder, latents["audio"])  # (B, channels, samples)
        return Decoded(frames, np.ascontiguousarray(np.moveaxis(wave, 1, -1)), sample_rate(self.vocoder))

    def encode_image(self, pixels: np.ndarray) -> np.ndarray:
        """(1, 3, H, W) in [-1, 1] -> the first latent frame (1, C, 1, h, w) normalised as image-to-video does:
        the posterior's mean (``retrieve_latents(..., "argmax")``), ``(z - mean) / std`` (scaling 1)."""
        from . import ltx2_vae

        mean, _ = ltx2_vae.encode(self.video_vae, np.asarray(pixels, np.float32)[:, :, None])
        c = self.video_cfg
        shape = (1, -1, 1, 1, 1)
        return ((np.asarray(mean, np.float32) - np.asarray(c.latents_mean, np.float32).reshape(shape))
                / np.asarray(c.latents_std, np.float32).reshape(shape)).astype(np.float32)

    def encode_video(self, frames, on_chunk=None, **params):
        raise NotImplementedError("LTX-2.x conditions on one image (image-to-video), not on a video")


def _frames(video: Any) -> np.ndarray:
    """Decoded pixels (B, 3, T, H, W) in [-1, 1] -> frames (B, T, H, W, 3) in [0, 1]."""
    frames = np.clip(np.asarray(video, np.float32) * np.float32(0.5) + np.float32(0.5), 0.0, 1.0)
    return np.ascontiguousarray(frames.transpose(0, 2, 3, 4, 1))


def load(ckpt: Any, run: Any) -> LTX2Autoencoder:
    """The three decoders of a diffusers-layout checkpoint (``vae/``, ``audio_vae/``, ``vocoder/``), with the video
    encoder when the run has an image to condition on; ``options.video_decoder=diffusion`` reads
    ``diffusion_decoder/`` for the video instead of the VAE's decoder."""
    from .ltx2_audio import load_audio_vocoder
    from .ltx2_audio_vae import LTX2AudioVAEConfig, load_audio_vae
    from .ltx2_vae import LTX2VAEConfig, load_ltx2_latent_stats, load_ltx2_vae

    cfg = LTX2VAEConfig.from_config(ckpt.config("vae"))
    diffusion = placement = None
    if run.options.get("video_decoder") == "diffusion":
        from vidax_core import dit_weight_dtype

        from . import ltx2_diffusion_decode as dd
        from .ltx2_diffusion_decoder import LTX2DiffusionDecoderConfig

        dcfg = LTX2DiffusionDecoderConfig.from_config(ckpt.config(dd.COMPONENT), dtype=dit_weight_dtype(run))
        placement = dd.placement_for(dcfg, run)
        diffusion = dd.load(dcfg, ckpt.tensors(dd.COMPONENT), placement)
    if diffusion is not None and run.image is None:
        video = None
        load_ltx2_latent_stats(cfg, ckpt.tensors("vae"))
    else:
        video = load_ltx2_vae(cfg, ckpt.tensors("vae"), with_encoder=run.image is not None)
    audio = load_audio_vae(LTX2AudioVAEConfig.from_config(ckpt.config("audio_vae")), ckpt.tensors("audio_vae"),
                           with_encoder=False)
    vocoder = load_audio_vocoder(ckpt.config("vocoder"), ckpt.tensors("vocoder"))
    o = run.options
    return LTX2Autoencoder(video, cfg, audio, vocoder, float(o.get("decode_timestep") or 0.0),
                           None if o.get("decode_noise_scale") is None else float(o["decode_noise_scale"]),
                           int(run.sampling.seed), diffusion=diffusion, placement=placement,
                           noise_path=run.sampling.initial_noise)
