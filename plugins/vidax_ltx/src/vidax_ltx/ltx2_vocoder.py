"""LTX-2 vocoder (diffusers ``LTX2Vocoder``, a HiFi-GAN / BigVGAN generator) in Flax NNX: mel spectrogram -> waveform.

Public interface:

* :meth:`LTX2VocoderConfig.from_config` (a ``vocoder/config.json`` dict), :func:`load_vocoder` (its diffusers
  state dict, real key names);
* :func:`vocode` ``(vocoder, mel)``: what ``vocoder(mel)`` does, mel (B, C, T, M) with ``C * M == in_channels`` ->
  waveform (B, out_channels, T * prod(upsample_factors)) float32 numpy at ``output_sampling_rate`` Hz;
  :func:`vocode_device` is the same on a channel-last device array.

The generator is the core's :class:`vidax_core.audio.bigvgan.BigVGAN` (its docstring has the architecture; MMAudio's
vocoder is the same network); this module holds LTX-2's names for it, its key table and the mel folding: the
mel's channels and bins are folded into ``in_channels`` features in (channel, bin) order.
"""

from __future__ import annotations

from typing import Any, Mapping

import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.audio.bigvgan import (ACT_FNS, FINAL_ACTS, BigVGAN, BigVGANConfig, LeakyReLU, ResBlock,  # noqa: F401
                                      vocode_device)
from vidax_core.errors import UserError
from vidax_core.io.convert import KeyRule, MirrorRule, conv, conv_transpose, flatten
from vidax_core.io.load import load_model

# the generator is the core's (MMAudio's vocoder is the same network): LTX-2 names it so
LTX2VocoderConfig = BigVGANConfig
LTX2Vocoder = BigVGAN


# --------------------------------------------------------------------------------------------------------------
# key table: the module tree mirrors diffusers', so each rule is a rename


def vocoder_rules(prefix: str = "") -> list[KeyRule]:
    """Every key of an ``LTX2Vocoder`` state dict whose keys start with ``prefix`` (regex, e.g. ``r"vocoder\\."``
    inside the bandwidth-extension vocoder); the parameter paths then start with the same dotted prefix."""
    p = prefix
    convs = r"(?:conv_in|conv_out|resnets\.\d+\.convs[12]\.\d+)"
    acts = r"(?:act_out|resnets\.\d+\.acts[12]\.\d+)"
    return [
        MirrorRule(rf"{p}{convs}\.weight", {"weight": "kernel"}, conv),
        MirrorRule(rf"{p}upsamplers\.\d+\.weight", {"weight": "kernel"}, conv_transpose),
        MirrorRule(rf"{p}(?:{convs}|upsamplers\.\d+)\.bias", {"bias": "bias"}),
        MirrorRule(rf"{p}{acts}(?:\.act)?\.(alpha|beta)", {"alpha": "alpha", "beta": "beta"}),
        MirrorRule(rf"{p}{acts}\.(?:upsample|downsample)\.filter", {"filter": "filter"}, flatten),
    ]


VOCODER_RULES = vocoder_rules()


def load_vocoder(cfg: LTX2VocoderConfig, tensors: Mapping[str, Any], *, put=None) -> LTX2Vocoder:
    """A diffusers ``LTX2Vocoder`` state dict (key -> array or zero-arg loader) -> a live :class:`LTX2Vocoder`;
    every key must be used and every parameter (the anti-aliasing filters' taps included) filled."""
    return load_model(lambda: LTX2Vocoder(cfg), tensors, VOCODER_RULES, component="vocoder", put=put)


# --------------------------------------------------------------------------------------------------------------
# running


def mel_features(mel: Any, in_channels: int) -> np.ndarray:
    """Mel (B, C, T, M) -> channel-last features (B, T, C * M) in the reference's (channel, bin) order."""
    a = np.asarray(mel, np.float32)
    if a.ndim != 4 or a.shape[1] * a.shape[3] != in_channels:
        raise UserError(f"the LTX-2 vocoder takes a mel spectrogram (B, C, frames, bins) with C x bins = "
                        f"{in_channels}, got {np.shape(mel)}")
    b, c, t, m = a.shape
    return np.ascontiguousarray(a.transpose(0, 2, 1, 3).reshape(b, t, c * m))


def vocode(vocoder: nnx.Module, mel: Any) -> np.ndarray:
    """``vocoder(mel)``: mel (B, C, T, M) -> waveform (B, out_channels, samples) float32 at the vocoder's
    ``output_sampling_rate``."""
    feats = mel_features(mel, vocoder.cfg.in_channels)
    out = vocode_device(vocoder, jnp.asarray(feats))
    return np.ascontiguousarray(np.moveaxis(np.asarray(out, np.float32), -1, 1))
