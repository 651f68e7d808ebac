"""The causal video K-VAE of Kandinsky 6's super-resolution stage (diffusers ``Kandinsky6SRVAE``) in Flax NNX.

Channel-last throughout: pixels (B, T, H, W, 3) in [-1, 1], latents (B, t, h, w, C). The module tree mirrors
diffusers' names (one mirror key table, :data:`VAE_RULES`). What the reference does, reproduced:

* causal 3-D convolutions whose missing past is copies of the first frame, zero-padded in height and width;
* RMS norms over channels (``x / max(|x|, 1e-12) * sqrt(C) * gamma``, float32);
* the encoder's downsampling: a 2x2 pixel-unshuffle whose horizontal pairs are averaged, plus a stride-2
  convolution; with time compression the first frame kept and the later frames averaged in pairs, plus two causal
  time convolutions (the second of stride 2); a 1x1 mix;
* the decoder's upsampling: each frame repeated (the first once), a causal time convolution added; nearest 2x in
  space plus a convolution; a 1x1 mix; every decoder norm is a spatial norm modulated by the latents
  nearest-upsampled to the features' grid, the first latent frame on its own (``T + 1`` latent frames make
  ``4 T + 1`` pixel frames).

The reference runs 16-frame segments that carry their causal padding; its results equal one pass over the clip,
which is what runs here (the parity test covers clips of several segments). The encoder's posterior mode (its
mean) is what the pipeline uses; ``scaling_factor`` scales the latents.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core import CheckedConfig
from vidax_core.io.convert import MirrorRule, conv, squeeze
from vidax_core.nn.conv import Conv


@dataclasses.dataclass(frozen=True)
class Kandinsky6SRVAEConfig(CheckedConfig):
    """diffusers' ``Kandinsky6SRVAE`` config.json fields (defaults the reference's: the published repos' config is in
    the vendor's older flat key format, of which diffusers reads only ``scaling_factor``)."""

    in_channels: int = 3
    out_channels: int = 3
    latent_channels: int = 64
    encoder_block_out_channels: tuple[int, ...] = (16, 128, 256, 512, 1024)
    decoder_block_out_channels: tuple[int, ...] = (16, 256, 512, 1024, 2048)
    layers_per_block: int = 2
    temporal_compression_ratio: int = 4
    temporal_compression_start_level: Any = 1  # 0 is valid: checked in problems() (the reader's ints start at 1)
    scaling_factor: float = 0.910344004631042
    dtype: Any = jnp.float32

    label: ClassVar[str] = "vae/config.json (Kandinsky 6 SR K-VAE)"

    @property
    def spatial_ratio(self) -> int:
        return 2 ** (len(self.encoder_block_out_channels) - 1)

    @property
    def time_levels(self) -> tuple[int, int]:
        """The [start, end) levels that compress time."""
        start = self.temporal_compression_start_level
        return start, start + int(math.log2(self.temporal_compression_ratio))

    def problems(self) -> list[str]:
        out = []
        start = self.temporal_compression_start_level
        if type(start) is not int or not 0 <= start < 64:
            return [f"temporal_compression_start_level must be a level number (0, 1, ...), got {start!r}"]
        if len(self.encoder_block_out_channels) != len(self.decoder_block_out_channels):
            out.append("encoder_block_out_channels and decoder_block_out_channels must have the same length")
        r = self.temporal_compression_ratio
        if r < 1 or r & (r - 1):
            out.append(f"temporal_compression_ratio={r} must be a power of two")
        elif self.time_levels[1] > len(self.encoder_block_out_channels) - 1:
            out.append(f"temporal_compression_ratio={r} from level {self.temporal_compression_start_level} needs "
                       f"more than the {len(self.encoder_block_out_channels) - 1} downsampling levels")
        return out


# ------------------------------------------------------------------------------------------------------------
# layers


def conv3d(cin: int, cout: int, k, *, stride=1, pad=(0, 0, 0), dtype=jnp.float32) -> Conv:
    k = (k,) * 3 if isinstance(k, int) else tuple(k)
    return Conv(cin, cout, k, stride=stride, padding=[(p, p) for p in pad], dtype=dtype)


def causal_pad(x: jax.Array, frames: int) -> jax.Array:
    """``frames`` copies of the first frame before the clip (the reference's first-segment padding)."""
    return x if frames == 0 else jnp.concatenate([jnp.repeat(x[:, :1], frames, axis=1), x], axis=1)


