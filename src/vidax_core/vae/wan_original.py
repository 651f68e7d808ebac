"""The Wan2.1 / Wan2.2 VAE as the original releases store it (``Wan2.1_VAE.pth``, ``Wan2.2_VAE.pth``; Cosmos-Predict2.5
ships the same Wan2.1 VAE as ``tokenizer.pth``): key renaming to diffusers' ``AutoencoderKLWan`` names and the
published configs with every size the weights determine read from the tensor shapes.

The renames are diffusers' ``scripts/convert_wan_to_diffusers.py`` (``convert_vae``, ``convert_vae_22``):
``residual.{0,2,3,6}`` -> ``norm1/conv1/norm2/conv2``, ``middle.{0,1,2}`` -> mid block,
``head`` -> ``norm_out/conv_out``,
``conv1/conv2`` -> ``quant_conv/post_quant_conv``; Wan2.1's flat decoder ``upsamples.K`` list becomes
``up_blocks.{K // (R + 2)}`` (R + 1 resnets then one upsampler per stage, R = ``num_res_blocks``; the reference script
hard-codes R = 2); Wan2.2's nested ``downsamples.I.downsamples.J`` / ``upsamples.I.upsamples.J`` -> ``resnets.J`` or the
block's ``downsampler`` / ``upsampler``.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping

import numpy as np

from vidax_core.errors import UserError
from vidax_core.io.renamed import RenamedTensors

VAE21_FILE, VAE22_FILE = "Wan2.1_VAE.pth", "Wan2.2_VAE.pth"

_RESIDUAL = {"residual.0.gamma": "norm1.gamma", "residual.2.weight": "conv1.weight", "residual.2.bias": "conv1.bias",
             "residual.3.gamma": "norm2.gamma", "residual.6.weight": "conv2.weight", "residual.6.bias": "conv2.bias",
             "shortcut.weight": "conv_shortcut.weight", "shortcut.bias": "conv_shortcut.bias"}
_RES = "(" + "|".join(re.escape(k) for k in _RESIDUAL) + ")"
_SIDE = r"(encoder|decoder)\."

_VAE_COMMON: tuple[tuple[str, Callable[[re.Match], str]], ...] = (
    (r"conv1\.(weight|bias)", lambda m: f"quant_conv.{m[1]}"),
    (r"conv2\.(weight|bias)", lambda m: f"post_quant_conv.{m[1]}"),
    (_SIDE + r"conv1\.(weight|bias)", lambda m: f"{m[1]}.conv_in.{m[2]}"),
    (_SIDE + r"head\.0\.gamma", lambda m: f"{m[1]}.norm_out.gamma"),
    (_SIDE + r"head\.2\.(weight|bias)", lambda m: f"{m[1]}.conv_out.{m[2]}"),
    (_SIDE + r"middle\.([02])\." + _RES, lambda m: f"{m[1]}.mid_block.resnets.{int(m[2]) // 2}.{_RESIDUAL[m[3]]}"),
    (_SIDE + r"middle\.1\.(norm\.gamma|(?:to_qkv|proj)\.(?:weight|bias))",
     lambda m: f"{m[1]}.mid_block.attentions.0.{m[2]}"),
)


def _vae21_rules(num_res_blocks: int) -> tuple[tuple[str, Callable[[re.Match], str]], ...]:
    per_stage = num_res_blocks + 2  # decoder: R + 1 resnets, then one upsampler

    def up_res(m: re.Match) -> str:
        k = int(m[1])
        return f"decoder.up_blocks.{k // per_stage}.resnets.{k % per_stage}.{_RESIDUAL[m[2]]}"

    return _VAE_COMMON + (
        (r"encoder\.downsamples\.(\d+)\." + _RES, lambda m: f"encoder.down_blocks.{m[1]}.{_RESIDUAL[m[2]]}"),
        (r"encoder\.downsamples\.(\d+)\.(resample\.1|time_conv)\.(weight|bias)",
         lambda m: f"encoder.down_blocks.{m[1]}.{m[2]}.{m[3]}"),
        (r"decoder\.upsamples\.(\d+)\." + _RES, up_res),
        (r"decoder\.upsamples\.(\d+)\.(resample\.1|time_conv)\.(weight|bias)",
         lambda m: f"decoder.up_blocks.{int(m[1]) // per_stage}.upsamplers.0.{m[2]}.{m[3]}"),
    )


_VAE22_RULES = _VAE_COMMON + (
    (r"encoder\.downsamples\.(\d+)\.downsamples\.(\d+)\." + _RES,
     lambda m: f"encoder.down_blocks.{m[1]}.resnets.{m[2]}.{_RESIDUAL[m[3]]}"),
    (r"encoder\.downsamples\.(\d+)\.downsamples\.\d+\.(resample\.1|time_conv)\.(weight|bias)",
     lambda m: f"encoder.down_blocks.{m[1]}.downsampler.{m[2]}.{m[3]}"),
    (r"decoder\.upsamples\.(\d+)\.upsamples\.(\d+)\." + _RES,
     lambda m: f"decoder.up_blocks.{m[1]}.resnets.{m[2]}.{_RESIDUAL[m[3]]}"),
    (r"decoder\.upsamples\.(\d+)\.upsamples\.\d+\.(resample\.1|time_conv)\.(weight|bias)",
     lambda m: f"decoder.up_blocks.{m[1]}.upsampler.{m[2]}.{m[3]}"),
)


def regex_rename(key: str, rules) -> str:
    for pattern, repl in rules:
        m = re.fullmatch(pattern, key)
        if m is not None:
            return repl(m)
    return key  # unknown: left as is, so the conversion reports it as unexpected


def vae_key(key: str, *, num_res_blocks: int = 2, wan22: bool = False) -> str:
    """Original ``Wan2.1_VAE.pth`` (or, with ``wan22``, ``Wan2.2_VAE.pth``) key -> diffusers AutoencoderKLWan key."""
    return regex_rename(key, _VAE22_RULES if wan22 else _vae21_rules(num_res_blocks))




def original_vae_tensors(src: Mapping[str, Any], config: Mapping[str, Any]) -> RenamedTensors:
    """A lazy view of an original VAE state dict under diffusers' names, for the config
    :func:`vae_config_from_tensors` gave."""
    wan22 = bool(config.get("is_residual"))
    return RenamedTensors(src, lambda k: vae_key(k, num_res_blocks=int(config["num_res_blocks"]), wan22=wan22))


WAN22_LATENTS_MEAN = (
    -0.2289, -0.0052, -0.1323, -0.2339, -0.2799, 0.0174, 0.1838, 0.1557, -0.1382, 0.0542, 0.2813, 0.0891,
    0.1570, -0.0098, 0.0375, -0.1825, -0.2246, -0.1207, -0.0698, 0.5109, 0.2665, -0.2108, -0.2158, 0.2502,
    -0.2055, -0.0322, 0.1109, 0.1567, -0.0729, 0.0899, -0.2799, -0.1230, -0.0313, -0.1649, 0.0117, 0.0723,
    -0.2839, -0.2083, -0.0520, 0.3748, 0.0152, 0.1957, 0.1433, -0.2944, 0.3573, -0.0548, -0.1681, -0.0667,
)
WAN22_LATENTS_STD = (
    0.4765, 1.0364, 0.4514, 1.1677, 0.5313, 0.4990, 0.4818, 0.5013, 0.8158, 1.0344, 0.5894, 1.0901,
    0.6885, 0.6165, 0.8454, 0.4978, 0.5759, 0.3523, 0.7135, 0.6804, 0.5833, 1.4146, 0.8986, 0.5659,
    0.7069, 0.5338, 0.4889, 0.4917, 0.4069, 0.4999, 0.6866, 0.4093, 0.5709, 0.6065, 0.6415, 0.4944,
    0.5726, 1.2042, 0.5458, 1.6887, 0.3971, 1.0600, 0.3943, 0.5537, 0.5444, 0.4089, 0.7468, 0.7744,
)


def _wan21_latents() -> tuple[tuple[float, ...], tuple[float, ...]]:
    from vidax_core.vae.wan21 import _WAN21_LATENTS_MEAN, _WAN21_LATENTS_STD

    return _WAN21_LATENTS_MEAN, _WAN21_LATENTS_STD


#: The published Wan2.1 VAE (``wan/modules/vae.py``, diffusers ``AutoencoderKLWan`` config of the -Diffusers repos).
WAN21_VAE_CONFIG: dict[str, Any] = dict(
    base_dim=96, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[],
    temperal_downsample=[False, True, True], dropout=0.0, is_residual=False, in_channels=3, out_channels=3,
    patch_size=None, scale_factor_spatial=8, scale_factor_temporal=4,
)
#: The published Wan2.2 VAE (``wan/modules/vae2_2.py``: dim 160, decoder dim 256, z 48, patch 2).
WAN22_VAE_CONFIG: dict[str, Any] = dict(
    base_dim=160, decoder_base_dim=256, z_dim=48, dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[],
    temperal_downsample=[False, True, True], dropout=0.0, is_residual=True, in_channels=12, out_channels=12,
    patch_size=2, scale_factor_spatial=16, scale_factor_temporal=4,
    latents_mean=list(WAN22_LATENTS_MEAN), latents_std=list(WAN22_LATENTS_STD),
)

def tensor_shape(src: Any, key: str) -> tuple[int, ...]:
    """The shape of ``src[key]`` without reading it (a clear error when the file lacks it)."""
    if key not in src:
        raise UserError(f"original checkpoint file lacks tensor {key!r}: is it the right file?")
    return tuple(src.shape(key)) if hasattr(src, "shape") else tuple(np.shape(src[key]))


def vae_config_from_tensors(src: Any, wan22: bool) -> dict[str, Any]:
    """The published Wan2.1 / Wan2.2 VAE config with widths, depths and channels read from the original tensors."""
    keys = set(src)
    base_dim, in_channels = tensor_shape(src, "encoder.conv1.weight")[:2]
    z_dim = tensor_shape(src, "conv1.weight")[0] // 2
    out_channels = tensor_shape(src, "decoder.head.2.weight")[0]
    if wan22:
        stage_res = [re.fullmatch(r"encoder\.downsamples\.(\d+)\.downsamples\.(\d+)\.residual\.6\.weight", k)
                     for k in keys]
        stage_res = [(int(m[1]), int(m[2])) for m in stage_res if m]
        stages = max(i for i, _ in stage_res) + 1
        r = sum(1 for i, _ in stage_res if i == 0)
        first = [f"encoder.downsamples.{i}.downsamples.0.residual.6.weight" for i in range(stages)]
        temporal = [f"encoder.downsamples.{i}.downsamples.{r}.time_conv.weight" in keys for i in range(stages - 1)]
        cfg = dict(WAN22_VAE_CONFIG)
    else:
        res = sorted(int(m[1]) for k in keys
                     if (m := re.fullmatch(r"encoder\.downsamples\.(\d+)\.residual\.6\.weight", k)))
        resample = sorted(int(m[1]) for k in keys
                          if (m := re.fullmatch(r"encoder\.downsamples\.(\d+)\.resample\.1\.weight", k)))
        if not res:
            raise UserError("the VAE .pth has no encoder.downsamples.*.residual tensors: is it Wan2.1_VAE.pth?")
        r = resample[0] if resample else len(res)
        stages = len(resample) + 1
        first = [f"encoder.downsamples.{i * (r + 1)}.residual.6.weight" for i in range(stages)]
        temporal = [f"encoder.downsamples.{i * (r + 1) + r}.time_conv.weight" in keys for i in range(stages - 1)]
        cfg = dict(WAN21_VAE_CONFIG)
        cfg["latents_mean"], cfg["latents_std"] = map(list, _wan21_latents())
    dim_mult = [tensor_shape(src, k)[0] // base_dim for k in first]
    patch = int(round((in_channels // 3) ** 0.5)) if wan22 else None
    cfg.update(base_dim=base_dim, z_dim=z_dim, num_res_blocks=r, dim_mult=dim_mult, temperal_downsample=temporal,
               in_channels=in_channels, out_channels=out_channels, patch_size=patch,
               scale_factor_spatial=2 ** (stages - 1) * (patch or 1), scale_factor_temporal=2 ** sum(temporal))
    if wan22:
        cfg["decoder_base_dim"] = tensor_shape(src, "decoder.conv1.weight")[0] // dim_mult[-1]
    if len(cfg["latents_mean"]) != z_dim:  # not a published VAE (a tiny test model): no latent normalisation
        cfg["latents_mean"], cfg["latents_std"] = [0.0] * z_dim, [1.0] * z_dim
    return cfg


def read_file(tensors: Any) -> tuple[RenamedTensors, dict[str, Any]] | None:
    """``(tensors under diffusers names, config)`` of a single VAE file in the original Wan names (ComfyUI's
    ``wan_2.1_vae.safetensors`` / ``wan2.2_vae.safetensors``, which keep them), None for any other file. Wan2.2's
    VAE is told by its nested ``downsamples.I.downsamples.J`` blocks."""
    if "decoder.head.2.weight" not in tensors or "conv1.weight" not in tensors:
        return None
    wan22 = any(re.match(r"encoder\.downsamples\.\d+\.downsamples\.", k) for k in tensors)
    config = {"_class_name": "AutoencoderKLWan", **vae_config_from_tensors(tensors, wan22)}
    return original_vae_tensors(tensors, config), config
