"""Key tables of the LTX-Video VAE: diffusers ``AutoencoderKLLTXVideo`` names -> :class:`vidax_ltx.vae.LTXVAE`
paths, and the original single-file layout (``vae.*`` keys of ``ltxv-*.safetensors``) -> diffusers names.

The original names are renamed to diffusers' first (:func:`original_vae_key`, the renames of diffusers'
``convert_ltx_vae_checkpoint_to_diffusers`` for the 0.9.5+ layout), then the ordinary table applies, so both
layouts reach the params through one table. In the original file the decoder's and encoder's blocks are one flat
list each (``up_blocks.0`` = mid block, then upsampler / resnet stage pairs; ``down_blocks.2k`` = stage ``k``,
``down_blocks.2k+1`` = its downsampler, the last = mid block), ``res_blocks`` are ``resnets``, the decoder's final
embedder and table are ``last_time_embedder`` / ``last_scale_shift_table``, and the latent statistics are
``per_channel_statistics.mean-of-means`` / ``std-of-means`` (the other statistics are unused and dropped).
"""

from __future__ import annotations

import re

from vidax_core.io.convert import KeyRule, conv, linear

#: Latent statistics: buffers read into the config by ``load_vae``, not parameters.
STATS_KEYS = (r"latents_mean", r"latents_std")
#: Keys dropped when the VAE is loaded decode-only.
DECODER_IGNORE = [r"encoder\..*"]


def _conv(src: str, dst: str) -> list[KeyRule]:
    """An ``LTXVideoCausalConv3d`` at ``src`` (regex, ``.conv`` inside) -> :class:`vidax_ltx.vae.Conv` at ``dst``."""
    return [KeyRule(src + r"\.conv\.weight", dst + "/conv/kernel", conv),
            KeyRule(src + r"\.conv\.bias", dst + "/conv/bias")]


def _resnet(src: str, dst: str, g: int) -> list[KeyRule]:
    """An ``LTXVideoResnetBlock3d`` at ``src`` holding ``g - 1`` regex groups; ``{g}`` is the next group. LTX-2's
    ``LTX2VideoResnetBlock3d`` keeps its 1x1 shortcut as a plain ``nn.Conv3d`` (``conv_shortcut.weight``, no
    ``.conv``): the same parameter."""
    return [
        *_conv(src + r"\.(conv1|conv2|conv_shortcut)", dst + f"/{{{g}}}"),
        KeyRule(src + r"\.conv_shortcut\.weight", dst + "/conv_shortcut/conv/kernel", conv),
        KeyRule(src + r"\.conv_shortcut\.bias", dst + "/conv_shortcut/conv/bias"),
        KeyRule(src + r"\.norm3\.weight", dst + "/norm3/scale"),
        KeyRule(src + r"\.norm3\.bias", dst + "/norm3/bias"),
        KeyRule(src + r"\.scale_shift_table", dst + "/scale_shift_table"),
    ]


def _time_embedder(src: str, dst: str, g: int) -> list[KeyRule]:
    """``PixArtAlphaCombinedTimestepSizeEmbeddings`` at ``src`` (``g - 1`` groups before)."""
    s = src + r"\.time_embedder\.timestep_embedder\.(linear_1|linear_2)"
    d = dst + f"/time_embedder/timestep_embedder/{{{g}}}"
    return [KeyRule(s + r"\.weight", d + "/kernel", linear), KeyRule(s + r"\.bias", d + "/bias")]


ENCODER_RULES: list[KeyRule] = [
    *_conv(r"encoder\.(conv_in|conv_out)", "encoder/{1}"),
    *_resnet(r"encoder\.down_blocks\.(\d+)\.resnets\.(\d+)", "encoder/down_blocks/{1}/resnets/{2}", 3),
    *_conv(r"encoder\.down_blocks\.(\d+)\.downsamplers\.0\.conv", "encoder/down_blocks/{1}/downsamplers/0/conv"),
    *_resnet(r"encoder\.mid_block\.resnets\.(\d+)", "encoder/mid_block/resnets/{1}", 2),
]

DECODER_RULES: list[KeyRule] = [
    *_conv(r"decoder\.(conv_in|conv_out)", "decoder/{1}"),
    KeyRule(r"decoder\.(timestep_scale_multiplier|scale_shift_table)", "decoder/{1}"),
    *_time_embedder(r"decoder", "decoder", 1),
    *_time_embedder(r"decoder\.mid_block", "decoder/mid_block", 1),
    *_resnet(r"decoder\.mid_block\.resnets\.(\d+)", "decoder/mid_block/resnets/{1}", 2),
    *_time_embedder(r"decoder\.up_blocks\.(\d+)", "decoder/up_blocks/{1}", 2),
    *_resnet(r"decoder\.up_blocks\.(\d+)\.resnets\.(\d+)", "decoder/up_blocks/{1}/resnets/{2}", 3),
    *_resnet(r"decoder\.up_blocks\.(\d+)\.conv_in", "decoder/up_blocks/{1}/conv_in", 2),
    *_conv(r"decoder\.up_blocks\.(\d+)\.upsamplers\.0\.conv", "decoder/up_blocks/{1}/upsamplers/0/conv"),
]


