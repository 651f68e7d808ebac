"""diffusers ``AutoencoderKLWan`` state dict -> :class:`vidax_core.vae.wan21.WanVAE` (Wan 2.1)."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vidax_core.io.convert import KeyRule, conv, flatten

from .loader import load_vae as load_vae_model
from .wan21 import WanVAE, WanVAEConfig


def _conv1x1(w: np.ndarray) -> np.ndarray:
    """torch Conv2d 1x1 weight (out, in, 1, 1) -> (in, out)."""
    return np.ascontiguousarray(w.reshape(w.shape[:2]).T)


def _conv_rules(src: str, dst: str, weight_transform=conv) -> list[KeyRule]:
    return [KeyRule(src + r"\.weight", dst + "/kernel", weight_transform), KeyRule(src + r"\.bias", dst + "/bias")]


def _norm_rule(src: str, dst: str) -> KeyRule:
    return KeyRule(src + r"\.gamma", dst + "/gamma", flatten)


def _side_rules(side: str) -> list[KeyRule]:
    """Rules shared by encoder and decoder: conv_in/out, norm_out, the mid block."""
    mid = side + r"\.mid_block"
    return [
        *_conv_rules(side + r"\.conv_(in|out)", side + "/conv_{1}"),
        _norm_rule(side + r"\.norm_out", side + "/norm_out"),
        *_conv_rules(mid + r"\.resnets\.(\d+)\.(conv1|conv2|conv_shortcut)", side + "/mid_block/resnets/{1}/{2}"),
        _norm_rule(mid + r"\.resnets\.(\d+)\.(norm1|norm2)", side + "/mid_block/resnets/{1}/{2}"),
        _norm_rule(mid + r"\.attentions\.(\d+)\.norm", side + "/mid_block/attentions/{1}/norm"),
        *_conv_rules(mid + r"\.attentions\.(\d+)\.(to_qkv|proj)", side + "/mid_block/attentions/{1}/{2}", _conv1x1),
    ]


DECODER_RULES: list[KeyRule] = [
    *_conv_rules(r"post_quant_conv", "post_quant_conv"),
    *_side_rules("decoder"),
    *_conv_rules(
        r"decoder\.up_blocks\.(\d+)\.resnets\.(\d+)\.(conv1|conv2|conv_shortcut)",
        "decoder/up_blocks/{1}/resnets/{2}/{3}",
    ),
    _norm_rule(r"decoder\.up_blocks\.(\d+)\.resnets\.(\d+)\.(norm1|norm2)", "decoder/up_blocks/{1}/resnets/{2}/{3}"),
    *_conv_rules(r"decoder\.up_blocks\.(\d+)\.upsamplers\.0\.resample\.1", "decoder/up_blocks/{1}/upsampler/conv"),
    *_conv_rules(r"decoder\.up_blocks\.(\d+)\.upsamplers\.0\.time_conv", "decoder/up_blocks/{1}/upsampler/time_conv"),
]

ENCODER_RULES: list[KeyRule] = [
    *_conv_rules(r"quant_conv", "quant_conv"),
    *_side_rules("encoder"),
    *_conv_rules(r"encoder\.down_blocks\.(\d+)\.(conv1|conv2|conv_shortcut)", "encoder/down_blocks/{1}/{2}"),
    _norm_rule(r"encoder\.down_blocks\.(\d+)\.(norm1|norm2)", "encoder/down_blocks/{1}/{2}"),
    *_conv_rules(r"encoder\.down_blocks\.(\d+)\.resample\.1", "encoder/down_blocks/{1}/conv"),
    *_conv_rules(r"encoder\.down_blocks\.(\d+)\.time_conv", "encoder/down_blocks/{1}/time_conv"),
]

#: Every key of a Wan 2.1 ``AutoencoderKLWan`` checkpoint.
VAE_RULES: list[KeyRule] = DECODER_RULES + ENCODER_RULES

#: Keys dropped when the VAE is built decode-only (``with_encoder=False``); nothing is ignored otherwise.
VAE_IGNORE: list[str] = []
VAE_DECODE_ONLY_IGNORE: list[str] = [r"encoder\..*", r"quant_conv\..*"]


def load_vae(cfg: WanVAEConfig, tensors: Mapping[str, Any], *, with_encoder: bool = True, put=None) -> WanVAE:
    """Convert a diffusers ``AutoencoderKLWan`` state dict (key -> array or lazy loader) into a live WanVAE."""
    return load_vae_model(lambda enc: WanVAE(cfg, with_encoder=enc), tensors, with_encoder=with_encoder,
                          rules=VAE_RULES, decoder_rules=DECODER_RULES, ignore=VAE_IGNORE,
                          decode_only_ignore=VAE_DECODE_ONLY_IGNORE, put=put)
