"""Key table: diffusers ``AutoencoderKLCogVideoX`` state dict -> the parameters of
:class:`vidax_cogvideox.vae.CogVideoXVAE`.

The module tree mirrors diffusers' (``vae_blocks``), so the table is mostly renames: a causal conv's ``.conv.weight``
(out, in, kt, kh, kw) becomes ``kernel`` (kt, kh, kw, in, out), a GroupNorm's ``weight`` its ``scale``, and the
single resampler of a block (``downsamplers.0`` / ``upsamplers.0``) its ``resampler``.
"""

from __future__ import annotations

from vidax_core.io.convert import KeyRule, conv


def _conv(src: str, dst: str) -> list[KeyRule]:
    return [KeyRule(src + r"\.weight", dst + "/kernel", conv), KeyRule(src + r"\.bias", dst + "/bias")]


def _group_norm(src: str, dst: str) -> list[KeyRule]:
    return [KeyRule(src + r"\.weight", dst + "/scale"), KeyRule(src + r"\.bias", dst + "/bias")]


def _resnets(src: str, dst: str, groups: int, spatial: bool) -> list[KeyRule]:
    """Rules for ``src.resnets.N.*``; ``src`` has ``groups`` regex groups already, the resnet index is the next."""
    r, d, k = src + r"\.resnets\.(\d+)", dst + "/resnets/{%d}" % (groups + 1), groups + 2
    norms = ([*_group_norm(r + r"\.norm(1|2)\.norm_layer", d + "/norm{%d}/norm_layer" % k),
              *_conv(r + r"\.norm(1|2)\.(conv_y|conv_b)\.conv", d + "/norm{%d}/{%d}" % (k, k + 1))]
             if spatial else _group_norm(r + r"\.norm(1|2)", d + "/norm{%d}" % k))
    return [
        *norms,
        *_conv(r + r"\.conv(1|2)\.conv", d + "/conv{%d}" % k),
        *_conv(r + r"\.conv_shortcut", d + "/conv_shortcut"),
    ]


ENCODER_RULES: list[KeyRule] = [
    *_conv(r"encoder\.(conv_in|conv_out)\.conv", "encoder/{1}"),
    *_resnets(r"encoder\.down_blocks\.(\d+)", "encoder/down_blocks/{1}", 1, False),
    *_conv(r"encoder\.down_blocks\.(\d+)\.downsamplers\.0\.conv", "encoder/down_blocks/{1}/resampler/conv"),
    *_resnets(r"encoder\.mid_block", "encoder/mid_block", 0, False),
    *_group_norm(r"encoder\.norm_out", "encoder/norm_out"),
]

DECODER_RULES: list[KeyRule] = [
    *_conv(r"decoder\.(conv_in|conv_out)\.conv", "decoder/{1}"),
    *_resnets(r"decoder\.up_blocks\.(\d+)", "decoder/up_blocks/{1}", 1, True),
    *_conv(r"decoder\.up_blocks\.(\d+)\.upsamplers\.0\.conv", "decoder/up_blocks/{1}/resampler/conv"),
    *_resnets(r"decoder\.mid_block", "decoder/mid_block", 0, True),
    *_group_norm(r"decoder\.norm_out\.norm_layer", "decoder/norm_out/norm_layer"),
    *_conv(r"decoder\.norm_out\.(conv_y|conv_b)\.conv", "decoder/norm_out/{1}"),
]

#: Every key of a CogVideoX VAE checkpoint (no quant convs: no published CogVideoX VAE has them).
VAE_RULES: list[KeyRule] = DECODER_RULES + ENCODER_RULES

#: Source keys dropped when the VAE is built decode-only.
DECODE_ONLY_IGNORE: list[str] = [r"encoder\..*"]
