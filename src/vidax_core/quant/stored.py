"""A tower built as its file stores it: the Linear layers whose checkpoint weights are 8-bit stay 8-bit.

The prompt and image encoder files people download are often 8-bit (Comfy-Org's ``umt5_xxl_fp8_e4m3fn_scaled``,
fp8 casts of Qwen2.5-VL or Gemma). :func:`convert_as_stored` converts a tower's tensors onto its full-precision
shapes (headers only, nothing read), makes every Linear layer whose source tensors are all float8_e4m3fn or int8
an 8-bit layer (:func:`vidax_core.quant.linear.quantize_layers`), and converts again: those kernels are filled with
the file's own 8-bit values and scales (:mod:`.leaf`, no rounding added) and dequantised inside their matmul in the
tower's compute dtype, on the host, in streamed chunks and on the device alike. Everything else (embeddings, norms,
a position-bias table) is read in the tower's dtype, an 8-bit source dequantised. A source that cannot tell its
dtypes without reading its tensors (a mapping of lazy loaders) is read in full precision.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping

import numpy as np

from vidax_core.quant import modes

Path = tuple
LAYER_KEY = re.compile(r"(?:^|\.)(?:layers|block)\.(\d+)\.")  # a numbered layer's tensor


def convert_as_stored(ctor: Callable[[], Any], tensors: Mapping[str, Any],
                      convert_fn: Callable[[Mapping[str, Any], Mapping[Path, Any]], dict[Path, Any]],
                      where: str) -> tuple[Any, Any, dict[Path, Any]]:
    """(graphdef, abstract state, converted values) of the module ``ctor`` builds, filled from ``tensors`` by
    ``convert_fn(tensors, flat_abstract)``, its Linear layers 8-bit where the file stores them 8-bit (a scaled
    layout's scales folded into their weights, :func:`vidax_core.quant.policy.tensors_for_load`)."""
    from vidax_core.nn.state import abstract_model

    if _knows_dtypes(tensors):
        from vidax_core.quant.policy import tensors_for_load

        tensors = tensors_for_load(tensors, where)
    graphdef, state, flat = abstract_model(ctor)
    values = convert_fn(tensors, flat)
    chosen = stored_8bit(values) if _knows_dtypes(tensors) else {}
    if not chosen:
        return graphdef, state, values

    def ctor_8bit() -> Any:
        from vidax_core.quant.linear import quantize_layers

        model = ctor()
        quantize_layers(model, chosen)
        return model

    graphdef, state, flat = abstract_model(ctor_8bit)
    return graphdef, state, convert_fn(tensors, flat)


def stored_8bit(values: Mapping[Path, Any]) -> dict[Path, str]:
    """Kernel path -> 8-bit mode of every converted kernel whose source tensors the file stores all in one 8-bit
    dtype (float8_e4m3fn or int8; a float8_e5m2 weight is dequantised)."""
    from vidax_core.io.lazy import is_lazy

    out = {}
    for path, v in values.items():
        if not path or path[-1] != "kernel" or not is_lazy(v):
            continue
        found = {modes.mode_of_dtype(d) if modes.is_8bit(d) else None for d in v.source_dtypes()}
        if len(found) == 1 and None not in found:
            out[path] = found.pop()
    return out


def _knows_dtypes(tensors: Any) -> bool:
    """Whether ``tensors`` says its dtypes from file headers (or holds plain arrays), so looking costs no read."""
    return hasattr(tensors, "dtype") or (type(tensors) is dict and all(isinstance(v, np.ndarray)
                                                                        for v in tensors.values()))


#: Tensors of a layer that are no Linear weight, read in the compute dtype even when stored 8-bit.
NOT_LINEAR = re.compile(r"embed|shared|relative_attention_bias|norm")


def stays_8bit(key: str, dtype: Any, shape: tuple[int, ...]) -> bool:
    """Whether a tower keeps the file tensor ``key`` 8-bit, judged from its name and header as a plan must (no model
    built): a 2-D float8_e4m3fn / int8 weight of a numbered layer (``layers.N.`` / ``block.N.``) that is no
    embedding, norm or position-bias table, as :func:`convert_as_stored` finds the Linear kernels."""
    return (modes.mode_of_dtype(dtype) is not None and len(shape) == 2 and key.endswith(".weight")
            and LAYER_KEY.search(key) is not None and NOT_LINEAR.search(key) is None)


def held_bytes(shape: tuple[int, ...]) -> int:
    """Bytes a kept 8-bit weight of torch shape ``(out, in)`` holds: its values and one fp32 scale per output."""
    return int(np.prod(shape)) + 4 * int(shape[0])
