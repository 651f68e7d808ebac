"""The original LTX-Video release layout: one ``.safetensors`` holding the DiT (``model.diffusion_model.*`` or bare
keys) and the VAE (``vae.*``), its configuration as JSON under the ``config`` key of the safetensors metadata
(``{"transformer": {...}, "vae": {...}, "scheduler": {...}}``), e.g. Lightricks/LTX-Video's
``ltxv-13b-0.9.8-dev.safetensors``. The folder holding it also needs the T5 v1.1 XXL encoder in diffusers layout
(``text_encoder/``, ``tokenizer/``); a ``scheduler/`` folder is optional.

:class:`LTXOriginalCheckpoint` answers in diffusers terms, so the diffusers key tables and configs apply unchanged:

* DiT keys: the prefix dropped, ``patchify_proj`` -> ``proj_in``, ``adaln_single`` -> ``time_embed``, ``q_norm`` /
  ``k_norm`` -> ``norm_q`` / ``norm_k`` (diffusers' single-file conversion); the config is read from the metadata
  (``qk_norm: rms_norm`` is diffusers' ``rms_norm_across_heads``; RoPE base sizes and theta are checked).
* VAE keys: the VAE module's renaming of the original ``vae.*`` keys onto diffusers' (:mod:`vidax_ltx.vae_convert`).
  The config is the metadata's when it is a
  diffusers ``AutoencoderKLLTXVideo`` config, else the published 0.9.8 VAE configuration (what diffusers'
  single-file loader uses for these files).
"""

from __future__ import annotations

import glob
import json
import os
import re
from typing import Any

from vidax_core.io.arch import SOURCE_KEY
from vidax_core.errors import UserError
from vidax_core.io.checkpoint import Checkpoint
from vidax_core.io.renamed import RenamedTensors
from vidax_core.io.safetensors import SafetensorsFile

from .vae import PUBLISHED_VAE_CONFIG
from .vae_convert import original_vae_key

DIT_PREFIX = "model.diffusion_model."
DIT_RENAMES = (("patchify_proj", "proj_in"), ("adaln_single", "time_embed"), ("q_norm", "norm_q"), ("k_norm", "norm_k"))

# What diffusers' single-file loader uses for these files' VAE (the VAE module's published 0.9.5+ configuration).
LTX098_VAE_CONFIG: dict[str, Any] = {"_class_name": "AutoencoderKLLTXVideo", **PUBLISHED_VAE_CONFIG}
# The flow-match Euler configuration diffusers' conversion gives the 0.9.5+ releases (their repositories' scheduler:
# no resolution-dependent shift, which LTXConditionPipeline could not apply; the class defaults otherwise).
LTX_SCHEDULER_CONFIG: dict[str, Any] = {
    "_class_name": "FlowMatchEulerDiscreteScheduler", "num_train_timesteps": 1000, "shift": 1.0,
    "use_dynamic_shifting": False, "invert_sigmas": False,
}
_DIT_KEYS = ("in_channels", "out_channels", "num_attention_heads", "attention_head_dim", "cross_attention_dim",
             "num_layers", "activation_fn", "norm_elementwise_affine", "norm_eps", "caption_channels",
             "attention_bias")


def dit_key(key: str) -> str | None:
    if key.startswith("vae."):
        return None
    if key.startswith(DIT_PREFIX):
        key = key[len(DIT_PREFIX):]
    for old, new in DIT_RENAMES:
        key = key.replace(old, new)
    return key


def dit_config(original: dict[str, Any], where: str) -> dict[str, Any]:
    """The metadata's transformer config -> an ``LTXVideoTransformer3DModel`` config dict."""
    missing = [k for k in ("num_attention_heads", "attention_head_dim", "num_layers") if k not in original]
    if missing:
        raise UserError(f"{where}: the transformer config lacks {', '.join(missing)}")
    from vidax_core.io.arch import config_value

    pos = config_value(original, "positional_embedding_max_pos", tuple[int, ...], (20, 2048, 2048), where=where)
    theta = config_value(original, "positional_embedding_theta", float, 10000.0, where=where)
    if list(pos) != [20, 2048, 2048] or float(theta) != 10000.0:
        raise UserError(f"{where}: positional_embedding_max_pos={pos} / theta={theta} is not an LTX-Video 0.9.x "
                        "configuration (expected [20, 2048, 2048] / 10000)")
    cfg = {k: original[k] for k in _DIT_KEYS if k in original}
    qk = config_value(original, "qk_norm", str, "rms_norm", where=where)
    cfg["qk_norm"] = "rms_norm_across_heads" if qk in ("rms_norm", "rms_norm_across_heads") else qk
    cfg.update(_class_name="LTXVideoTransformer3DModel", patch_size=1, patch_size_t=1)
    return cfg


def _is_upsampler(text: Any) -> bool:
    """The metadata config of a latent upscaler file (``ltxv-spatial-upscaler-*``), which may sit beside the
    release file."""
    try:
        cfg = json.loads(text)
    except (TypeError, ValueError):
        return False
    return isinstance(cfg, dict) and ("mid_channels" in cfg or cfg.get("_class_name") == "LTXLatentUpsamplerModel")


