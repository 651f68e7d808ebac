"""diffusers ``AutoencoderKLWan`` (Wan 2.2: ``is_residual``, ``patch_size``) state dict -> :class:`WanVAE22`.

Shares every rule with the Wan 2.1 table (:mod:`vidax_core.vae.convert_wan21`) except the block layout: encoder
``down_blocks.{i}.resnets.{j}`` / ``down_blocks.{i}.downsampler`` and decoder ``up_blocks.{i}.upsampler`` (singular).
"""

from __future__ import annotations

from typing import Any, Mapping

from vidax_core.io.convert import KeyRule

from .convert_wan21 import VAE_DECODE_ONLY_IGNORE, _conv_rules, _norm_rule, _side_rules
from .loader import load_vae as load_vae_model
from .wan21 import WanVAEConfig
from .wan22 import WanVAE22

_UP = r"decoder\.up_blocks\.(\d+)\."
_DOWN = r"encoder\.down_blocks\.(\d+)\."

DECODER22_RULES: list[KeyRule] = [
    *_conv_rules(r"post_quant_conv", "post_quant_conv"),
    *_side_rules("decoder"),
    *_conv_rules(_UP + r"resnets\.(\d+)\.(conv1|conv2|conv_shortcut)", "decoder/up_blocks/{1}/resnets/{2}/{3}"),
    _norm_rule(_UP + r"resnets\.(\d+)\.(norm1|norm2)", "decoder/up_blocks/{1}/resnets/{2}/{3}"),
    *_conv_rules(_UP + r"upsampler\.resample\.1", "decoder/up_blocks/{1}/upsampler/conv"),
    *_conv_rules(_UP + r"upsampler\.time_conv", "decoder/up_blocks/{1}/upsampler/time_conv"),
]

ENCODER22_RULES: list[KeyRule] = [
    *_conv_rules(r"quant_conv", "quant_conv"),
    *_side_rules("encoder"),
    *_conv_rules(_DOWN + r"resnets\.(\d+)\.(conv1|conv2|conv_shortcut)", "encoder/down_blocks/{1}/resnets/{2}/{3}"),
    _norm_rule(_DOWN + r"resnets\.(\d+)\.(norm1|norm2)", "encoder/down_blocks/{1}/resnets/{2}/{3}"),
    *_conv_rules(_DOWN + r"downsampler\.resample\.1", "encoder/down_blocks/{1}/downsampler/conv"),
    *_conv_rules(_DOWN + r"downsampler\.time_conv", "encoder/down_blocks/{1}/downsampler/time_conv"),
]

#: Every key of a Wan 2.2 ``AutoencoderKLWan`` checkpoint.
VAE22_RULES: list[KeyRule] = DECODER22_RULES + ENCODER22_RULES


def load_vae22(cfg: WanVAEConfig, tensors: Mapping[str, Any], *, with_encoder: bool = True, put=None) -> WanVAE22:
    """Convert a diffusers Wan 2.2 ``AutoencoderKLWan`` state dict (key -> array or lazy loader) into a WanVAE22."""
    return load_vae_model(lambda enc: WanVAE22(cfg, with_encoder=enc), tensors, with_encoder=with_encoder,
                          rules=VAE22_RULES, decoder_rules=DECODER22_RULES, decode_only_ignore=VAE_DECODE_ONLY_IGNORE,
                          component="vae (Wan 2.2)", put=put)
