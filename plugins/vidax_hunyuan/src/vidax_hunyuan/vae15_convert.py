"""Key table of the HunyuanVideo-1.5 VAE: diffusers ``AutoencoderKLHunyuanVideo15`` keys -> the parameters of
:class:`vidax_hunyuan.vae15.HunyuanVAE15`.

The module tree mirrors diffusers', so the rules are renames plus layouts: a causal conv's ``.conv.weight``
(out, in, kt, kh, kw) and a plain 1x1x1 conv's ``.weight`` (``conv_shortcut``, the attention's ``to_q`` / ``to_k`` /
``to_v`` / ``proj_out``) become ``kernel`` (kt, kh, kw, in, out); an RMS norm's ``gamma`` (C, 1, 1, 1) becomes a
(C,) ``gamma``; a block's single ``downsamplers.0`` / ``upsamplers.0`` its ``resampler``. There is no
``quant_conv`` / ``post_quant_conv``.
"""

from __future__ import annotations

from vidax_core.io.convert import KeyRule, conv, flatten


def _conv(src: str, dst: str) -> list[KeyRule]:
    return [KeyRule(src + r"\.weight", dst + "/kernel", conv), KeyRule(src + r"\.bias", dst + "/bias")]


def _norm(src: str, dst: str) -> KeyRule:
    return KeyRule(src + r"\.gamma", dst + "/gamma", flatten)


def _resnets(src: str, dst: str, k: int) -> list[KeyRule]:
    """``src.resnets.N.*``; ``src`` already has ``k - 1`` regex groups, N is group ``k``."""
    r, d = src + r"\.resnets\.(\d+)", dst + "/resnets/{%d}" % k
    return [
        _norm(r + r"\.(norm1|norm2)", d + "/{%d}" % (k + 1)),
        *_conv(r + r"\.(conv1|conv2)\.conv", d + "/{%d}" % (k + 1)),
        *_conv(r + r"\.conv_shortcut", d + "/conv_shortcut"),
    ]


def _side_rules(side: str) -> list[KeyRule]:
    s = f"({side})"
    blocks, samplers = ("down_blocks", "downsamplers") if side == "encoder" else ("up_blocks", "upsamplers")
    b = s + rf"\.({blocks})\.(\d+)"
    attn = s + r"\.mid_block\.attentions\.0"
    return [
        *_conv(s + r"\.(conv_in|conv_out)\.conv", "{1}/{2}"),
        _norm(s + r"\.norm_out", "{1}/norm_out"),
        *_resnets(b, "{1}/{2}/{3}", 4),
        *_conv(b + rf"\.{samplers}\.0\.conv\.conv", "{1}/{2}/{3}/resampler/conv"),
        *_resnets(s + r"\.mid_block", "{1}/mid_block", 2),
        _norm(attn + r"\.norm", "{1}/mid_block/attentions/0/norm"),
        *_conv(attn + r"\.(to_q|to_k|to_v|proj_out)", "{1}/mid_block/attentions/0/{2}"),
    ]


DECODER_RULES: list[KeyRule] = _side_rules("decoder")
ENCODER_RULES: list[KeyRule] = _side_rules("encoder")

#: Every key of a HunyuanVideo-1.5 VAE checkpoint.
VAE_RULES: list[KeyRule] = DECODER_RULES + ENCODER_RULES

#: Source keys dropped when the VAE is built decode-only.
DECODE_ONLY_IGNORE: list[str] = [r"encoder\..*"]
