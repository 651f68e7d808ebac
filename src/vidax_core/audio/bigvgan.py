"""The BigVGAN / HiFi-GAN vocoder generator (mel spectrogram -> waveform) in Flax NNX, as diffusers builds it for
LTX-2 (``LTX2Vocoder``) and MMAudio (``MMAudioVocoder``, Kandinsky 6): one module, each family's key table maps its
checkpoint onto it (:mod:`vidax_ltx.ltx2_vocoder`, :mod:`vidax_core.audio.mmaudio`).

Architecture (facts of the references): ``conv_in`` (k 7), then per stage a transposed-conv upsampler (``padding =
(k - stride) // 2``, preceded by a leaky ReLU of slope ``leaky_relu_negative_slope`` in the leaky-ReLU variant) and
the mean of ``len(resnet_kernel_sizes)`` multi-receptive-field resnets (``x += conv2(act2(conv1(act1(x))))`` per
dilation, 'same' padding); then ``act_out`` (a leaky ReLU of torch's default slope 0.01 in the leaky-ReLU variant,
else an anti-aliased SnakeBeta), ``conv_out`` (k 7) and the final ``tanh`` / clamp / nothing. With ``act_fn`` snake
or snakebeta every resnet activation is a Snake (``snake``: amplitude alpha) or SnakeBeta, anti-aliased
(:class:`vidax_core.nn.antialias.AntiAliasAct1d`) when ``antialias`` (BigVGAN-v2, MMAudio's vocoder). The
leaky-ReLU variant with anti-aliasing is refused: the LTX reference builds its second activations by re-wrapping
the previous one. Channel-last: features (B, T, in_channels) -> waveform (B, T * hop, out_channels).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import jax
import jax.numpy as jnp
from flax import nnx

from vidax_core.errors import UserError
from vidax_core.io.arch import from_config_dict
from vidax_core.nn.antialias import AntiAliasAct1d
from vidax_core.nn.conv import Conv, ConvTranspose1d, same_padding
from vidax_core.nn.snake import SnakeBeta

ACT_FNS = ("snakebeta", "snake", "leaky_relu")
FINAL_ACTS = ("tanh", "clamp", None)


@dataclass(frozen=True)
class BigVGANConfig:
    """diffusers ``LTX2Vocoder`` config.json fields (defaults are the reference's, LTX-2.0's vocoder), plus the
    compute dtype."""

    in_channels: int = 128
    hidden_channels: int = 1024
    out_channels: int = 2
    upsample_kernel_sizes: tuple[int, ...] = (16, 15, 8, 4, 4)
    upsample_factors: tuple[int, ...] = (6, 5, 2, 2, 2)
    resnet_kernel_sizes: tuple[int, ...] = (3, 7, 11)
    resnet_dilations: tuple[tuple[int, ...], ...] = ((1, 3, 5), (1, 3, 5), (1, 3, 5))
    act_fn: str = "leaky_relu"
    leaky_relu_negative_slope: float = 0.1
    antialias: bool = False
    antialias_ratio: int = 2
    antialias_kernel_size: int = 12
    final_act_fn: str | None = "tanh"
    final_bias: bool = True
    output_sampling_rate: int = 24000
    dtype: Any = jnp.float32

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> "BigVGANConfig":
        """From a diffusers config.json dict (unknown keys ignored), checked (:meth:`check`)."""
        cfg = from_config_dict(cls, dict(config), **overrides)
        cfg.check()
        return cfg

    def check(self, where: str = "vocoder/config.json") -> None:
        """Refuse what the reference refuses (list lengths, unknown activations) and the leaky-ReLU anti-aliased
        variant (see the module docstring)."""
        if len(self.upsample_kernel_sizes) != len(self.upsample_factors):
            raise UserError(f"{where}: upsample_kernel_sizes and upsample_factors differ in length")
        if len(self.resnet_kernel_sizes) != len(self.resnet_dilations):
            raise UserError(f"{where}: resnet_kernel_sizes and resnet_dilations differ in length")
        if self.act_fn not in ACT_FNS:
            raise UserError(f"{where}: act_fn {self.act_fn!r} is not one of {', '.join(ACT_FNS)}")
        if self.final_act_fn not in FINAL_ACTS:
            raise UserError(f"{where}: final_act_fn {self.final_act_fn!r} is not tanh, clamp or null")
        if self.act_fn == "leaky_relu" and self.antialias:
            raise UserError(f"{where}: act_fn leaky_relu with antialias is not supported (use snakebeta)")
        if self.hidden_channels % 2 ** len(self.upsample_factors):
            raise UserError(f"{where}: hidden_channels {self.hidden_channels} does not halve "
                            f"{len(self.upsample_factors)} times")

    @property
    def hop(self) -> int:
        """Waveform samples per mel frame (``prod(upsample_factors)``)."""
        return math.prod(self.upsample_factors)


class LeakyReLU(nnx.Module):
    """``nn.LeakyReLU(slope)`` (no parameters)."""

    def __init__(self, slope: float):
        self.slope = float(slope)

    def __call__(self, x: jax.Array) -> jax.Array:
        return jax.nn.leaky_relu(x, self.slope)


def _activation(cfg: BigVGANConfig, channels: int) -> nnx.Module:
    """One resnet activation: a leaky ReLU, or a (possibly anti-aliased) Snake / SnakeBeta."""
    if cfg.act_fn == "leaky_relu":
        return LeakyReLU(cfg.leaky_relu_negative_slope)
    act = SnakeBeta(channels, use_beta=cfg.act_fn == "snakebeta")
    return AntiAliasAct1d(act, cfg.antialias_ratio, cfg.antialias_kernel_size) if cfg.antialias else act


class ResBlock(nnx.Module):
    """diffusers ``ResBlock``: per dilation ``x + conv2(act2(conv1(act1(x))))``, conv1 dilated, 'same' padding."""

    def __init__(self, channels: int, kernel: int, dilations: tuple[int, ...], cfg: BigVGANConfig, *, dtype):
        def c(d: int) -> Conv:
            return Conv(channels, channels, (kernel,), padding=(same_padding(kernel, d),), dilation=d, dtype=dtype)

        self.convs1 = nnx.List([c(d) for d in dilations])
        self.acts1 = nnx.List([_activation(cfg, channels) for _ in dilations])
        self.convs2 = nnx.List([c(1) for _ in dilations])
        self.acts2 = nnx.List([_activation(cfg, channels) for _ in dilations])

    def __call__(self, x: jax.Array) -> jax.Array:
        for act1, conv1, act2, conv2 in zip(self.acts1, self.convs1, self.acts2, self.convs2):
            x = x + conv2(act2(conv1(act1(x))))
        return x


class BigVGAN(nnx.Module):
    """The generator. Parameters start at zeros (filters at their computed taps); a family's key table fills
    them. ``__call__``: features (B, T, in_channels) -> waveform (B, T * hop, out_channels)."""

    def __init__(self, cfg: BigVGANConfig):
        cfg.check()
        dtype = jnp.dtype(cfg.dtype)
        self.cfg = cfg
        self.conv_in = Conv(cfg.in_channels, cfg.hidden_channels, (7,), padding=((3, 3),), dtype=dtype)
        ups, res = [], []
        width = cfg.hidden_channels
        for stride, k in zip(cfg.upsample_factors, cfg.upsample_kernel_sizes):
            ups.append(ConvTranspose1d(width, width // 2, k, stride=stride, padding=(k - stride) // 2, dtype=dtype))
            width //= 2
            res += [ResBlock(width, rk, tuple(d), cfg, dtype=dtype)
                    for rk, d in zip(cfg.resnet_kernel_sizes, cfg.resnet_dilations)]
        self.upsamplers, self.resnets = nnx.List(ups), nnx.List(res)
        if cfg.act_fn == "leaky_relu":
            self.act_out = LeakyReLU(0.01)  # torch's default slope, as the reference
        else:
            self.act_out = AntiAliasAct1d(SnakeBeta(width, use_beta=True), cfg.antialias_ratio,
                                          cfg.antialias_kernel_size)
        self.conv_out = Conv(width, cfg.out_channels, (7,), padding=((3, 3),), bias=cfg.final_bias, dtype=dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        cfg = self.cfg
        n = len(cfg.resnet_kernel_sizes)
        x = self.conv_in(x)
        for i, up in enumerate(self.upsamplers):
            if cfg.act_fn == "leaky_relu":
                x = jax.nn.leaky_relu(x, cfg.leaky_relu_negative_slope)
            x = up(x)
            outs = [self.resnets[j](x) for j in range(i * n, (i + 1) * n)]
            x = (sum(o.astype(jnp.float32) for o in outs) / n).astype(x.dtype)
        x = self.conv_out(self.act_out(x))
        if cfg.final_act_fn == "tanh":
            x = jnp.tanh(x)
        elif cfg.final_act_fn == "clamp":
            x = jnp.clip(x, -1.0, 1.0)
        return x


def _vocode_impl(graphdef, state, x):
    return nnx.merge(graphdef, state)(x)


_vocode_jit = jax.jit(_vocode_impl, static_argnames=("graphdef",))


def vocode_device(vocoder: nnx.Module, features: jax.Array) -> jax.Array:
    """The vocoder on device features (B, T, in_channels) -> waveform (B, samples, out_channels), one compiled
    program per input shape."""
    graphdef, state = nnx.split(vocoder)
    return _vocode_jit(graphdef, state, features.astype(jnp.dtype(vocoder.cfg.dtype)))
