"""The audio stream of LTX2Pipeline around the DiT: latent layouts, (de)normalisation, and latents -> waveform.

Two layouts (diffusers 0.42.1 ``LTX2Pipeline``):

* raw latents (B, C, L, M): the audio VAE's own space, what the pipeline takes as ``audio_latents=`` and returns
  with ``output_type="latent"``; C = ``latent_channels``, M = ``mel_bins // 4``, and L latent frames cover
  ``L * 4 * mel_hop_length / sample_rate`` seconds (:func:`audio_latent_frames`);
* tokens (B, L, C * M): what the DiT sees, packed (:func:`pack_audio_latents`, features in (channel, bin) order)
  and normalised by the VAE's ``latents_mean`` / ``latents_std``,
  which hold one entry per packed feature (``base_channels``
  entries, so C * M must equal ``base_channels``: 8 x 16 = 128 at diffusers' defaults) and so are applied to the
  tokens, not per latent channel.

On the way in the pipeline packs, then normalises; on the way out it denormalises the tokens, unpacks them to raw
latents, decodes them to a mel spectrogram with the audio VAE and turns that into a waveform with the vocoder
(:func:`decode_audio_tokens`, :func:`decode_audio`; either vocoder class, :func:`load_audio_vocoder`). The waveform
is (B, out_channels, samples) at the vocoder's ``output_sampling_rate`` (:func:`sample_rate`).
"""

from __future__ import annotations

from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from vidax_core.errors import UserError

from .ltx2_audio_vae import LATENT_DOWNSAMPLE_FACTOR, LTX2AudioVAE, LTX2AudioVAEConfig, decode_device
from .ltx2_vocoder import LTX2Vocoder, LTX2VocoderConfig, load_vocoder, vocode_device
from .ltx2_vocoder_bwe import LTX2VocoderBWE, LTX2VocoderBWEConfig, load_vocoder_bwe

#: ``vocoder/config.json`` ``_class_name`` -> (config class, loader): LTX-2.0's plain generator, LTX-2.3+'s
#: bandwidth-extension pair.
VOCODER_CLASSES = {"LTX2Vocoder": (LTX2VocoderConfig, load_vocoder),
                   "LTX2VocoderWithBWE": (LTX2VocoderBWEConfig, load_vocoder_bwe)}


def audio_latent_frames(cfg: LTX2AudioVAEConfig, num_frames: int, frame_rate: float) -> int:
    """Latent audio frames for a video of ``num_frames`` at ``frame_rate`` fps: the pipeline's
    ``round(num_frames / frame_rate * sample_rate / mel_hop_length / 4)``."""
    per_second = cfg.sample_rate / cfg.mel_hop_length / float(LATENT_DOWNSAMPLE_FACTOR)
    return round(num_frames / frame_rate * per_second)


def pack_audio_latents(z: Any) -> Any:
    """Raw latents (B, C, L, M) -> tokens (B, L, C * M) (``_pack_audio_latents`` without patches); numpy or jax."""
    b, c, n, m = z.shape
    return z.transpose(0, 2, 1, 3).reshape(b, n, c * m)


def unpack_audio_latents(tokens: Any, num_mel_bins: int) -> Any:
    """Tokens (B, L, C * M) -> raw latents (B, C, L, M) (``_unpack_audio_latents``); ``num_mel_bins`` = M."""
    b, n, d = tokens.shape
    return tokens.reshape(b, n, d // num_mel_bins, num_mel_bins).transpose(0, 2, 1, 3)


def _stats(vae: LTX2AudioVAE, features: int) -> tuple[jax.Array, jax.Array]:
    mean, std = vae.latents_mean[...], vae.latents_std[...]
    if mean.shape != (features,):
        raise UserError(f"the audio VAE's latents_mean has {mean.shape[0]} entries but the audio tokens have "
                        f"{features} features (latent_channels x mel_bins / 4): audio_vae/config.json does not "
                        "describe this checkpoint")
    return mean, std


def normalize_audio_latents(vae: LTX2AudioVAE, tokens: Any) -> jax.Array:
    """Tokens in the raw space -> the DiT's normalised space: ``(x - latents_mean) / latents_std``."""
    x = jnp.asarray(tokens, jnp.float32)
    mean, std = _stats(vae, x.shape[-1])
    return (x - mean) / std


def denormalize_audio_latents(vae: LTX2AudioVAE, tokens: Any) -> jax.Array:
    """The DiT's normalised tokens -> the raw space: ``x * latents_std + latents_mean``."""
    x = jnp.asarray(tokens, jnp.float32)
    mean, std = _stats(vae, x.shape[-1])
    return x * std + mean


def load_audio_vocoder(config: Mapping[str, Any], tensors: Mapping[str, Any], *, put=None
                       ) -> LTX2Vocoder | LTX2VocoderBWE:
    """The vocoder a ``vocoder/`` folder holds, by its config.json ``_class_name`` (``LTX2Vocoder`` when absent)."""
    name = config.get("_class_name", "LTX2Vocoder")
    if name not in VOCODER_CLASSES:
        raise UserError(f"vocoder/config.json: _class_name {name!r} is not one of {', '.join(VOCODER_CLASSES)}")
    cfg_cls, load = VOCODER_CLASSES[name]
    return load(cfg_cls.from_config(config), tensors, put=put)


def sample_rate(vocoder: Any) -> int:
    """The waveform's sample rate (Hz): the vocoder's ``output_sampling_rate``."""
    return int(vocoder.cfg.output_sampling_rate)


def decode_audio(audio_vae: LTX2AudioVAE, vocoder: Any, latents_raw: Any) -> np.ndarray:
    """Raw audio latents (B, C, L, M) -> waveform (B, out_channels, samples) float32: ``vocoder(audio_vae.decode(
    latents).sample)`` as LTX2Pipeline ends, the mel staying on device between the two."""
    z = np.asarray(latents_raw, np.float32)
    cfg = audio_vae.cfg
    if z.ndim != 4 or z.shape[1] != cfg.latent_channels:
        raise UserError(f"LTX-2 audio latents are (B, {cfg.latent_channels}, frames, {cfg.latent_mel_bins}), "
                        f"got {z.shape}")
    mel = decode_device(audio_vae, jnp.asarray(np.moveaxis(z, 1, -1)))  # (B, T, bins, C)
    b, t, m, c = mel.shape
    feats = mel.transpose(0, 1, 3, 2).reshape(b, t, c * m)  # the vocoder's (channel, bin) features
    wave = vocode_device(vocoder, feats)
    return np.ascontiguousarray(np.moveaxis(np.asarray(wave, np.float32), -1, 1))


def decode_audio_tokens(audio_vae: LTX2AudioVAE, vocoder: Any, tokens: Any) -> np.ndarray:
    """The DiT's normalised audio tokens (B, L, C * M) -> waveform: denormalise, unpack, :func:`decode_audio`."""
    raw = unpack_audio_latents(denormalize_audio_latents(audio_vae, tokens), audio_vae.cfg.latent_mel_bins)
    return decode_audio(audio_vae, vocoder, raw)
