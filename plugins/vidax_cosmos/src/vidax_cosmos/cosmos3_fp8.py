"""Refuse Cosmos3 transformer weights quantized to FP8 by NVIDIA ModelOpt, naming the bf16 revision to use.

ModelOpt's unified Hugging Face export (the layout NVIDIA publishes for Cosmos3: a ``fp8`` hub revision beside the
bf16 ``main`` one, per diffusers' Cosmos3 docs) keeps the tensor names of the bf16 checkpoint but stores the
linear weights as ``F8_E4M3`` with float32 per-tensor ``<layer>.weight_scale`` / ``<layer>.input_scale`` beside
them, and says so in ``hf_quant_config.json`` or a ``quantization_config`` (``quant_method: modelopt``) in the
component's ``config.json``. Read as plain weights these tensors would be silently wrong by the scale factor, so
any one of those signs stops the load with one line.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

import numpy as np

from vidax_core.errors import UserError

#: the hub revision of the Cosmos3 repos that holds the bf16 weights (the FP8 export lives on ``fp8``).
BF16_REVISION = "main"
#: tensor-name suffixes of ModelOpt's quantization scales and quantizer state.
SCALE_SUFFIXES = (".weight_scale", ".input_scale", ".weight_scale_2", ".k_scale", ".v_scale", "_quantizer._amax")


def _is_fp8(dtype: Any) -> bool:
    return str(np.dtype(dtype)) in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")


def _dtype(tensors: Mapping[str, Any], key: str) -> Any:
    dtype_of = getattr(tensors, "dtype", None)
    if callable(dtype_of):
        return dtype_of(key)
    value = tensors[key]
    return getattr(value, "dtype", np.float32)


def fp8_signs(tensors: Mapping[str, Any], config: Mapping[str, Any] | None = None,
              folder: str | None = None) -> list[str]:
    """What marks these transformer weights as ModelOpt FP8 (empty when none): the quantization config, FP8 tensors
    and scale tensors, each described with one example."""
    signs: list[str] = []
    qc = (config or {}).get("quantization_config")
    if qc:
        method = qc.get("quant_method", "?") if isinstance(qc, Mapping) else "?"
        signs.append(f"config.json has a quantization_config (quant_method={method})")
    if folder is not None:
        for name in ("hf_quant_config.json", "modelopt_state.pth"):
            if os.path.exists(os.path.join(folder, name)):
                signs.append(f"the folder holds {name}")
    fp8 = [k for k in tensors if _is_fp8(_dtype(tensors, k))]
    if fp8:
        signs.append(f"{len(fp8)} float8 tensors (e.g. {fp8[0]})")
    scales = [k for k in tensors if k.endswith(SCALE_SUFFIXES)]
    if scales:
        signs.append(f"{len(scales)} quantization scale tensors (e.g. {scales[0]})")
    return signs


def check_not_fp8(tensors: Mapping[str, Any], config: Mapping[str, Any] | None = None, *,
                  folder: str | None = None, repo: str | None = None) -> None:
    """Raise :class:`UserError` when the transformer weights are ModelOpt FP8; ``repo`` names the hub repo in the
    message."""
    signs = fp8_signs(tensors, config, folder)
    if not signs:
        return
    where = folder or "the Cosmos3 transformer checkpoint"
    target = f"{repo} at " if repo else ""
    raise UserError(
        f"{where} holds ModelOpt FP8 transformer weights ({'; '.join(signs)}), which vidax does not load: "
        f"use the bf16 weights, {target}revision {BF16_REVISION!r} (model.revision={BF16_REVISION})"
    )
