"""Key table of the HunyuanVideo VAE and its original ``.pt`` file.

diffusers ``AutoencoderKLHunyuanVideo`` keys -> the parameters of :class:`vidax_core.vae.hunyuan.HunyuanVAE`: the module
tree mirrors diffusers', so the rules are renames plus layouts: a causal conv's ``.conv.weight`` (out, in, kt, kh, kw)
becomes ``kernel`` (kt, kh, kw, in, out), a GroupNorm's ``weight`` its ``scale``, an attention Linear's ``weight``
(out, in) its ``kernel`` (in, out), a block's single ``downsamplers.0`` / ``upsamplers.0`` its ``resampler``.

The original release (tencent/HunyuanVideo ``hunyuan-video-t2v-720p/vae/pytorch_model.pt``) holds the same key
names (diffusers' conversion script renames nothing); the state dict may sit under a ``state_dict`` entry and its
keys may carry a ``vae.`` prefix, both of which the original loader strips.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from vidax_core.io.convert import KeyRule, conv, linear
from vidax_core.io.pth import PthFile
from vidax_core.io.renamed import RenamedTensors

_SIDE = r"(encoder|decoder)"
_BLOCK = _SIDE + r"\.(down_blocks|up_blocks)\.(\d+)"


def _conv(src: str, dst: str) -> list[KeyRule]:
    return [KeyRule(src + r"\.weight", dst + "/kernel", conv), KeyRule(src + r"\.bias", dst + "/bias")]


def _norm(src: str, dst: str) -> list[KeyRule]:
    return [KeyRule(src + r"\.weight", dst + "/scale"), KeyRule(src + r"\.bias", dst + "/bias")]


def _linear(src: str, dst: str) -> list[KeyRule]:
    return [KeyRule(src + r"\.weight", dst + "/kernel", linear), KeyRule(src + r"\.bias", dst + "/bias")]


def _resnets(src: str, dst: str, k: int) -> list[KeyRule]:
    """``src.resnets.N.*``; ``src`` already has ``k - 1`` regex groups, N is group ``k``."""
    r, d = src + r"\.resnets\.(\d+)", dst + "/resnets/{%d}" % k
    return [
        *_norm(r + r"\.(norm1|norm2)", d + "/{%d}" % (k + 1)),
        *_conv(r + r"\.(conv1|conv2|conv_shortcut)\.conv", d + "/{%d}" % (k + 1)),
    ]


def _side_rules(side: str) -> list[KeyRule]:
    s = f"({side})"
    blocks = "down_blocks" if side == "encoder" else "up_blocks"
    samplers = "downsamplers" if side == "encoder" else "upsamplers"
    b = s + rf"\.({blocks})\.(\d+)"
    attn = s + r"\.mid_block\.attentions\.0"
    return [
        *_conv(s + r"\.(conv_in|conv_out)\.conv", "{1}/{2}"),
        *_norm(s + r"\.conv_norm_out", "{1}/conv_norm_out"),
        *_resnets(b, "{1}/{2}/{3}", 4),
        *_conv(b + rf"\.{samplers}\.0\.conv\.conv", "{1}/{2}/{3}/resampler/conv"),
        *_resnets(s + r"\.mid_block", "{1}/mid_block", 2),
        *_norm(attn + r"\.group_norm", "{1}/mid_block/attentions/0/group_norm"),
        *_linear(attn + r"\.(to_q|to_k|to_v)", "{1}/mid_block/attentions/0/{2}"),
        *_linear(attn + r"\.to_out\.0", "{1}/mid_block/attentions/0/to_out"),
    ]


DECODER_RULES: list[KeyRule] = [*_side_rules("decoder"), *_conv(r"(post_quant_conv)", "{1}")]
ENCODER_RULES: list[KeyRule] = [*_side_rules("encoder"), *_conv(r"(quant_conv)", "{1}")]

#: Every key of a HunyuanVideo VAE checkpoint.
VAE_RULES: list[KeyRule] = DECODER_RULES + ENCODER_RULES

#: Source keys dropped when the VAE is built decode-only.
DECODE_ONLY_IGNORE: list[str] = [r"encoder\..*", r"quant_conv\..*"]


def original_key(key: str, prefixed: bool) -> str | None:
    """An original VAE key -> its diffusers name (identical, less a ``vae.`` prefix when every key has one)."""
    if not prefixed:
        return key
    return key[len("vae."):] if key.startswith("vae.") else None


def open_original_vae(path: str | os.PathLike) -> Mapping[str, Any]:
    """The original ``pytorch_model.pt`` of the HunyuanVideo VAE, read pickle-free and lazily, under diffusers' key
    names (feed it to :func:`vidax_core.vae.hunyuan.load_vae` with the published diffusers config)."""
    src = PthFile(path)
    prefixed = any(k.startswith("vae.") for k in src)
    return RenamedTensors(src, lambda k: original_key(k, prefixed))
