"""The original HunyuanVideo-1.5 DiT (tencent/HunyuanVideo-1.5 ``transformer/<res>_<task>/`` safetensors) read in
diffusers terms, lazily: a :class:`~vidax_hunyuan.original_format.OriginalDiT` with 1.5's names.

Against diffusers' layout (its ``scripts/convert_hunyuan_video1_5_to_diffusers.py``) the release stores the double
blocks' q/k/v split already (``img_attn_q`` ...; only the token refiner keeps a fused ``self_attn_qkv``), names the
byT5 projection ``byt5_in``, the image projection ``vision_in.proj.{0,1,3,4}``, the time embedders ``time_in`` /
``time_r_in`` (meanflow), and stores the final AdaLN as (shift, scale) where diffusers has (scale, shift).
:func:`dit15_config` gives the diffusers config of such a DiT from its shapes and its folder name.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from vidax_core.errors import UserError

from .original_format import QKV_SPLITS as QKV_SPLITS_10
from .original_format import RENAMES as RENAMES_10
from .original_format import OriginalDiT, common_dit_config, tensor_shape

_D = r"double_blocks\.(\d+)\."
_T = r"transformer_blocks.\1."

# 1.0's refiner, double-block norm / projection / MLP names are 1.5's too; the time embedding moved.
_SHARED = [(src, dst) for src, dst in RENAMES_10
           if src.startswith((r"img_in", r"txt_in", r"double_blocks", r"final_layer"))]

RENAMES_15: list[tuple[str, str]] = [
    (r"time_in\.mlp\.0\.", "time_embed.timestep_embedder.linear_1."),
    (r"time_in\.mlp\.2\.", "time_embed.timestep_embedder.linear_2."),
    (r"time_r_in\.mlp\.0\.", "time_embed.timestep_embedder_r.linear_1."),
    (r"time_r_in\.mlp\.2\.", "time_embed.timestep_embedder_r.linear_2."),
    (r"byt5_in\.layernorm\.", "context_embedder_2.norm."),
    *((rf"byt5_in\.fc{i}\.", f"context_embedder_2.linear_{i}.") for i in (1, 2, 3)),
    (r"vision_in\.proj\.0\.", "image_embedder.norm_in."),
    (r"vision_in\.proj\.1\.", "image_embedder.linear_1."),
    (r"vision_in\.proj\.3\.", "image_embedder.linear_2."),
    (r"vision_in\.proj\.4\.", "image_embedder.norm_out."),
    (r"cond_type_embedding\.", "cond_type_embed."),
    *((_D + rf"img_attn_{p}\.", _T + f"attn.to_{p}.") for p in "qkv"),
    *((_D + rf"txt_attn_{p}\.", _T + f"attn.add_{p}_proj.") for p in "qkv"),
    *_SHARED,
]


class OriginalDiT15(OriginalDiT):
    """diffusers-named zero-argument loaders over an original HunyuanVideo-1.5 DiT state dict."""

    RENAMES = RENAMES_15
    QKV_SPLITS = [(src, dst) for src, dst in QKV_SPLITS_10 if src.startswith(r"txt_in")]
    LINEAR1 = None
    WHAT = "HunyuanVideo-1.5 transformer (transformer/<res>_<task>/*.safetensors)"


def dit15_config(tensors: Mapping[str, Any], variant: str,
                 overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The diffusers ``transformer/config.json`` of an original 1.5 DiT, from its (diffusers-named) shapes and the
    release folder's ``<res>_<task>`` name (``variant``: ``480p_t2v``, ``720p_i2v_distilled``...), which gives
    ``target_size`` (640 at 480p, 960 at 720p) and ``task_type``; RoPE axes and theta are the release's fixed
    [16, 56, 56] and 256 unless ``overrides`` say otherwise."""
    m = re.fullmatch(r"(480|720)p_(t2v|i2v)(_.+)?", variant)
    if m is None:
        raise UserError(f"HunyuanVideo-1.5 transformer folder {variant!r}: expected <480p|720p>_<t2v|i2v>[_...] "
                        "as tencent/HunyuanVideo-1.5 names them (transformer/480p_t2v/)")

    cfg = dict(
        common_dit_config(tensors), _class_name="HunyuanVideo15Transformer3DModel",
        text_embed_2_dim=tensor_shape(tensors, "context_embedder_2.norm.weight")[0],
        image_embed_dim=tensor_shape(tensors, "image_embedder.norm_in.weight")[0],
        target_size=640 if m.group(1) == "480" else 960, task_type=m.group(2),
        use_meanflow="time_embed.timestep_embedder_r.linear_1.weight" in tensors,
    )
    cfg.update(overrides or {})
    return cfg
