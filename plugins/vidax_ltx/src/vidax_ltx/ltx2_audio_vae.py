"""LTX-2 audio VAE (diffusers ``AutoencoderKLLTX2Audio``) in Flax NNX: latents <-> mel spectrogram.

Public interface:

* :meth:`LTX2AudioVAEConfig.from_config` (an ``audio_vae/config.json`` dict), :func:`load_audio_vae` (its
  diffusers state dict, real key names; ``with_encoder=False`` builds the decoder alone);
* :func:`decode` ``(vae, z)``: raw latents (B, C, L, M), what ``audio_vae.decode(z)`` takes, -> its ``.sample``,
  the mel spectrogram (B, output_channels, max(4 L - 3, 1), mel_bins) float32 numpy;
* :func:`encode` ``(vae, mel)``: mel spectrogram (B, in_channels, T, mel_bins) -> the posterior's
  ``(mean, logvar)`` (B, latent_channels, L, M), logvar clamped to [-30, 20] (``DiagonalGaussianDistribution``).

Layout facts of the reference: the spectrogram axes are (time, mel) = torch's (height, width), so the LTX-2
checkpoints' ``causality_axis="height"`` makes every 3x3 conv causal in time (all of its padding in front) and
symmetric in mel; each upsampler (nearest x2, conv) then drops its first time row, so ``L`` latent frames decode to
``4 L - 3`` mel frames, and the decoder crops or zero-pads its output to ``max(4 L - 3, 1)`` frames and ``mel_bins``
bins whatever its depth (diffusers hard-codes the factor 4). Norms are a parameter-free per-position RMS over
channels (``norm_type="pixel"``, eps 1e-6) or GroupNorm(32); resnets have no timestep input; the optional
attention is single-head over all (time, mel) positions. Activations are channel-last (B, T, M, C) inside.

The per-channel statistics ``latents_mean`` / ``latents_std`` (``base_channels`` entries, applied by the pipeline
to packed (B, L, C * M) tokens, see :mod:`vidax_ltx.ltx2_audio`) are parameters of the model here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.errors import UserError
from vidax_core.io.arch import from_config_dict
from vidax_core.io.convert import KeyRule, MirrorRule, conv
from vidax_core.nn.conv import Conv
from vidax_core.nn.group_norm import GroupNorm
from vidax_core.nn.norms import rms_norm
from vidax_core.vae.chunks import gaussian_posterior
from vidax_core.vae.loader import vae_loader

#: Time (and mel) compression of the latents; diffusers' ``LATENT_DOWNSAMPLE_FACTOR``, fixed whatever ``ch_mult``.
LATENT_DOWNSAMPLE_FACTOR = 4
CAUSALITY_AXES = ("none", "width", "height", "width-compatibility")
_NORM_EPS = 1e-6


@dataclass(eq=False)
class LTX2AudioVAEConfig:
    """diffusers ``AutoencoderKLLTX2Audio`` config.json fields (defaults are the reference's), plus the compute
    dtype. Hashed by identity, so the model that holds it can be a static jit argument."""

    base_channels: int = 128
    output_channels: int = 2
    ch_mult: tuple[int, ...] = (1, 2, 4)
    num_res_blocks: int = 2
    attn_resolutions: tuple[int, ...] | None = None
    in_channels: int = 2
    resolution: int = 256
    latent_channels: int = 8
    norm_type: str = "pixel"
    causality_axis: str = "height"
    dropout: float = 0.0
    mid_block_add_attention: bool = False
    sample_rate: int = 16000
    mel_hop_length: int = 160
    is_causal: bool = True
    mel_bins: int | None = 64
    double_z: bool = True
    dtype: Any = jnp.float32

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> "LTX2AudioVAEConfig":
        """From a diffusers config.json dict (unknown keys ignored), checked (:meth:`check`)."""
        cfg = from_config_dict(cls, dict(config), **overrides)
        cfg.check()
        return cfg

    def check(self) -> None:
        """Refuse what the reference refuses (unknown causality axis or norm, causal GroupNorm resnets)."""
        if self.causality_axis not in CAUSALITY_AXES:
            raise UserError(f"audio_vae/config.json: causality_axis {self.causality_axis!r} is not one of "
                            f"{', '.join(CAUSALITY_AXES)}")
        if self.norm_type not in ("pixel", "group"):
            raise UserError(f"audio_vae/config.json: norm_type {self.norm_type!r} is not pixel or group")
        if self.norm_type == "group" and self.causality_axis != "none":
            raise UserError("audio_vae/config.json: GroupNorm resnets need causality_axis none (the reference "
                            "refuses causal GroupNorm blocks)")

    @property
    def latent_mel_bins(self) -> int:
        """Mel bins of the latents (``mel_bins // 4``, the pipeline's ``latent_mel_bins``)."""
        return int(self.mel_bins or 64) // LATENT_DOWNSAMPLE_FACTOR


# --------------------------------------------------------------------------------------------------------------
# layers


def _pads(kernel: int, axis: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """(time, mel) zero padding of ``LTX2AudioCausalConv2d``: the causal axis padded in front only."""
    p = kernel - 1
    sym = (p // 2, p - p // 2)
    if axis == "height":
        return (p, 0), sym
    if axis in ("width", "width-compatibility"):
        return sym, (p, 0)
    return sym, sym


class CausalConv2d(nnx.Module):
    """``LTX2AudioCausalConv2d``: the core :class:`~vidax_core.nn.conv.Conv` as ``conv`` (diffusers'
    ``<name>.conv.weight``), padded per the causality axis."""

    def __init__(self, cin: int, cout: int, k: int, axis: str, *, dtype):
        self.conv = Conv(cin, cout, (k, k), padding=_pads(k, axis), dtype=dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.conv(x)


class Norm(nnx.Module):
    """``LTX2AudioPixelNorm`` (no parameters) or ``nn.GroupNorm(32, eps=1e-6)`` over channels."""

    def __init__(self, channels: int, norm_type: str):
        self.group = GroupNorm(channels, 32, eps=_NORM_EPS) if norm_type == "group" else None

    def __call__(self, x: jax.Array) -> jax.Array:
        return rms_norm(x, eps=_NORM_EPS) if self.group is None else self.group(x)


class ResnetBlock(nnx.Module):
    """``LTX2AudioResnetBlock`` without a timestep: norm, SiLU, conv, twice, plus a 1x1 (``nin_shortcut``)
    projection of the input when the width changes."""

    def __init__(self, cin: int, cout: int, cfg: LTX2AudioVAEConfig, *, dtype):
        self.norm1 = Norm(cin, cfg.norm_type)
        self.conv1 = CausalConv2d(cin, cout, 3, cfg.causality_axis, dtype=dtype)
        self.norm2 = Norm(cout, cfg.norm_type)
        self.conv2 = CausalConv2d(cout, cout, 3, cfg.causality_axis, dtype=dtype)
        self.nin_shortcut = CausalConv2d(cin, cout, 1, cfg.causality_axis, dtype=dtype) if cin != cout else None

    def __call__(self, x: jax.Array) -> jax.Array:
        h = self.conv1(jax.nn.silu(self.norm1(x)))
        h = self.conv2(jax.nn.silu(self.norm2(h)))  # dropout: inference no-op
        if self.nin_shortcut is not None:
            x = self.nin_shortcut(x)
        return x + h


class AttnBlock(nnx.Module):
    """``LTX2AudioAttnBlock``: single-head softmax attention over every (time, mel) position, 1x1 conv
    projections, residual."""

    def __init__(self, channels: int, norm_type: str, *, dtype):
        self.norm = Norm(channels, norm_type)
        self.q, self.k, self.v, self.proj_out = (Conv(channels, channels, (1, 1), dtype=dtype) for _ in range(4))

    def __call__(self, x: jax.Array) -> jax.Array:
        b, t, m, c = x.shape
        h = self.norm(x)
        q, k, v = (p(h).reshape(b, t * m, c) for p in (self.q, self.k, self.v))
        s = jnp.einsum("bic,bjc->bij", q, k, preferred_element_type=jnp.float32) * (c ** -0.5)
        a = jax.nn.softmax(s, axis=-1).astype(v.dtype)
        o = jnp.einsum("bij,bjc->bic", a, v, preferred_element_type=jnp.float32).astype(x.dtype)
        return x + self.proj_out(o.reshape(b, t, m, c))


class Upsample(nnx.Module):
    """``LTX2AudioUpsample``: nearest x2 on both axes, causal conv, then the first row of the causal axis dropped."""

    def __init__(self, channels: int, axis: str, *, dtype):
        self.conv = CausalConv2d(channels, channels, 3, axis, dtype=dtype)
        self.axis = axis

    def __call__(self, x: jax.Array) -> jax.Array:
        x = self.conv(jnp.repeat(jnp.repeat(x, 2, axis=1), 2, axis=2))
        if self.axis == "height":
            return x[:, 1:]
        if self.axis == "width":
            return x[:, :, 1:]
        return x


#: ``LTX2AudioDownsample`` zero padding ((time before, after), (mel before, after)) per causality axis.
_DOWN_PADS = {"none": ((0, 1), (0, 1)), "width": ((0, 1), (2, 0)), "height": ((2, 0), (0, 1)),
              "width-compatibility": ((0, 1), (1, 0))}


class Downsample(nnx.Module):
    """``LTX2AudioDownsample`` (with conv): a plain 3x3 stride-2 ``conv`` after the axis' zero padding."""

    def __init__(self, channels: int, axis: str, *, dtype):
        self.conv = Conv(channels, channels, (3, 3), stride=2, padding=_DOWN_PADS[axis], dtype=dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.conv(x)


class Stage(nnx.Module):
    """One resolution level: ``block`` resnets, an ``attn`` after each when the level is in ``attn_resolutions``,
    and the level's ``upsample`` / ``downsample`` (None at the innermost / outermost level)."""

    def __init__(self, widths: list[tuple[int, int]], attend: bool, cfg: LTX2AudioVAEConfig, *, dtype,
                 upsample: bool = False, downsample: bool = False):
        self.block = nnx.List([ResnetBlock(ci, co, cfg, dtype=dtype) for ci, co in widths])
        self.attn = nnx.List([AttnBlock(co, cfg.norm_type, dtype=dtype) for _, co in widths] if attend else [])
        out = widths[-1][1]
        self.upsample = Upsample(out, cfg.causality_axis, dtype=dtype) if upsample else None
        self.downsample = Downsample(out, cfg.causality_axis, dtype=dtype) if downsample else None

    def __call__(self, x: jax.Array) -> jax.Array:
        for i, blk in enumerate(self.block):
            x = blk(x)
            if len(self.attn):
                x = self.attn[i](x)
        if self.upsample is not None:
            x = self.upsample(x)
        if self.downsample is not None:
            x = self.downsample(x)
        return x


class Mid(nnx.Module):
    """``mid``: resnet, optional attention (``mid_block_add_attention``), resnet."""

    def __init__(self, channels: int, cfg: LTX2AudioVAEConfig, *, dtype):
        self.block_1 = ResnetBlock(channels, channels, cfg, dtype=dtype)
        self.attn_1 = AttnBlock(channels, cfg.norm_type, dtype=dtype) if cfg.mid_block_add_attention else None
        self.block_2 = ResnetBlock(channels, channels, cfg, dtype=dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = self.block_1(x)
        if self.attn_1 is not None:
            x = self.attn_1(x)
        return self.block_2(x)


def _attends(cfg: LTX2AudioVAEConfig, res: int) -> bool:
    return bool(cfg.attn_resolutions) and res in set(cfg.attn_resolutions)


class Decoder(nnx.Module):
    """``LTX2AudioDecoder``; ``up[level]`` is the stage of ``level`` (run from the innermost level out)."""

    def __init__(self, cfg: LTX2AudioVAEConfig, *, dtype):
        n, base, mult = len(cfg.ch_mult), cfg.base_channels, cfg.ch_mult
        width = base * mult[-1]
        res = cfg.resolution // 2 ** (n - 1)
        self.conv_in = CausalConv2d(cfg.latent_channels, width, 3, cfg.causality_axis, dtype=dtype)
        self.mid = Mid(width, cfg, dtype=dtype)
        stages: dict[int, Stage] = {}
        for level in reversed(range(n)):
            out = base * mult[level]
            widths = [(width if j == 0 else out, out) for j in range(cfg.num_res_blocks + 1)]
            stages[level] = Stage(widths, _attends(cfg, res), cfg, dtype=dtype, upsample=level != 0)
            width = out
            res = res * 2 if level != 0 else res
        self.up = nnx.List([stages[level] for level in range(n)])
        self.norm_out = Norm(width, cfg.norm_type)
        self.conv_out = CausalConv2d(width, cfg.output_channels, 3, cfg.causality_axis, dtype=dtype)
        self.out_channels, self.mel_bins = cfg.output_channels, cfg.mel_bins

    def __call__(self, z: jax.Array) -> jax.Array:
        """Latents (B, L, M, C) -> spectrogram (B, max(4 L - 3, 1), mel_bins, output_channels)."""
        frames, mels = z.shape[1], z.shape[2]
        target_t = max(frames * LATENT_DOWNSAMPLE_FACTOR - (LATENT_DOWNSAMPLE_FACTOR - 1), 1)
        target_m = self.mel_bins if self.mel_bins is not None else mels
        x = self.mid(self.conv_in(z))
        for level in reversed(range(len(self.up))):
            x = self.up[level](x)
        x = self.conv_out(jax.nn.silu(self.norm_out(x)))
        x = x[:, :target_t, :target_m, : self.out_channels]
        return jnp.pad(x, ((0, 0), (0, target_t - x.shape[1]), (0, target_m - x.shape[2]), (0, 0)))


class Encoder(nnx.Module):
    """``LTX2AudioEncoder``: conv_in, ``down[level]`` stages (downsampling after every level but the last), mid,
    norm, SiLU, conv_out to ``2 * latent_channels`` moments (``double_z``)."""

    def __init__(self, cfg: LTX2AudioVAEConfig, *, dtype):
        n, base, mult = len(cfg.ch_mult), cfg.base_channels, cfg.ch_mult
        self.conv_in = CausalConv2d(cfg.in_channels, base, 3, cfg.causality_axis, dtype=dtype)
        width, res, stages = base, cfg.resolution, []
        for level in range(n):
            out = base * mult[level]
            widths = [(width if j == 0 else out, out) for j in range(cfg.num_res_blocks)]
            stages.append(Stage(widths, _attends(cfg, res), cfg, dtype=dtype, downsample=level != n - 1))
            width = out
            res = res // 2 if level != n - 1 else res
        self.down = nnx.List(stages)
        self.mid = Mid(width, cfg, dtype=dtype)
        self.norm_out = Norm(width, cfg.norm_type)
        z = 2 * cfg.latent_channels if cfg.double_z else cfg.latent_channels
        self.conv_out = CausalConv2d(width, z, 3, cfg.causality_axis, dtype=dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = self.conv_in(x)
        for stage in self.down:
            x = stage(x)
        return self.conv_out(jax.nn.silu(self.norm_out(self.mid(x))))


class LTX2AudioVAE(nnx.Module):
    """``AutoencoderKLLTX2Audio``. Parameters start at zeros (statistics at 0 / 1); :func:`load_audio_vae` fills
    them."""

    def __init__(self, cfg: LTX2AudioVAEConfig, *, with_encoder: bool = True):
        cfg.check()
        dtype = jnp.dtype(cfg.dtype)
        self.cfg = cfg
        self.decoder = Decoder(cfg, dtype=dtype)
        self.encoder = Encoder(cfg, dtype=dtype) if with_encoder else None
        self.latents_mean = nnx.Param(jnp.zeros((cfg.base_channels,), jnp.float32))
        self.latents_std = nnx.Param(jnp.ones((cfg.base_channels,), jnp.float32))


# --------------------------------------------------------------------------------------------------------------
# key table: diffusers names -> parameter paths (the module tree mirrors diffusers', so each rule is a rename)

_CAUSAL = r"(?:conv_in|conv_out|(?:mid\.block_[12]|(?:up|down)\.\d+\.block\.\d+)\.(?:conv1|conv2|nin_shortcut)" \
          r"|up\.\d+\.upsample\.conv)"
_PLAIN = r"(?:(?:mid\.attn_1|(?:up|down)\.\d+\.attn\.\d+)\.(?:q|k|v|proj_out)|down\.\d+\.downsample\.conv)"
_NORM = r"(?:norm_out|(?:mid\.block_[12]|(?:up|down)\.\d+\.block\.\d+)\.norm[12]|(?:mid\.attn_1|(?:up|down)\.\d+" \
        r"\.attn\.\d+)\.norm)"


def audio_vae_rules(with_encoder: bool = True) -> list[KeyRule]:
    """Every key of ``AutoencoderKLLTX2Audio``'s state dict (the decoder's and the statistics only without the
    encoder); GroupNorm gains and biases land in ``<norm>/group``."""
    net = r"(?:encoder|decoder)" if with_encoder else r"decoder"
    return [
        MirrorRule(rf"{net}\.(?:{_CAUSAL}\.conv|{_PLAIN})\.weight", {"weight": "kernel"}, conv),
        MirrorRule(rf"{net}\.(?:{_CAUSAL}\.conv|{_PLAIN})\.bias", {"bias": "bias"}),
        MirrorRule(rf"{net}\.{_NORM}\.(weight|bias)", {"weight": "group/scale", "bias": "group/bias"}),
        MirrorRule(r"latents_mean|latents_std", {"latents_mean": "latents_mean", "latents_std": "latents_std"}),
    ]


AUDIO_VAE_RULES = audio_vae_rules(True)
#: Keys dropped when the audio VAE is loaded decode-only.
DECODER_IGNORE = [r"encoder\..*"]

load_audio_vae = vae_loader(
    LTX2AudioVAE, AUDIO_VAE_RULES, audio_vae_rules(False), decode_only_ignore=DECODER_IGNORE,
    doc="A diffusers ``AutoencoderKLLTX2Audio`` state dict (key -> array or zero-arg loader) -> a live "
        ":class:`LTX2AudioVAE` (``cfg`` from :meth:`LTX2AudioVAEConfig.from_config`); ``with_encoder=False`` drops "
        "the encoder's tensors. Every other key must be used and every parameter filled.")


# --------------------------------------------------------------------------------------------------------------
# decode / encode


def _apply(graphdef, state, x):
    return nnx.merge(graphdef, state)(x)


#: One program per (decoder or encoder structure, input shape): the half that runs is split off on its own, so a
#: full VAE and a decode-only one built from the same config share the decoder's program.
_apply_jit = jax.jit(_apply, static_argnames=("graphdef",))


def _channels_last(x: Any, channels: int, what: str) -> jax.Array:
    a = np.asarray(x, np.float32)
    if a.ndim != 4 or a.shape[1] != channels:
        raise UserError(f"{what} (B, {channels}, frames, mel bins), got {np.shape(x)}")
    return np.moveaxis(a, 1, -1)


def decode_device(vae: LTX2AudioVAE, z: jax.Array) -> jax.Array:
    """:func:`decode` on device arrays, channel-last in and out ((B, L, M, C) -> (B, T, mel_bins, C_out)), for
    callers that keep going on device (the vocoder)."""
    graphdef, state = nnx.split(vae.decoder)
    return _apply_jit(graphdef, state, z.astype(jnp.dtype(vae.cfg.dtype)))


def decode(vae: LTX2AudioVAE, z: Any) -> np.ndarray:
    """``audio_vae.decode(z).sample``: raw latents (B, latent_channels, L, M) -> mel spectrogram
    (B, output_channels, max(4 L - 3, 1), mel_bins) float32."""
    zz = _channels_last(z, vae.cfg.latent_channels, "the LTX-2 audio VAE decodes latents")
    out = decode_device(vae, jnp.asarray(zz))
    return np.ascontiguousarray(np.moveaxis(np.asarray(out, np.float32), -1, 1))


def encode(vae: LTX2AudioVAE, mel: Any) -> tuple[np.ndarray, np.ndarray]:
    """``audio_vae.encode(mel).latent_dist``: spectrogram (B, in_channels, T, mel_bins) -> ``(mean, logvar)``,
    each (B, latent_channels, L, M) float32, logvar clamped to [-30, 20]."""
    if vae.encoder is None:
        raise ValueError("this LTX-2 audio VAE was loaded without its encoder (with_encoder=False)")
    if not vae.cfg.double_z:
        raise UserError("audio_vae/config.json: double_z false gives no posterior variance; encode needs double_z")
    xx = _channels_last(mel, vae.cfg.in_channels, "the LTX-2 audio VAE encodes spectrograms")
    graphdef, state = nnx.split(vae.encoder)
    out = _apply_jit(graphdef, state, jnp.asarray(xx, jnp.dtype(vae.cfg.dtype)))
    return gaussian_posterior(np.asarray(out, np.float32), vae.cfg.latent_channels)
