"""LTX-2.3+ vocoder with bandwidth extension (diffusers ``LTX2VocoderWithBWE``) in Flax NNX: mel -> 48 kHz waveform.

Two :class:`~vidax_ltx.ltx2_vocoder.LTX2Vocoder` generators in sequence: ``vocoder`` turns the VAE's mel into a
waveform at ``input_sampling_rate``; a causal log-mel STFT of that waveform (``mel_stft``: a Hann-windowed DFT
basis and a mel filterbank, both checkpoint buffers) feeds ``bwe_generator``, whose output is a residual added to
the stage-1 waveform resampled to ``output_sampling_rate`` (a Hann-windowed sinc :class:`UpSample1d`, computed,
not stored); the sum is clamped to [-1, 1] and cut to ``samples * output / input`` samples.

Public interface: :meth:`LTX2VocoderBWEConfig.from_config`, :func:`load_vocoder_bwe`; the model runs through
:func:`vidax_ltx.ltx2_vocoder.vocode` like the plain vocoder (same ``cfg.in_channels`` / ``output_sampling_rate``).

The reference pads a stage-1 waveform whose length is not a multiple of ``hop_length`` through an attribute it
lacks (it would raise); at diffusers' default sizes the length is always a multiple (hop 80 divides the 160x
upsampling). Here such a waveform is zero-padded on the right, what the reference means.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import jax
import jax.numpy as jnp
from flax import nnx

from vidax_core.errors import UserError
from vidax_core.io.arch import from_config_dict
from vidax_core.io.convert import KeyRule, MirrorRule, conv
from vidax_core.io.load import load_model
from vidax_core.nn.antialias import UpSample1d

from .ltx2_vocoder import LTX2Vocoder, LTX2VocoderConfig, vocoder_rules


@dataclass(frozen=True)
class LTX2VocoderBWEConfig:
    """diffusers ``LTX2VocoderWithBWE`` config.json fields (defaults: the reference's, LTX-2.3's), plus the compute
    dtype; :meth:`stage1` and :meth:`bwe` are the two generators' configs."""

    in_channels: int = 128
    hidden_channels: int = 1536
    out_channels: int = 2
    upsample_kernel_sizes: tuple[int, ...] = (11, 4, 4, 4, 4, 4)
    upsample_factors: tuple[int, ...] = (5, 2, 2, 2, 2, 2)
    resnet_kernel_sizes: tuple[int, ...] = (3, 7, 11)
    resnet_dilations: tuple[tuple[int, ...], ...] = ((1, 3, 5), (1, 3, 5), (1, 3, 5))
    act_fn: str = "snakebeta"
    leaky_relu_negative_slope: float = 0.1
    antialias: bool = True
    antialias_ratio: int = 2
    antialias_kernel_size: int = 12
    final_act_fn: str | None = None
    final_bias: bool = False
    bwe_in_channels: int = 128
    bwe_hidden_channels: int = 512
    bwe_out_channels: int = 2
    bwe_upsample_kernel_sizes: tuple[int, ...] = (12, 11, 4, 4, 4)
    bwe_upsample_factors: tuple[int, ...] = (6, 5, 2, 2, 2)
    bwe_resnet_kernel_sizes: tuple[int, ...] = (3, 7, 11)
    bwe_resnet_dilations: tuple[tuple[int, ...], ...] = ((1, 3, 5), (1, 3, 5), (1, 3, 5))
    bwe_act_fn: str = "snakebeta"
    bwe_leaky_relu_negative_slope: float = 0.1
    bwe_antialias: bool = True
    bwe_antialias_ratio: int = 2
    bwe_antialias_kernel_size: int = 12
    bwe_final_act_fn: str | None = None
    bwe_final_bias: bool = False
    filter_length: int = 512
    hop_length: int = 80
    window_length: int = 512
    num_mel_channels: int = 64
    input_sampling_rate: int = 16000
    output_sampling_rate: int = 48000
    dtype: Any = jnp.float32

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> "LTX2VocoderBWEConfig":
        """From a diffusers config.json dict (unknown keys ignored), checked (:meth:`check`)."""
        cfg = from_config_dict(cls, dict(config), **overrides)
        cfg.check()
        return cfg

    def _generator(self, prefix: str, sampling_rate: int) -> LTX2VocoderConfig:
        names = ("in_channels", "hidden_channels", "out_channels", "upsample_kernel_sizes", "upsample_factors",
                 "resnet_kernel_sizes", "resnet_dilations", "act_fn", "leaky_relu_negative_slope", "antialias",
                 "antialias_ratio", "antialias_kernel_size", "final_act_fn", "final_bias")
        return LTX2VocoderConfig(**{n: getattr(self, prefix + n) for n in names},
                                 output_sampling_rate=sampling_rate, dtype=self.dtype)

    def stage1(self) -> LTX2VocoderConfig:
        return self._generator("", self.input_sampling_rate)

    def bwe(self) -> LTX2VocoderConfig:
        return self._generator("bwe_", self.output_sampling_rate)

    def check(self, where: str = "vocoder/config.json") -> None:
        """Each generator's checks, plus the sizes the two stages must agree on."""
        self.stage1().check(where)
        self.bwe().check(where)
        ratio, rem = divmod(self.output_sampling_rate, self.input_sampling_rate)
        if rem or ratio < 1:
            raise UserError(f"{where}: output_sampling_rate {self.output_sampling_rate} is not a multiple of "
                            f"input_sampling_rate {self.input_sampling_rate}")
        if self.bwe_in_channels != self.out_channels * self.num_mel_channels:
            raise UserError(f"{where}: bwe_in_channels {self.bwe_in_channels} is not out_channels x "
                            f"num_mel_channels = {self.out_channels * self.num_mel_channels}")
        if self.window_length < self.hop_length:
            raise UserError(f"{where}: window_length {self.window_length} is shorter than hop_length")


