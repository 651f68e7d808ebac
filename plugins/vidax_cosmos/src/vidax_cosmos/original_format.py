"""The original Cosmos-Predict2.5 release layout: the DiT as a ``torch.save`` file (``base/.../*_ema_bf16.pt``,
keys ``net.blocks.N....``), read pickle-free with :mod:`vidax_core.io.pth`, renamed to the diffusers names exactly as
diffusers' ``convert_cosmos_to_diffusers.py`` does (ordered substring replacements after dropping ``net.``), with
the training-only entries dropped (``accum_*`` counters, ``pos_embedder.*`` RoPE buffers, ``logvar.*``,
TransformerEngine ``_extra_state``). The architecture numbers come from the tensors' shapes plus the constants the
release fixes (patch (1, 2, 2), RoPE scale (1, 3, 3), max size (128, 240, 240), no learnable positions).

The original network is fed the 0..1000 timestep and multiplies it by its ``timestep_scale`` (0.001 in the release's
network configs); the diffusers twin, and vidax, take the sigma in [0, 1] directly, so the weights load unchanged.

The folder: one DiT ``*.pt`` at its top level, next to the other components in diffusers layout (``vae/``,
``text_encoder/``, ``tokenizer/``; ``scheduler/`` defaults to the UniPC configuration the diffusers conversion
writes). The VAE is ``vae/`` when present, else the release's ``tokenizer.pth`` (the Wan2.1 VAE in its original key
layout, read pickle-free and renamed by :mod:`vidax_core.vae.wan_original`).
"""

from __future__ import annotations

import glob
import os
import re
from typing import Any, Mapping

import numpy as np

from vidax_core.io.arch import SOURCE_KEY
from vidax_core.errors import UserError
from vidax_core.io.checkpoint import Checkpoint
from vidax_core.io.renamed import RenamedTensors

# diffusers' TRANSFORMER_KEYS_RENAME_DICT_COSMOS_2_0, applied in this order to the key without ``net.``.
RENAMES: tuple[tuple[str, str], ...] = (
    ("t_embedder.1", "time_embed.t_embedder"),
    ("t_embedding_norm", "time_embed.norm"),
    ("blocks", "transformer_blocks"),
    ("adaln_modulation_self_attn.1", "norm1.linear_1"),
    ("adaln_modulation_self_attn.2", "norm1.linear_2"),
    ("adaln_modulation_cross_attn.1", "norm2.linear_1"),
    ("adaln_modulation_cross_attn.2", "norm2.linear_2"),
    ("adaln_modulation_mlp.1", "norm3.linear_1"),
    ("adaln_modulation_mlp.2", "norm3.linear_2"),
    ("self_attn", "attn1"),
    ("cross_attn", "attn2"),
    ("q_proj", "to_q"),
    ("k_proj", "to_k"),
    ("v_proj", "to_v"),
    ("output_proj", "to_out.0"),
    ("q_norm", "norm_q"),
    ("k_norm", "norm_k"),
    ("mlp.layer1", "ff.net.0.proj"),
    ("mlp.layer2", "ff.net.2"),
    ("x_embedder.proj.1", "patch_embed.proj"),
    ("final_layer.adaln_modulation.1", "norm_out.linear_1"),
    ("final_layer.adaln_modulation.2", "norm_out.linear_2"),
    ("final_layer.linear", "proj_out"),
)
DROPPED = re.compile(r"(.*\.)?(accum_[A-Za-z_]+|_extra_state)|(.*\.)?(pos_embedder|logvar)\..*")
# What the release fixes and the tensors do not say (diffusers' TRANSFORMER_CONFIGS for Cosmos-2.5-Predict-Base).
RELEASE_CONSTANTS = {"max_size": [128, 240, 240], "patch_size": [1, 2, 2], "rope_scale": [1.0, 3.0, 3.0],
                     "concat_padding_mask": True, "extra_pos_embed_type": None, "use_crossattn_projection": True}
#: The release's Wan2.1 VAE, in the original Wan key layout.
VAE_FILE = "tokenizer.pth"
# The scheduler diffusers' conversion script saves with the pipeline.
SCHEDULER_CONFIG = {"_class_name": "UniPCMultistepScheduler", "use_karras_sigmas": True, "use_flow_sigmas": True,
                    "prediction_type": "flow_prediction", "sigma_max": 200.0, "sigma_min": 0.01}


def diffusers_key(key: str) -> str | None:
    """The diffusers name of an original key, or None for an entry the conversion drops."""
    k = key[len("net."):] if key.startswith("net.") else key
    if DROPPED.fullmatch(k):
        return None
    for old, new in RENAMES:
        k = k.replace(old, new)
    return k


def _shape(src: Any, key: str) -> tuple[int, ...]:
    if key not in src:
        raise UserError(f"{getattr(src, 'path', 'checkpoint')} has no {key!r}: not a Cosmos-Predict2.5 DiT checkpoint")
    return tuple(np.shape(src[key]))