def _weights_file(path: str) -> str | None:
    """The one top-level .safetensors of ``path`` whose metadata holds a ``config`` (an upscaler's aside)."""
    if not os.path.isdir(path) or os.path.exists(os.path.join(path, "model_index.json")):
        return None
    found = []
    for f in sorted(glob.glob(os.path.join(path, "*.safetensors"))):
        try:
            meta = SafetensorsFile(f).metadata
        except UserError:
            continue
        if "config" in meta and not _is_upsampler(meta["config"]):
            found.append(f)
    if len(found) > 1:
        raise UserError(f"checkpoint folder {path} holds several original LTX-Video files "
                        f"({', '.join(map(os.path.basename, found))}): keep one per folder")
    return found[0] if found else None


class LTXOriginalCheckpoint(Checkpoint):
    """A folder with one original LTX-Video ``.safetensors`` (+ ``text_encoder/``, ``tokenizer/``)."""

    def __init__(self, root: str, weights: str, source: str | None = None) -> None:
        self.root, self.source, self.weights = root, source or root, weights
        self.file = SafetensorsFile(weights)
        where = f"{weights} (metadata 'config')"
        try:
            meta = json.loads(self.file.metadata["config"])
        except (json.JSONDecodeError, TypeError) as exc:
            raise UserError(f"{where} is not JSON: re-download the file") from exc
        if not isinstance(meta, dict) or not isinstance(meta.get("transformer"), dict):
            raise UserError(f"{where} has no 'transformer' config: is this an LTX-Video 0.9.x file?")
        self._where = where
        self._meta = meta
        self.model_index = {"_class_name": "LTXPipeline"}
        missing = [c + "/" for c in ("text_encoder", "tokenizer") if not os.path.isdir(os.path.join(root, c))]
        if missing:
            raise UserError(f"checkpoint folder {self.source} holds {os.path.basename(weights)} but lacks "
                            f"{', '.join(missing)}: add the T5 v1.1 XXL encoder in diffusers layout (e.g. the "
                            "text_encoder/ and tokenizer/ folders of a diffusers LTX-Video repository)")
        if not any(k.startswith("vae.") for k in self.file):
            raise UserError(f"{weights} has no VAE (vae.* tensors): use the full LTX-Video release file")

    def has(self, component: str) -> bool:
        return component in ("transformer", "vae", "scheduler") or super().has(component)

    def require(self, component: str) -> str:
        if component in ("transformer", "vae"):
            return self.weights
        if component == "scheduler" and not super().has("scheduler"):
            return self.root
        return super().require(component)

    def config(self, component: str) -> dict[str, Any]:
        if component == "transformer":
            return {**dit_config(self._meta["transformer"], self._where), SOURCE_KEY: self._where}
        if component == "vae":
            vae = self._meta.get("vae")
            if isinstance(vae, dict) and vae.get("_class_name") == "AutoencoderKLLTXVideo":
                return {**vae, SOURCE_KEY: f"{self._where} vae"}
            return dict(LTX098_VAE_CONFIG)
        if component == "scheduler" and not super().has("scheduler"):
            return dict(LTX_SCHEDULER_CONFIG)
        return super().config(component)

    def weight_files(self, component: str) -> list[str]:
        if component in ("transformer", "vae"):
            return [self.weights]
        return super().weight_files(component)

    def read_tensors(self, component: str) -> Any:
        if component == "transformer":
            return RenamedTensors(self.file, dit_key)
        if component == "vae":
            downs = {int(m.group(1)) for k in self.file if (m := re.match(r"vae\.encoder\.down_blocks\.(\d+)\.", k))}
            n = max(downs) + 1 if downs else 9
            return RenamedTensors(self.file, lambda k: original_vae_key(k, encoder_blocks=n))
        return super().read_tensors(component)


def open_original(spec: Any, path: str) -> LTXOriginalCheckpoint | None:
    weights = _weights_file(path)
    return None if weights is None else LTXOriginalCheckpoint(path, weights)


def read_component_file(component: str, tensors: Any) -> tuple[Any, dict[str, Any]] | None:
    """The DiT or the VAE of an original single file (a ComfyUI ``checkpoints/ltxv-*.safetensors`` or
    ``model.files``), read as :class:`LTXOriginalCheckpoint` reads them; None for a file without the release's
    metadata config (a file in diffusers names is read as is)."""
    meta = getattr(tensors, "metadata", None) or {}
    if component not in ("transformer", "vae") or "config" not in meta or _is_upsampler(meta["config"]):
        return None
    where = "the LTX-Video file's metadata 'config'"
    try:
        config = json.loads(meta["config"])
    except (json.JSONDecodeError, TypeError) as exc:
        raise UserError(f"{where} is not JSON: re-download the file") from exc
    if not isinstance(config, dict) or not isinstance(config.get("transformer"), dict):
        raise UserError(f"{where} has no 'transformer' config: is this an LTX-Video 0.9.x file?")
    if component == "transformer":
        return RenamedTensors(tensors, dit_key), dit_config(config["transformer"], where)
    if not any(k.startswith("vae.") for k in tensors):
        raise UserError("the LTX-Video file has no VAE (vae.* tensors): name a VAE file with model.files.vae")
    vae = config.get("vae")
    vae_cfg = dict(vae) if isinstance(vae, dict) and vae.get("_class_name") == "AutoencoderKLLTXVideo" \
        else dict(LTX098_VAE_CONFIG)
    downs = {int(m.group(1)) for k in tensors if (m := re.match(r"vae\.encoder\.down_blocks\.(\d+)\.", k))}
    n = max(downs) + 1 if downs else 9
    return RenamedTensors(tensors, lambda k: original_vae_key(k, encoder_blocks=n)), vae_cfg