class CausalSTFT(nnx.Module):
    """``CausalSTFT``: magnitudes of a left-padded strided DFT whose (windowed) basis is the checkpoint's
    ``forward_basis`` (kept here as conv kernel (filter_length, 1, 2 n_freqs)). (N, L, 1) -> (N, frames, n_freqs)."""

    def __init__(self, filter_length: int, hop_length: int, window_length: int):
        self.hop, self.left = hop_length, max(0, window_length - hop_length)
        self.forward_basis = nnx.Param(jnp.zeros((filter_length, 1, 2 * (filter_length // 2 + 1)), jnp.float32))

    def __call__(self, x: jax.Array) -> jax.Array:
        x = jnp.pad(x.astype(jnp.float32), ((0, 0), (self.left, 0), (0, 0)))
        spec = jax.lax.conv_general_dilated(x, self.forward_basis[...], window_strides=(self.hop,), padding="VALID",
                                            dimension_numbers=("NWC", "WIO", "NWC"))
        n = spec.shape[-1] // 2
        return jnp.sqrt(spec[..., :n] ** 2 + spec[..., n:] ** 2)


class MelSTFT(nnx.Module):
    """``MelSTFT``: ``log(max(mel_basis @ |STFT|, 1e-5))``; (N, L, 1) -> (N, frames, num_mel_channels)."""

    def __init__(self, cfg: LTX2VocoderBWEConfig):
        self.stft_fn = CausalSTFT(cfg.filter_length, cfg.hop_length, cfg.window_length)
        self.mel_basis = nnx.Param(jnp.zeros((cfg.num_mel_channels, cfg.filter_length // 2 + 1), jnp.float32))

    def __call__(self, x: jax.Array) -> jax.Array:
        mag = self.stft_fn(x)
        mel = jnp.einsum("nfk,mk->nfm", mag, self.mel_basis[...], preferred_element_type=jnp.float32)
        return jnp.log(jnp.maximum(mel, 1e-5))


class LTX2VocoderBWE(nnx.Module):
    """``LTX2VocoderWithBWE``; ``__call__``: mel features (B, T, in_channels) -> waveform (B, samples, channels)."""

    def __init__(self, cfg: LTX2VocoderBWEConfig):
        cfg.check()
        self.cfg = cfg
        self.vocoder = LTX2Vocoder(cfg.stage1())
        self.bwe_generator = LTX2Vocoder(cfg.bwe())
        self.mel_stft = MelSTFT(cfg)
        self.resampler = UpSample1d(cfg.output_sampling_rate // cfg.input_sampling_rate, window="hann",
                                    persistent=False)

    def __call__(self, x: jax.Array) -> jax.Array:
        cfg = self.cfg
        wave = self.vocoder(x)  # (B, N, C) at the input rate
        b, n, c = wave.shape
        wave = jnp.pad(wave, ((0, 0), (0, -n % cfg.hop_length), (0, 0)))
        per_channel = wave.transpose(0, 2, 1).reshape(b * c, -1, 1)
        mel = self.mel_stft(per_channel)  # (B C, frames, mels)
        frames = mel.shape[1]
        feats = mel.reshape(b, c, frames, -1).transpose(0, 2, 1, 3).reshape(b, frames, -1)  # (channel, bin) order
        residual = self.bwe_generator(feats.astype(wave.dtype))
        skip = self.resampler(wave)
        out = jnp.clip(residual.astype(jnp.float32) + skip.astype(jnp.float32), -1.0, 1.0)
        return out[:, : n * cfg.output_sampling_rate // cfg.input_sampling_rate].astype(wave.dtype)


#: Every key of an ``LTX2VocoderWithBWE`` state dict but the inverse STFT basis (unused by the forward pass).
VOCODER_BWE_RULES: list[KeyRule] = [
    *vocoder_rules(r"vocoder\."),
    *vocoder_rules(r"bwe_generator\."),
    MirrorRule(r"mel_stft\.stft_fn\.forward_basis", {"forward_basis": "forward_basis"}, conv),
    MirrorRule(r"mel_stft\.mel_basis", {"mel_basis": "mel_basis"}),
]
VOCODER_BWE_IGNORE = [r"mel_stft\.stft_fn\.inverse_basis"]


def load_vocoder_bwe(cfg: LTX2VocoderBWEConfig, tensors: Mapping[str, Any], *, put=None) -> LTX2VocoderBWE:
    """A diffusers ``LTX2VocoderWithBWE`` state dict -> a live :class:`LTX2VocoderBWE` (every parameter, the STFT
    and mel buffers included, filled; every key but ``inverse_basis`` used)."""
    return load_model(lambda: LTX2VocoderBWE(cfg), tensors, VOCODER_BWE_RULES, component="vocoder", put=put,
                      ignore=VOCODER_BWE_IGNORE)