def dit_config(tensors: Mapping[str, Any]) -> dict[str, Any]:
    """The diffusers ``transformer/config.json`` of a renamed original DiT, from its shapes + the release constants."""
    dim, in_feat = _shape(tensors, "patch_embed.proj.weight")
    head_dim = _shape(tensors, "transformer_blocks.0.attn1.norm_q.weight")[0]
    layers = 1 + max(int(m.group(1)) for k in tensors if (m := re.match(r"transformer_blocks\.(\d+)\.", k)))
    out_feat = _shape(tensors, "proj_out.weight")[0]
    proj_out, proj_in = _shape(tensors, "crossattn_proj.0.weight")
    p = 1 * 2 * 2
    return {
        "_class_name": "CosmosTransformer3DModel",
        "in_channels": in_feat // p - 1,  # the padding-mask channel is not counted
        "out_channels": out_feat // p,
        "num_attention_heads": dim // head_dim,
        "attention_head_dim": head_dim,
        "num_layers": layers,
        "mlp_ratio": _shape(tensors, "transformer_blocks.0.ff.net.0.proj.weight")[0] / dim,
        "text_embed_dim": _shape(tensors, "transformer_blocks.0.attn2.to_k.weight")[1],
        "adaln_lora_dim": _shape(tensors, "transformer_blocks.0.norm1.linear_1.weight")[0],
        "crossattn_proj_in_channels": proj_in,
        "encoder_hidden_states_channels": proj_out,
        **RELEASE_CONSTANTS,
    }


def dit_file(root: str) -> str | None:
    """The one DiT ``*.pt`` at the top of ``root`` (None when there is none)."""
    files = sorted(glob.glob(os.path.join(root, "*.pt")))
    if len(files) > 1:
        raise UserError(f"{root} holds {len(files)} .pt files ({', '.join(map(os.path.basename, files))}): keep the "
                        "one DiT checkpoint (e.g. the post-trained *_ema_bf16.pt) in the folder")
    return files[0] if files else None


class OriginalCosmosCheckpoint(Checkpoint):
    """A folder with an original Cosmos-Predict2.5 DiT ``.pt``, answering in diffusers terms."""

    def __init__(self, root: str, dit_path: str) -> None:
        super().__init__(root)
        self.dit_path = dit_path
        self._dit_tensors: RenamedTensors | None = None
        self._vae_pth: Any = None
        self.model_index = {"_class_name": "Cosmos2_5_PredictBasePipeline"}

    def _dit(self) -> RenamedTensors:
        if self._dit_tensors is None:
            from vidax_core.io.pth import PthFile

            self._dit_tensors = RenamedTensors(PthFile(self.dit_path), diffusers_key)
        return self._dit_tensors

    def _original_vae(self) -> bool:
        return not super().has("vae") and os.path.isfile(os.path.join(self.root, VAE_FILE))

    def _vae(self) -> Any:
        if self._vae_pth is None:
            from vidax_core.io.pth import PthFile

            self._vae_pth = PthFile(os.path.join(self.root, VAE_FILE))
        return self._vae_pth

    def has(self, component: str) -> bool:
        return (component in ("transformer", "scheduler") or super().has(component)
                or (component == "vae" and self._original_vae()))

    def require(self, component: str) -> str:
        if component in ("transformer", "scheduler") or (component == "vae" and self._original_vae()):
            return self.root
        if not super().has(component):
            raise UserError(f"{self.root}: an original Cosmos-Predict2.5 folder needs {component}/ in diffusers layout "
                            f"next to the DiT .pt (vae/ or {VAE_FILE}, text_encoder/, tokenizer/ of the diffusers "
                            "revision)")
        return super().require(component)

    def config(self, component: str) -> dict[str, Any]:
        if component == "transformer":
            return {**dit_config(self._dit()), SOURCE_KEY: self.dit_path}
        if component == "scheduler" and not super().has("scheduler"):
            return dict(SCHEDULER_CONFIG)
        if component == "vae" and self._original_vae():
            from vidax_core.vae.wan_original import vae_config_from_tensors

            return {**vae_config_from_tensors(self._vae(), wan22=False), SOURCE_KEY: os.path.join(self.root, VAE_FILE)}
        return super().config(component)

    def read_tensors(self, component: str) -> Mapping[str, np.ndarray]:
        if component == "transformer":
            return self._dit()
        if component == "vae" and self._original_vae():
            from vidax_core.vae.wan_original import original_vae_tensors

            return original_vae_tensors(self._vae(), self.config("vae"))
        return super().read_tensors(component)


def open_original(spec: Any, path: str) -> OriginalCosmosCheckpoint | None:
    if not os.path.isdir(path) or os.path.exists(os.path.join(path, "model_index.json")):
        return None
    found = dit_file(path)
    return OriginalCosmosCheckpoint(path, found) if found else None
