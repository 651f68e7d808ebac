"""The Wan DiT as the original releases (and ComfyUI, which keeps their names) store it: the renames to diffusers'
``WanTransformer3DModel`` names, and a diffusers config read from the tensor shapes of a file that carries none.

Wan, SkyReels-V2 and Helios run this DiT; ComfyUI's files of each keep ``wan/modules/model.py``'s names
(``blocks.N.self_attn.q``, ``head.modulation``, ``img_emb.proj.N``...), sometimes under ``model.diffusion_model.``.
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping

import numpy as np

from vidax_core.errors import UserError

#: diffusers' ``TRANSFORMER_KEYS_RENAME_DICT``, applied in order with ``str.replace``.
DIT_RENAME: tuple[tuple[str, str], ...] = (
    ("time_embedding.0", "condition_embedder.time_embedder.linear_1"),
    ("time_embedding.2", "condition_embedder.time_embedder.linear_2"),
    ("text_embedding.0", "condition_embedder.text_embedder.linear_1"),
    ("text_embedding.2", "condition_embedder.text_embedder.linear_2"),
    ("time_projection.1", "condition_embedder.time_proj"),
    ("head.modulation", "scale_shift_table"),
    ("head.head", "proj_out"),
    ("modulation", "scale_shift_table"),
    ("ffn.0", "ffn.net.0.proj"),
    ("ffn.2", "ffn.net.2"),
    # the original calls its norms norm1, norm3 (cross-attention), norm2 (ffn); diffusers norm1, norm2, norm3
    ("norm2", "norm__placeholder"),
    ("norm3", "norm2"),
    ("norm__placeholder", "norm3"),
    ("img_emb.proj.0", "condition_embedder.image_embedder.norm1"),
    ("img_emb.proj.1", "condition_embedder.image_embedder.ff.net.0.proj"),
    ("img_emb.proj.3", "condition_embedder.image_embedder.ff.net.2"),
    ("img_emb.proj.4", "condition_embedder.image_embedder.norm2"),
    ("img_emb.emb_pos", "condition_embedder.image_embedder.pos_embed"),
    ("self_attn.q", "attn1.to_q"),
    ("self_attn.k", "attn1.to_k"),
    ("self_attn.v", "attn1.to_v"),
    ("self_attn.o", "attn1.to_out.0"),
    ("self_attn.norm_q", "attn1.norm_q"),
    ("self_attn.norm_k", "attn1.norm_k"),
    ("cross_attn.q", "attn2.to_q"),
    ("cross_attn.k", "attn2.to_k"),
    ("cross_attn.v", "attn2.to_v"),
    ("cross_attn.o", "attn2.to_out.0"),
    ("cross_attn.norm_q", "attn2.norm_q"),
    ("cross_attn.norm_k", "attn2.norm_k"),
    ("attn2.to_k_img", "attn2.add_k_proj"),
    ("attn2.to_v_img", "attn2.add_v_proj"),
    ("attn2.norm_k_img", "attn2.norm_added_k"),
)


def dit_key(key: str) -> str:
    """Original Wan DiT key -> diffusers ``WanTransformer3DModel`` key."""
    for old, new in DIT_RENAME:
        key = key.replace(old, new)
    return key



def is_original(tensors: Any) -> bool:
    """Whether ``tensors`` name a Wan DiT the original way (``head.modulation``, as ComfyUI's detection keys it)."""
    return "head.modulation" in tensors and "patch_embedding.weight" in tensors


def _shape(tensors: Any, key: str) -> tuple[int, ...]:
    if key not in tensors:
        raise UserError(f"the Wan DiT file lacks tensor {key!r}: is it the right file?")
    return tuple(tensors.shape(key)) if hasattr(tensors, "shape") else tuple(np.shape(tensors[key]))


def config_from_tensors(tensors: Any, published: Mapping[str, Any] | None) -> dict[str, Any]:
    """A diffusers ``WanTransformer3DModel`` config for an original-names DiT file without a config: widths, depth,
    channels, patch and embedder sizes from the shapes; the head width (``attention_head_dim``, 128 in every
    published Wan: ComfyUI's ``dim // 128``), norms and RoPE length from ``published``."""
    pub = dict(published or {})
    dim = _shape(tensors, "head.modulation")[-1]
    head_dim = int(pub.get("attention_head_dim") or 128)
    if dim % head_dim:
        raise UserError(f"the Wan DiT file's width {dim} is not a multiple of the head width {head_dim}: is it a "
                        "Wan DiT of this model id?")
    patch = list(_shape(tensors, "patch_embedding.weight")[2:])
    layers = {int(m[1]) for k in tensors if (m := re.match(r"blocks\.(\d+)\.", k))}
    cfg: dict[str, Any] = {
        "_class_name": "WanTransformer3DModel", "num_attention_heads": dim // head_dim, "attention_head_dim": head_dim,
        "in_channels": _shape(tensors, "patch_embedding.weight")[1],
        "out_channels": _shape(tensors, "head.head.weight")[0] // math.prod(patch),
        "ffn_dim": _shape(tensors, "blocks.0.ffn.0.weight")[0],
        "freq_dim": _shape(tensors, "time_embedding.0.weight")[1],
        "num_layers": len(layers), "text_dim": _shape(tensors, "text_embedding.0.weight")[1], "patch_size": patch,
        "eps": float(pub.get("eps", 1e-6)), "cross_attn_norm": bool(pub.get("cross_attn_norm", True)),
        "qk_norm": pub.get("qk_norm", "rms_norm_across_heads"),
        "rope_max_seq_len": int(pub.get("rope_max_seq_len", 1024)),
        "image_dim": None, "added_kv_proj_dim": None, "pos_embed_seq_len": None,
    }
    return {**cfg, **image_fields(tensors, dim)}


def image_fields(tensors: Any, dim: int) -> dict[str, Any]:
    """The config entries of Wan2.1 I2V / FLF2V's CLIP image embedder read from the original tensors (none for a
    text-to-video DiT)."""
    if "img_emb.proj.0.weight" not in tensors:
        return {}
    out = {"image_dim": _shape(tensors, "img_emb.proj.0.weight")[0], "added_kv_proj_dim": dim}
    if "img_emb.emb_pos" in tensors:
        out["pos_embed_seq_len"] = _shape(tensors, "img_emb.emb_pos")[1]
    return out


def read_file(tensors: Any, published: Mapping[str, Any] | None) -> tuple[Any, dict[str, Any]] | None:
    """``(tensors under diffusers names, config)`` of a Wan DiT file in the original names, None otherwise (a file
    already in diffusers names is read as is)."""
    if not is_original(tensors):
        return None
    from vidax_core.io.renamed import RenamedTensors

    return RenamedTensors(tensors, dit_key), config_from_tensors(tensors, published)