def vae_rules(with_encoder: bool = True) -> list[KeyRule]:
    """The diffusers-name table for a full VAE or a decode-only one."""
    return DECODER_RULES + (ENCODER_RULES if with_encoder else [])


# --------------------------------------------------------------------------------------------------------------
# original single-file layout

_ORIGINAL_DROPPED = re.compile(r"per_channel_statistics\.(channel|mean-of-stds.*)")
_ORIGINAL_STATS = {"per_channel_statistics.mean-of-means": "latents_mean",
                   "per_channel_statistics.std-of-means": "latents_std"}


def _decoder_block(n: int) -> str:
    """Original ``decoder.up_blocks.n`` (0.9.5+): 0 = mid block; then per stage k an upsampler (2k+1) and the
    stage's resnets (2k+2)."""
    if n == 0:
        return "mid_block"
    k, r = divmod(n - 1, 2)
    return f"up_blocks.{k}.upsamplers.0" if r == 0 else f"up_blocks.{k}"


def _encoder_block(n: int, last: int) -> str:
    """Original ``encoder.down_blocks.n`` (0.9.5+): stage k's resnets (2k), its downsampler (2k+1); ``last`` = mid."""
    if n == last:
        return "mid_block"
    k, r = divmod(n, 2)
    return f"down_blocks.{k}" if r == 0 else f"down_blocks.{k}.downsamplers.0"


def original_vae_key(key: str, *, encoder_blocks: int = 9, ltx2: bool = False) -> str | None:
    """Original single-file key -> diffusers ``AutoencoderKLLTXVideo`` key (``AutoencoderKLLTX2Video`` with
    ``ltx2``); None for non-VAE keys and the unused statistics. ``encoder_blocks``: the number of
    ``encoder.down_blocks`` entries (the last is the mid block).

    LTX-2 (diffusers' ``convert_ltx2_vae_to_diffusers``) renames the blocks, ``res_blocks`` and the statistics
    alike, but keeps ``norm3`` and the plain ``conv_shortcut`` as they are; the timestep-conditioned decoder's
    ``last_time_embedder`` / ``last_scale_shift_table`` (ltx-core's names, which diffusers 0.42.1's LTX-2 table
    leaves untouched) become ``time_embedder`` / ``scale_shift_table`` as in 0.9.x."""
    if not key.startswith("vae."):
        return None
    k = key[4:]
    if k in _ORIGINAL_STATS:
        return _ORIGINAL_STATS[k]
    if _ORIGINAL_DROPPED.fullmatch(k):
        return None
    m = re.match(r"decoder\.up_blocks\.(\d+)\.(.*)", k)
    if m:
        k = f"decoder.{_decoder_block(int(m.group(1)))}.{m.group(2)}"
    m = re.match(r"encoder\.down_blocks\.(\d+)\.(.*)", k)
    if m:
        k = f"encoder.{_encoder_block(int(m.group(1)), encoder_blocks - 1)}.{m.group(2)}"
    k = k.replace("res_blocks", "resnets")
    if not ltx2:
        k = k.replace("norm3.norm", "norm3")
        k = re.sub(r"conv_shortcut\.(weight|bias)$", r"conv_shortcut.conv.\1", k)
    k = k.replace("last_time_embedder", "time_embedder").replace("last_scale_shift_table", "scale_shift_table")
    return k


def original_vae_tensors(tensors, *, ltx2: bool = False) -> dict:
    """The ``vae.*`` part of an original single-file state dict under diffusers names (values untouched, so lazy
    loaders stay lazy); ``ltx2``: LTX-2.x's file (``vae/ltx-2*-video-vae*.safetensors``) under
    ``AutoencoderKLLTX2Video`` names."""
    downs = {int(m.group(1)) for k in tensors if (m := re.match(r"vae\.encoder\.down_blocks\.(\d+)\.", k))}
    n = max(downs) + 1 if downs else 9
    out = {}
    for key in tensors:
        new = original_vae_key(key, encoder_blocks=n, ltx2=ltx2)
        if new is not None:
            out[new] = tensors[key]
    return out
