"""Kandinsky 6's decoders as the generic pipeline sees them: the HunyuanVideo VAE for the video (the core's, latents
(B, C, F, H, W) divided by ``scaling_factor``), MMAudio's audio VAE and vocoder for the sound
(:mod:`vidax_core.audio.mmaudio`), returning :class:`vidax_core.model_api.Decoded` (frames, and the waveform the
mp4 gets as its track). It takes what ``output.save_latents`` writes: ``{"video", "audio"}``, or the video alone
(``options.sample_audio=false``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class Kandinsky6Autoencoder:
    video: Any  # vidax_core.vae.hunyuan_video.HunyuanVideoAutoencoder (channel-first)
    audio_vae: Any = None  # vidax_core.audio.mmaudio.MMAudioDecoder
    vocoder: Any = None  # vidax_core.audio.bigvgan.BigVGAN

    def latent_shape(self, num_frames: int, height: int, width: int) -> tuple[int, int, int]:
        return self.video.latent_shape(num_frames, height, width)

    def decode_video(self, latents, on_chunk=None, **params):
        from vidax_core.audio.mmaudio import decode
        from vidax_core.model_api import Decoded

        video = latents["video"] if isinstance(latents, dict) else latents
        frames = self.video.decode_video(video, on_chunk=on_chunk, **params)
        if not isinstance(latents, dict):
            return frames
        wave = decode(self.audio_vae, self.vocoder, latents["audio"])  # (B, samples)
        return Decoded(frames, np.ascontiguousarray(wave[..., None]), int(self.audio_vae.cfg.sample_rate))

    def encode_video(self, frames, on_chunk=None, **params):
        return self.video.encode_video(frames, on_chunk=on_chunk, **params)


def load(ckpt: Any, run: Any) -> Kandinsky6Autoencoder:
    """The video VAE (with its encoder when the run conditions on an image) and, with ``options.sample_audio``,
    the audio VAE and vocoder of a diffusers-layout checkpoint."""
    from vidax_core.model_api import vae_encodes
    from vidax_core.vae.hunyuan_video import load_autoencoder

    video = load_autoencoder(ckpt.config("vae"), ckpt.tensors("vae"), with_encoder=vae_encodes(run))
    if not run.options.get("sample_audio", True):
        return Kandinsky6Autoencoder(video)
    from vidax_core.audio import mmaudio

    vae_cfg = mmaudio.MMAudioVAEConfig.from_config(ckpt.config("audio_vae"))
    voc_cfg = mmaudio.vocoder_config(ckpt.config("vocoder"), vae_cfg.sample_rate)
    return Kandinsky6Autoencoder(video, mmaudio.load_vae(vae_cfg, ckpt.tensors("audio_vae")),
                                 mmaudio.load_vocoder(voc_cfg, ckpt.tensors("vocoder")))
