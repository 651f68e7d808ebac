"""What a run stores 8-bit: ``model.weight_dtype`` when set, else the checkpoint's own 8-bit storage
(:func:`vidax_core.quant.source.read_layout` on its tensor headers), else nothing.

:func:`apply` wraps a denoiser build so every consumer (placement, dry run, offload, loading) sees the model with
its block Linear layers (and the family's named layers outside the blocks) 8-bit; :func:`tensors_for_load` folds the checkpoint's scales into their weights.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

from vidax_core.errors import UserError


def checkpoint_layout(ckpt: Any, component: str) -> Any:
    """The 8-bit layout of ``component``'s tensors (None when its weights are not at hand: a dry run of a hub
    repo fetches only the JSON files)."""
    from vidax_core.quant.source import read_layout

    try:
        source = ckpt.read_tensors(component)
    except UserError:
        return None
    return read_layout(source, f"checkpoint {getattr(ckpt, 'source', '')} ({component})")


def run_mode(cfg: Any, ckpt: Any, component: str) -> str | None:
    """The run's 8-bit mode for ``component``: the run key, else the checkpoint's storage, else None."""
    asked = getattr(cfg.model, "weight_dtype", None)
    if asked:
        return asked
    lay = checkpoint_layout(ckpt, component)
    return lay.mode if lay is not None else None


def apply(build: Any, mode: str | None, keep: Sequence[str], outside: Sequence[str] = ()) -> Any:
    """``build`` whose module has its block Linear layers (but ``keep``) and the ``outside`` Linear layers 8-bit in
    ``mode`` (``build`` itself for None)."""
    if mode is None:
        return build
    inner = build.ctor

    def ctor():
        from vidax_core.quant.linear import quantize_model

        model = inner()
        quantize_model(model, mode, keep, outside)
        return model

    return dataclasses.replace(build, ctor=ctor, weight_storage=mode)


def builds_for_run(builds: list, spec: Any, ckpt: Any, cfg: Any, plugins: Any) -> list:
    """Every denoiser build of a run with the run's 8-bit mode applied (the family's keep list inside the blocks,
    its ``quantization_outside_blocks`` list outside them)."""
    from vidax_core.quant.keep import DEFAULT_KEEP

    out = []
    for b in builds:
        mode = run_mode(cfg, ckpt, b.component)
        keep = plugins.call("quantization_keep", spec, component=b.component) if mode else None
        outside = plugins.call("quantization_outside_blocks", spec, component=b.component) if mode else None
        out.append(apply(b, mode, DEFAULT_KEEP if keep is None else tuple(keep), tuple(outside or ())))
    return out


def tensors_for_load(tensors: Mapping[str, Any], where: str, log: Any = None) -> Mapping[str, Any]:
    """``tensors`` with any 8-bit layout folded in (the same mapping when it has none)."""
    from vidax_core.quant.source import QuantizedTensors, read_layout

    lay = read_layout(tensors, where)
    if lay.name is None:
        return tensors
    if log is not None:
        log(f"{where}: {lay.name} 8-bit weights ({lay.mode})" + "".join(f"; {n}" for n in lay.notes))
    return QuantizedTensors(tensors, lay, where)
