"""MMAudio's audio decoder in Flax NNX (diffusers ``MMAudioVAE`` + ``MMAudioVocoder``; Kandinsky 6 makes its sound
with them): audio latents -> log-mel spectrogram -> waveform.

The VAE (:class:`MMAudioDecoder`) is a magnitude-preserving 1-D network over time: every convolution is bias-free,
each residual block L2-normalises its input over the channels (``x / (1e-4 + |x| / sqrt(C))``), uses
``silu(x) / 0.596`` and joins its branch as ``lerp(x, h, 0.3) / sqrt(0.7^2 + 0.3^2)``; activations are clipped to
+-256 after every residual block. ``conv_in``, a middle of block - attention - block (the attention normalises q,
k and v per head before a softmax attention over time), then per level from the widest ``layers_per_block + 1``
blocks, a nearest 2x upsample and a 3-tap conv after level 1, and ``conv_out`` with a learned gain ``1 + g``. The
mel is de-standardised with the checkpoint's per-bin ``data_mean`` / ``data_std``. Only the decoder is built: the
pipeline never encodes sound (the checkpoint's encoder and mel front end are left unread).

The vocoder is the core's BigVGAN generator (:mod:`vidax_core.audio.bigvgan`) with BigVGAN-v2's settings: SnakeBeta
activations, anti-aliased 2x around each, a clamp at the end, no output bias; :data:`VOCODER_RULES` maps
``MMAudioVocoder``'s names onto it. :func:`decode` is what the pipeline does with ``audio_latents``:
``vocoder(vae.decode(z / scaling_factor))[:, 0]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.audio.bigvgan import BigVGAN, BigVGANConfig, vocode_device
from vidax_core.errors import UserError
from vidax_core.io.arch import from_config_dict
from vidax_core.io.convert import KeyRule, conv, conv_transpose, flatten
from vidax_core.io.load import load_model
from vidax_core.nn.conv import Conv

CLIP = 256.0
NORM_EPS = 1e-4
SILU_GAIN = 0.596
JOIN = 0.3  # the residual joins' interpolation weight


@dataclass(frozen=True)
class MMAudioVAEConfig:
    """diffusers ``MMAudioVAE`` config.json fields (the reference's defaults)."""

    mel_bins: int = 128
    latent_channels: int = 40
    hidden_channels: int = 512
    channel_multipliers: tuple[int, ...] = (1, 2, 4)
    layers_per_block: int = 2
    sample_rate: int = 44100
    n_fft: int = 2048
    hop_length: int = 512
    scaling_factor: float = 0.417
    dtype: Any = jnp.float32

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> "MMAudioVAEConfig":
        return from_config_dict(cls, dict(config), **overrides)

    @property
    def latent_hop_length(self) -> int:
        """Waveform samples per latent frame (the decoder doubles the time axis once)."""
        return self.hop_length * 2


def vocoder_config(config: Mapping[str, Any], sample_rate: int, dtype: Any = jnp.float32) -> BigVGANConfig:
    """The generator of an ``MMAudioVocoder`` config.json dict (its output rate is the paired VAE's)."""
    c = {"num_mels": 128, "upsample_initial_channel": 1536, "upsample_rates": (8, 4, 2, 2, 2, 2),
         "upsample_kernel_sizes": (16, 8, 4, 4, 4, 4), "resblock_kernel_sizes": (3, 7, 11),
         "resblock_dilation_sizes": ((1, 3, 5), (1, 3, 5), (1, 3, 5)), **dict(config)}
    cfg = BigVGANConfig(
        in_channels=int(c["num_mels"]), hidden_channels=int(c["upsample_initial_channel"]), out_channels=1,
        upsample_kernel_sizes=tuple(c["upsample_kernel_sizes"]), upsample_factors=tuple(c["upsample_rates"]),
        resnet_kernel_sizes=tuple(c["resblock_kernel_sizes"]),
        resnet_dilations=tuple(tuple(d) for d in c["resblock_dilation_sizes"]), act_fn="snakebeta",
        antialias=True, antialias_ratio=2, antialias_kernel_size=12, final_act_fn="clamp", final_bias=False,
        output_sampling_rate=int(sample_rate), dtype=dtype)
    cfg.check()
    return cfg


# ------------------------------------------------------------------------------------------------------------
# the magnitude-preserving pieces (channel-last: (B, T, C))


def normalize(x: jax.Array, axis: int = -1) -> jax.Array:
    """``x`` over ``axis`` to unit RMS norm: ``x / (1e-4 + |x| sqrt(1 / n))``."""
    n = x.shape[axis]
    norm = jnp.sqrt(jnp.sum(jnp.square(x.astype(jnp.float32)), axis=axis, keepdims=True))
    return x / (NORM_EPS + norm * math.sqrt(1.0 / n)).astype(x.dtype)


def mp_silu(x: jax.Array) -> jax.Array:
    return jax.nn.silu(x) / SILU_GAIN


def mp_sum(a: jax.Array, b: jax.Array, t: float = JOIN) -> jax.Array:
    return (a + t * (b - a)) / math.sqrt((1 - t) ** 2 + t ** 2)


def mp_conv(cin: int, cout: int, k: int, dtype: Any) -> Conv:
    """``MMAudioMPConv1d``: bias-free, 'same' padding ``k // 2``."""
    return Conv(cin, cout, (k,), padding=((k // 2, k // 2),), bias=False, dtype=dtype)


class ResBlock(nnx.Module):
    """``MMAudioResnetBlock1D``."""

    def __init__(self, cin: int, cout: int, dtype: Any):
        self.conv1 = mp_conv(cin, cout, 3, dtype)
        self.conv2 = mp_conv(cout, cout, 3, dtype)
        self.nin_shortcut = mp_conv(cin, cout, 1, dtype) if cin != cout else None

    def __call__(self, x: jax.Array) -> jax.Array:
        x = normalize(x)
        h = self.conv2(mp_silu(self.conv1(mp_silu(x))))
        if self.nin_shortcut is not None:
            x = self.nin_shortcut(x)
        return mp_sum(x, h)


class AttnBlock(nnx.Module):
    """``MMAudioAttnBlock1D`` (one head): a 1x1 conv to q/k/v (interleaved per channel: channel ``3 c + j``),
    each normalised over its channels, softmax attention over time, a 1x1 projection, joined as the blocks are."""

    def __init__(self, channels: int, dtype: Any, heads: int = 1):
        self.heads = heads
        self.qkv = mp_conv(channels, 3 * channels, 1, dtype)
        self.proj_out = mp_conv(channels, channels, 1, dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        from vidax_core.attention import attention

        b, t, c = x.shape
        qkv = self.qkv(x).reshape(b, t, self.heads, c // self.heads, 3)
        qkv = normalize(qkv, axis=3)
        q, k, v = (qkv[..., j] for j in range(3))  # (B, T, H, D)
        o = attention(q, k, v).reshape(b, t, c)
        return mp_sum(x, self.proj_out(o))


class Level(nnx.Module):
    def __init__(self, blocks: list, upsample: Conv | None):
        self.block = nnx.List(blocks)
        self.upsample = upsample


class MMAudioDecoder(nnx.Module):
    """``MMAudioVAE``'s decoder and mel statistics: latents (B, T, latent_channels) -> mel (B, 2 T, mel_bins)."""

    def __init__(self, cfg: MMAudioVAEConfig):
        dt = cfg.dtype
        mults = tuple(cfg.channel_multipliers)
        width = cfg.hidden_channels * mults[-1]
        self.cfg = cfg
        self.conv_in = mp_conv(cfg.latent_channels, width, 3, dt)
        self.block_1 = ResBlock(width, width, dt)
        self.attn_1 = AttnBlock(width, dt)
        self.block_2 = ResBlock(width, width, dt)
        levels: list[Any] = [None] * len(mults)
        for level in reversed(range(len(mults))):
            out = cfg.hidden_channels * mults[level]
            blocks = []
            for _ in range(cfg.layers_per_block + 1):
                blocks.append(ResBlock(width, out, dt))
                width = out
            levels[level] = Level(blocks, mp_conv(width, width, 3, dt) if level == 1 else None)
        self.up = nnx.List(levels)
        self.conv_out = mp_conv(width, cfg.mel_bins, 3, dt)
        self.learnable_gain = nnx.Param(jnp.zeros((), jnp.float32))
        self.data_mean = nnx.Param(jnp.zeros((cfg.mel_bins,), jnp.float32))
        self.data_std = nnx.Param(jnp.ones((cfg.mel_bins,), jnp.float32))

    def __call__(self, z: jax.Array) -> jax.Array:
        x = self.conv_in(z.astype(self.cfg.dtype))
        x = self.attn_1(self.block_1(x))
        x = jnp.clip(self.block_2(x), -CLIP, CLIP)
        for level in reversed(range(len(self.up))):
            up = self.up[level]
            for block in up.block:
                x = jnp.clip(block(x), -CLIP, CLIP)
            if up.upsample is not None:
                x = up.upsample(jnp.repeat(x, 2, axis=1))  # nearest-exact 2x
        mel = self.conv_out(mp_silu(x)).astype(jnp.float32) * (self.learnable_gain[...] + 1.0)
        return mel * self.data_std[...] + self.data_mean[...]


# ------------------------------------------------------------------------------------------------------------
# key tables and loading


VAE_RULES: list[KeyRule] = [
    KeyRule(r"vae\.decoder\.conv_(in|out)\.weight", "conv_{1}/kernel", conv),
    KeyRule(r"vae\.decoder\.mid\.(block_[12])\.(conv1|conv2|nin_shortcut)\.weight", "{1}/{2}/kernel", conv),
    KeyRule(r"vae\.decoder\.mid\.attn_1\.(qkv|proj_out)\.weight", "attn_1/{1}/kernel", conv),
    KeyRule(r"vae\.decoder\.up\.(\d+)\.block\.(\d+)\.(conv1|conv2|nin_shortcut)\.weight", "up/{1}/block/{2}/{3}/kernel",
            conv),
    KeyRule(r"vae\.decoder\.up\.(\d+)\.upsample\.conv\.weight", "up/{1}/upsample/kernel", conv),
    KeyRule(r"vae\.decoder\.learnable_gain", "learnable_gain"),
    KeyRule(r"vae\.data_(mean|std)", "data_{1}", flatten),
]
VAE_IGNORE = (r"vae\.encoder\..*", r"mel_converter\..*")  # the encoder side, unused by the pipeline


_VOCODER_NAMED: list[KeyRule] = [
    KeyRule(r"conv_pre\.weight", "conv_in/kernel", conv), KeyRule(r"conv_pre\.bias", "conv_in/bias"),
    KeyRule(r"conv_post\.weight", "conv_out/kernel", conv),
    KeyRule(r"ups\.(\d+)\.0\.weight", "upsamplers/{1}/kernel", conv_transpose),
    KeyRule(r"ups\.(\d+)\.0\.bias", "upsamplers/{1}/bias"),
    KeyRule(r"resblocks\.(\d+)\.(convs[12])\.(\d+)\.weight", "resnets/{1}/{2}/{3}/kernel", conv),
    KeyRule(r"resblocks\.(\d+)\.(convs[12])\.(\d+)\.bias", "resnets/{1}/{2}/{3}/bias"),
    KeyRule(r"activation_post\.act\.(alpha|beta)", "act_out/act/{1}"),
    KeyRule(r"activation_post\.upsample\.filter", "act_out/upsample/filter", flatten),
    KeyRule(r"activation_post\.downsample\.lowpass\.filter", "act_out/downsample/filter", flatten),
]


class _ActivationRule(KeyRule):
    """``resblocks.{j}.activations.{m}``: the reference interleaves each dilation's two activations (``m = 2 i``
    before ``convs1[i]``, ``2 i + 1`` before ``convs2[i]``); vidax holds them as ``acts1[i]`` / ``acts2[i]``."""

    def match(self, key: str):
        m = self._regex.fullmatch(key)
        if m is None:
            return None
        block, index, rest = m.group(1), int(m.group(2)), m.group(3)
        leaf = {"act.alpha": "act/alpha", "act.beta": "act/beta", "upsample.filter": "upsample/filter",
                "downsample.lowpass.filter": "downsample/filter"}.get(rest)
        if leaf is None:
            return None
        parts = ("resnets", int(block), f"acts{index % 2 + 1}", index // 2, *leaf.split("/"))
        return parts, None


VOCODER_RULES: list[KeyRule] = [
    *_VOCODER_NAMED,
    _ActivationRule(r"resblocks\.(\d+)\.activations\.(\d+)\.(.+)", "", flatten),
]


def load_vae(cfg: MMAudioVAEConfig, tensors: Mapping[str, Any], *, put=None) -> MMAudioDecoder:
    """An ``MMAudioVAE`` state dict -> the live decoder (every decoder key used, every parameter filled)."""
    return load_model(lambda: MMAudioDecoder(cfg), tensors, VAE_RULES, component="audio_vae", put=put,
                      ignore=list(VAE_IGNORE))


def load_vocoder(cfg: BigVGANConfig, tensors: Mapping[str, Any], *, put=None) -> BigVGAN:
    """An ``MMAudioVocoder`` state dict -> the live generator."""
    return load_model(lambda: BigVGAN(cfg), tensors, VOCODER_RULES, component="vocoder", put=put)


def check_pair(vae: MMAudioVAEConfig, vocoder: BigVGANConfig) -> list[str]:
    """What makes an audio VAE and a vocoder not belong together, one line each."""
    out = []
    if vae.mel_bins != vocoder.in_channels:
        out.append(f"audio_vae/config.json: mel_bins={vae.mel_bins} differs from the vocoder's num_mels="
                   f"{vocoder.in_channels}")
    if vae.hop_length != vocoder.hop:
        out.append(f"audio_vae/config.json: hop_length={vae.hop_length} differs from the vocoder's upsampling "
                   f"(prod(upsample_rates)={vocoder.hop})")
    return out


def _decode_impl(graphdef, state, z):
    return nnx.merge(graphdef, state)(z)


_decode_jit = jax.jit(_decode_impl, static_argnames=("graphdef",))


def decode(vae: MMAudioDecoder, vocoder: BigVGAN, latents: Any) -> np.ndarray:
    """The pipeline's audio decode: ``latents`` (B, latent_channels, T) as the transformer leaves them (scaled by
    ``scaling_factor``) -> waveform (B, samples) float32 in [-1, 1] at the VAE's ``sample_rate``."""
    z = np.asarray(latents, np.float32)
    if z.ndim != 3 or z.shape[1] != vae.cfg.latent_channels:
        raise UserError(f"audio latents must be (batch, {vae.cfg.latent_channels}, frames), got {z.shape}")
    z = jnp.asarray(np.ascontiguousarray(z.transpose(0, 2, 1))) / jnp.float32(vae.cfg.scaling_factor)
    graphdef, state = nnx.split(vae)
    mel = _decode_jit(graphdef, state, z)
    wave = vocode_device(vocoder, mel)
    return np.asarray(wave[..., 0], np.float32)