class CausalConv(nnx.Module):
    """``Kandinsky6SRCausalConv3d``: time kernel kt over ``kt - 1`` copies of the first frame and the clip, stride
    in time, odd spatial kernels zero-padded to the same size."""

    def __init__(self, cin: int, cout: int, k, *, stride_t: int = 1, dtype=jnp.float32):
        k = (k,) * 3 if isinstance(k, int) else tuple(k)
        self.kt = k[0]
        self.conv = conv3d(cin, cout, k, stride=(stride_t, 1, 1), pad=(0, k[1] // 2, k[2] // 2), dtype=dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.conv(causal_pad(x, self.kt - 1))


class RMSNorm(nnx.Module):
    """``F.normalize(x, dim=channels) * sqrt(C) * gamma`` in float32, result in ``x``'s dtype (gamma (C,))."""

    def __init__(self, channels: int, dtype=jnp.float32):
        self.gamma = nnx.Param(jnp.ones((channels,), dtype))
        self.scale = float(channels) ** 0.5

    def __call__(self, x: jax.Array) -> jax.Array:
        xf = x.astype(jnp.float32)
        n = xf / jnp.maximum(jnp.sqrt(jnp.sum(xf * xf, axis=-1, keepdims=True)), 1e-12)
        return n.astype(x.dtype) * self.scale * self.gamma[...].astype(x.dtype)


def nearest(x: jax.Array, size) -> jax.Array:
    """torch ``F.interpolate(mode="nearest")`` of channel-last (B, T, H, W, C) to ``size`` (T', H', W')."""
    for axis, (n_in, n_out) in enumerate(zip(x.shape[1:4], size), start=1):
        if n_in != n_out:
            idx = np.minimum(np.floor(np.arange(n_out) * np.float32(n_in / n_out)).astype(np.int64), n_in - 1)
            x = jnp.take(x, jnp.asarray(idx), axis=axis)
    return x


class SpatialNorm(nnx.Module):
    """``Kandinsky6SRSpatialNorm3D``: RMS norm scaled and shifted by 1x1 convs of the latents ``zq``, nearest-
    upsampled to the features' grid (the first latent frame onto the first feature frame on its own)."""

    def __init__(self, channels: int, zq_channels: int, dtype=jnp.float32):
        self.norm_layer = RMSNorm(channels, dtype)
        self.conv_y = conv3d(zq_channels, channels, 1, dtype=dtype)
        self.conv_b = conv3d(zq_channels, channels, 1, dtype=dtype)

    def __call__(self, x: jax.Array, zq: jax.Array) -> jax.Array:
        t, h, w = x.shape[1:4]
        z = nearest(zq[:, :1], (1, h, w))
        if zq.shape[1] > 1:
            z = jnp.concatenate([z, nearest(zq[:, 1:], (t - 1, h, w))], axis=1)
        return self.norm_layer(x) * self.conv_y(z) + self.conv_b(z)


class ResnetBlock(nnx.Module):
    """``Kandinsky6SRResnetBlock3D``: (norm, SiLU, causal 3x3x3 conv) twice plus the (1x1 shortcut) input; decoder
    blocks' norms are spatial norms of ``zq``."""

    def __init__(self, cin: int, cout: int, zq_channels: int | None = None, dtype=jnp.float32):
        if zq_channels is None:
            self.norm1, self.norm2 = RMSNorm(cin, dtype), RMSNorm(cout, dtype)
        else:
            self.norm1, self.norm2 = SpatialNorm(cin, zq_channels, dtype), SpatialNorm(cout, zq_channels, dtype)
        self.conv1 = CausalConv(cin, cout, 3, dtype=dtype)
        self.conv2 = CausalConv(cout, cout, 3, dtype=dtype)
        self.nin_shortcut = conv3d(cin, cout, 1, dtype=dtype) if cin != cout else None

    def __call__(self, x: jax.Array, zq: jax.Array | None = None) -> jax.Array:
        norm = (lambda n, a: n(a)) if zq is None else (lambda n, a: n(a, zq))
        h = self.conv1(jax.nn.silu(norm(self.norm1, x)))
        h = self.conv2(jax.nn.silu(norm(self.norm2, h)))
        return (x if self.nin_shortcut is None else self.nin_shortcut(x)) + h


class Downsample(nnx.Module):
    """``Kandinsky6SRDownsample`` (module docstring): channels doubled, space halved, time halved when
    ``compress_time`` (``T`` frames -> ``(T + 1) / 2``)."""

    def __init__(self, cin: int, compress_time: bool, dtype=jnp.float32):
        cout = 2 * cin
        self.spatial_conv = conv3d(cin, cout, (1, 3, 3), stride=(1, 2, 2), pad=(0, 1, 1), dtype=dtype)
        self.temporal_conv = nnx.List([CausalConv(cout, cout, (2, 1, 1), dtype=dtype),
                                       CausalConv(cout, cout, (2, 1, 1), stride_t=2, dtype=dtype)]) \
            if compress_time else None
        self.linear = conv3d(cout, cout, 1, dtype=dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        b, t, h, w, c = x.shape
        pairs = x.reshape(b, t, h // 2, 2, w // 2, 2, c).mean(axis=5)  # (b, t, h/2, row offset, w/2, c)
        unshuffled = pairs.transpose(0, 1, 2, 4, 5, 3).reshape(b, t, h // 2, w // 2, 2 * c)
        x = self.spatial_conv(x) + unshuffled
        if self.temporal_conv is None:
            return self.linear(x)
        rest = x[:, 1:]
        pooled = x[:, :1]
        if rest.shape[1] >= 2:
            n = rest.shape[1] // 2
            pooled = jnp.concatenate([pooled, rest[:, :2 * n].reshape(b, n, 2, *rest.shape[2:]).mean(axis=2)],
                                     axis=1)
        y = self.temporal_conv[1](self.temporal_conv[0](x))
        return self.linear(y + pooled)


class Upsample(nnx.Module):
    """``Kandinsky6SRUpsample``: with ``compress_time`` each frame twice (the first once) plus a causal time conv;
    nearest 2x in space plus a (1, 3, 3) conv; a 1x1 mix."""

    def __init__(self, channels: int, compress_time: bool, dtype=jnp.float32):
        self.spatial_conv = conv3d(channels, channels, (1, 3, 3), pad=(0, 1, 1), dtype=dtype)
        self.temporal_conv = CausalConv(channels, channels, (3, 1, 1), dtype=dtype) if compress_time else None
        self.linear = conv3d(channels, channels, 1, dtype=dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        if self.temporal_conv is not None:
            repeated = jnp.repeat(x, 2, axis=1)[:, 1:]
            x = self.temporal_conv(repeated) + repeated
        x = jnp.repeat(jnp.repeat(x, 2, axis=2), 2, axis=3)
        return self.linear(x + self.spatial_conv(x))


class Level(nnx.Module):
    """One encoder (``block`` + ``downsample``) or decoder (``block`` + ``upsample``) level."""

    def __init__(self, blocks: list, sampler_name: str | None = None, sampler: Any = None):
        self.block = nnx.List(blocks)
        if sampler_name == "downsample":
            self.downsample = sampler
        elif sampler_name == "upsample":
            self.upsample = sampler


class Mid(nnx.Module):
    def __init__(self, block_1: ResnetBlock, block_2: ResnetBlock):
        self.block_1, self.block_2 = block_1, block_2


class Encoder(nnx.Module):
    """``Kandinsky6SREncoder3D``: pixels -> the posterior's moments (mean, log-variance) on channels."""

    def __init__(self, cfg: Kandinsky6SRVAEConfig):
        ch, dt, n = cfg.encoder_block_out_channels, cfg.dtype, len(cfg.encoder_block_out_channels)
        start, end = cfg.time_levels
        self.conv_in = CausalConv(cfg.in_channels, ch[0], 3, dtype=dt)
        levels = []
        for level in range(n):
            cin = ch[0] if level == 0 else 2 * ch[level - 1]
            blocks = []
            for _ in range(cfg.layers_per_block):
                blocks.append(ResnetBlock(cin, ch[level], dtype=dt))
                cin = ch[level]
            sampler = Downsample(cin, start <= level < end, dt) if level != n - 1 else None
            levels.append(Level(blocks, "downsample" if sampler is not None else None, sampler))
        self.down = nnx.List(levels)
        self.mid = Mid(ResnetBlock(cin, cin, dtype=dt), ResnetBlock(cin, cin, dtype=dt))
        self.norm_out = RMSNorm(cin, dt)
        self.conv_out = CausalConv(cin, 2 * cfg.latent_channels, 3, dtype=dt)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = self.conv_in(x)
        for level in self.down:
            for block in level.block:
                x = block(x)
            if hasattr(level, "downsample"):
                x = level.downsample(x)
        x = self.mid.block_2(self.mid.block_1(x))
        return self.conv_out(jax.nn.silu(self.norm_out(x)))


class Decoder(nnx.Module):
    """``Kandinsky6SRDecoder3D``: latents -> pixels, every norm modulated by the latents."""

    def __init__(self, cfg: Kandinsky6SRVAEConfig):
        ch, dt, n, z = cfg.decoder_block_out_channels, cfg.dtype, len(cfg.decoder_block_out_channels), \
            cfg.latent_channels
        start, end = cfg.time_levels
        cin = ch[-1]
        self.conv_in = CausalConv(z, cin, 3, dtype=dt)
        self.mid = Mid(ResnetBlock(cin, cin, z, dt), ResnetBlock(cin, cin, z, dt))
        levels: list[Any] = [None] * n
        for level in reversed(range(n)):
            blocks = []
            for _ in range(cfg.layers_per_block + 1):
                blocks.append(ResnetBlock(cin, ch[level], z, dt))
                cin = ch[level]
            sampler = Upsample(cin, n - start > level >= n - end, dt) if level != 0 else None
            levels[level] = Level(blocks, "upsample" if sampler is not None else None, sampler)
        self.up = nnx.List(levels)
        self.norm_out = SpatialNorm(cin, z, dt)
        self.conv_out = CausalConv(cin, cfg.out_channels, 3, dtype=dt)

    def __call__(self, z: jax.Array) -> jax.Array:
        x = self.conv_in(z)
        x = self.mid.block_2(self.mid.block_1(x, z), z)
        for level in reversed(range(len(self.up))):
            up = self.up[level]
            for block in up.block:
                x = block(x, z)
            if hasattr(up, "upsample"):
                x = up.upsample(x)
        return self.conv_out(jax.nn.silu(self.norm_out(x, z)))


class KVAE(nnx.Module):
    """``Kandinsky6SRVAE`` (module docstring); ``with_encoder`` / ``with_decoder`` False leave that half out (the SR
    run encodes once before sampling and decodes tile by tile after: the halves never need to be loaded together)."""

    def __init__(self, cfg: Kandinsky6SRVAEConfig, *, with_encoder: bool = True, with_decoder: bool = True):
        cfg.check_supported()
        self.cfg = cfg
        self.encoder = Encoder(cfg) if with_encoder else None
        self.decoder = Decoder(cfg) if with_decoder else None

    def encode_mean(self, pixels: jax.Array) -> jax.Array:
        """Pixels (B, T, H, W, 3) in [-1, 1] -> the posterior mean (B, t, h, w, C), unscaled."""
        return self.encoder(pixels.astype(self.cfg.dtype))[..., :self.cfg.latent_channels]

    def decode(self, z: jax.Array) -> jax.Array:
        """Unscaled latents (B, t, h, w, C) -> pixels (B, T, H, W, 3)."""
        return self.decoder(z.astype(self.cfg.dtype))


def mirror_rules(prefix: str) -> list[MirrorRule]:
    """Convolutions and RMS gains under ``prefix`` (a regex) onto a module tree that mirrors diffusers' names."""
    return [MirrorRule(prefix + r"\..*\.weight", {"weight": "kernel"}, conv),
            MirrorRule(prefix + r"\..*\.bias", {"bias": "bias"}),
            MirrorRule(prefix + r"\..*\.gamma", {"gamma": "gamma"}, squeeze)]


#: Every key of a ``Kandinsky6SRVAE`` checkpoint onto :class:`KVAE`.
VAE_RULES = mirror_rules("(encoder|decoder)")


def load_kvae(cfg: Kandinsky6SRVAEConfig, tensors: Any, *, with_encoder: bool = True, with_decoder: bool = True,
              put=None) -> KVAE:
    """The K-VAE (or one half of it) from a diffusers ``vae/`` folder's tensors (every problem reported at once)."""
    from vidax_core.io.load import load_model

    halves = [h for h, on in (("encoder", with_encoder), ("decoder", with_decoder)) if on]
    dropped = [rf"{h}\..*" for h in ("encoder", "decoder") if h not in halves]
    return load_model(lambda: KVAE(cfg, with_encoder=with_encoder, with_decoder=with_decoder), tensors,
                      mirror_rules(f"({'|'.join(halves)})"), component="vae", put=put, ignore=dropped)
