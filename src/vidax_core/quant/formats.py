"""The 8-bit checkpoint layouts vidax reads, recognised from the tensors themselves (no run key needed).

* plain casts (Kijai's ``*_fp8_e4m3fn.safetensors``): ``<layer>.weight`` stored float8_e4m3fn, no scale (1);
* ComfyUI ``scaled_fp8``: a ``scaled_fp8`` marker tensor, ``<layer>.weight`` e4m3fn and ``<layer>.scale_weight``
  (one fp32 per tensor); ``<layer>.scale_input`` is an activation scale for fp8 matmuls, unused by weight-only
  execution (ComfyUI's ``convert_old_quants`` reads the same keys);
* ComfyUI ``comfy_quant``: ``<layer>.weight`` + ``<layer>.weight_scale`` with a ``<layer>.comfy_quant`` uint8
  JSON tag (``{"format": "float8_e4m3fn"}``) or the same per-layer entries in the safetensors metadata
  ``_quantization_metadata`` (``{"layers": {layer: {...}}}``); formats float8_e4m3fn, float8_e5m2 and
  int8_tensorwise (scalar or ``[out, 1]`` scale) load, nvfp4 / mxfp8 / rotated int8 are refused;
* LightX2V: ``<layer>.weight`` e4m3fn or int8 + ``<layer>.weight_scale`` of shape ``[out, 1]`` (no tag).
"""

from __future__ import annotations

import json
from typing import Any, Mapping

import numpy as np

from vidax_core.errors import UserError

MARKER = "scaled_fp8"
SCALE_SUFFIXES = (".scale_weight", ".weight_scale")
INPUT_SCALE_SUFFIXES = (".scale_input", ".input_scale")
TAG_SUFFIX = ".comfy_quant"
COMFY_LOADABLE = ("float8_e4m3fn", "float8_e5m2", "int8_tensorwise")


def is_marker(key: str) -> bool:
    return key == MARKER or key.endswith("." + MARKER)


def metadata_layers(metadata: Mapping[str, Any], where: str) -> dict[str, dict]:
    """The per-layer entries of ComfyUI's ``_quantization_metadata`` (empty without it)."""
    raw = metadata.get("_quantization_metadata") if isinstance(metadata, Mapping) else None
    if raw is None:
        return {}
    try:
        data = json.loads(raw) if isinstance(raw, str) else raw
    except (TypeError, ValueError, RecursionError):
        raise UserError(f"{where}: the _quantization_metadata entry is not JSON (or nested too deeply): re-download "
                        "the checkpoint") from None
    layers = data.get("layers") if isinstance(data, dict) else None
    if not isinstance(layers, dict):
        raise UserError(f"{where}: _quantization_metadata has no 'layers' mapping: re-download the checkpoint")
    return {str(k): (v if isinstance(v, dict) else {"format": v}) for k, v in layers.items()}


def read_tag(value: Any, key: str) -> dict:
    """A ``<layer>.comfy_quant`` tensor (uint8 bytes of a JSON object) as a dict."""
    try:
        conf = json.loads(np.asarray(value).astype(np.uint8).tobytes().decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise UserError(f"checkpoint tensor {key} is not a JSON quantization tag: re-download the checkpoint") from None
    if not isinstance(conf, dict):
        raise UserError(f"checkpoint tensor {key} is not a JSON object: re-download the checkpoint")
    return conf


def check_comfy_layer(layer: str, conf: Mapping[str, Any]) -> None:
    """One line for a ComfyUI layer format weight-only execution cannot load."""
    fmt, params = conf.get("format"), conf.get("params")
    if params is not None and not isinstance(params, Mapping):
        raise UserError(f"layer {layer}: its quantization tag's params must be a mapping, got "
                        f"{type(params).__name__}: re-download the checkpoint")
    if fmt == "nvfp4":
        raise UserError(f"layer {layer} is nvfp4 (4-bit, block scales), which vidax does not run: use an fp8 or "
                        "int8 checkpoint, or the bf16 one with model.weight_dtype=float8_e4m3fn")
    if fmt not in COMFY_LOADABLE:
        raise UserError(f"layer {layer} has quantization format {str(fmt)[:40]!r}; vidax loads "
                        f"{', '.join(COMFY_LOADABLE)}: use such a checkpoint or the bf16 one")
    if fmt == "int8_tensorwise" and (conf.get("convrot") or (params or {}).get("convrot")):
        raise UserError(f"layer {layer} is rotated int8 (convrot), which needs its activations rotated too: use a "
                        "plain int8 or fp8 checkpoint")


def check_scale(scale: np.ndarray, key: str, weight_shape: tuple[int, ...]) -> np.ndarray:
    """A weight's scale as fp32: one value, or one per output channel (``[out]`` / ``[out, 1]``), finite, > 0."""
    s = np.asarray(scale)
    out = weight_shape[0] if weight_shape else 1
    if not (s.size == 1 or (s.ndim in (1, 2) and s.shape[0] == out and s.size == out)):
        raise UserError(f"checkpoint scale {key} has shape {list(s.shape)}; its weight {list(weight_shape)} needs one "
                        f"value or one per output channel ([{out}] or [{out}, 1]): re-download the checkpoint")
    s = s.astype(np.float32)
    if not np.all(np.isfinite(s)):
        raise UserError(f"checkpoint scale {key} holds NaN or infinite values: re-download the checkpoint")
    if not np.all(s > 0):
        raise UserError(f"checkpoint scale {key} holds zero or negative values: re-download the checkpoint")
    return s
