"""The original HunyuanVideo-1.5 DiT (tencent/HunyuanVideo-1.5 ``transformer/<res>_<task>/`` safetensors) read in
diffusers terms, lazily: a :class:`~vidax_hunyuan.original_format.OriginalDiT` with 1.5's names.

Against diffusers' layout (its ``scripts/convert_hunyuan_video1_5_to_diffusers.py``) the release stores the double
blocks' q/k/v split already (``img_attn_q`` ...; only the token refiner keeps a fused ``self_attn_qkv``), names the
byT5 projection ``byt5_in``, the image projection ``vision_in.proj.{0,1,3,4}``, the time embedders ``time_in`` /
``time_r_in`` (meanflow), and stores the final AdaLN as (shift, scale) where diffusers has (scale, shift).
"""

from __future__ import annotations

from .original_format import QKV_SPLITS as QKV_SPLITS_10
from .original_format import RENAMES as RENAMES_10
from .original_format import OriginalDiT

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
