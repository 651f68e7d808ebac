"""What a run stores 8-bit: ``model.weight_dtype`` when set, else the checkpoint's own 8-bit storage
(:func:`vidax_core.quant.source.read_layout` on its tensor headers), else nothing.

:func:`apply` wraps a denoiser build so every consumer (placement, dry run, offload, loading) sees the model with
its block Linear layers (and the family's named layers outside the blocks) 8-bit;
:func:`tensors_for_load` folds the checkpoint's scales into their weights.
"""

from __future__ import annotations

import dataclasses
import re
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
    """Every denoiser build of a run with the run's 8-bit mode applied to the stacked blocks' Linear layers (but the
    family's keep list). Outside the blocks, a layer is 8-bit only where the checkpoint itself stores it 8-bit, or
    where ``model.weight_dtype`` quantizes at load and ``model.quantize_outside_blocks`` asks for the family's
    ``quantization_outside_blocks`` list too: a file's full-precision embedders and heads stay as stored."""
    from vidax_core.quant.keep import DEFAULT_KEEP

    out = []
    for b in builds:
        mode = run_mode(cfg, ckpt, b.component)
        if mode is None:
            out.append(b)
            continue
        keep = plugins.declared(spec, "quantization_keep")
        keep = DEFAULT_KEEP if keep is None else tuple(keep)
        outside: tuple[str, ...] = ()
        if getattr(cfg.model, "weight_dtype", None) and getattr(cfg.model, "quantize_outside_blocks", False):
            outside = tuple(plugins.call("quantization_outside_blocks", spec, component=b.component) or ())
        stored = stored_8bit_outside(apply(b, mode, keep, ()), spec, ckpt, plugins)
        out.append(apply(b, mode, keep, outside + tuple(re.escape(p) for p in stored)))
    return out


def stored_8bit_outside(build: Any, spec: Any, ckpt: Any, plugins: Any) -> list[str]:
    """'/'-joined paths of the Linear layers outside the stacked blocks whose weights the checkpoint stores 8-bit,
    found by routing the checkpoint's keys through the family's conversion (headers only, nothing read)."""
    from vidax_core.io.lazy import is_lazy
    from vidax_core.nn.state import abstract_model
    from vidax_core.quant import modes

    lay = checkpoint_layout(ckpt, build.component)
    if lay is None or lay.name is None:
        return []
    try:
        tensors = tensors_for_load(ckpt.read_tensors(build.component), f"{ckpt.source} ({build.component})")
        _, _, flat = abstract_model(build.ctor)
        values = plugins.call("convert_checkpoint", spec, component=build.component, tensors=tensors, abstract=flat,
                              config=ckpt.config(build.component))
    except UserError:
        return []  # the load reports what is wrong with the checkpoint
    found = []
    for path, v in (values or {}).items():
        if path[-1] != "kernel" or not is_lazy(v) or v.stacked:
            continue
        if (path[:-1] + ("kernel_scale",)) in flat:
            continue  # already 8-bit
        if any(modes.is_8bit(d) for d in v.source_dtypes()):
            found.append("/".join(map(str, path[:-1])))
    return found


def tensors_for_load(tensors: Mapping[str, Any], where: str, log: Any = None) -> Mapping[str, Any]:
    """``tensors`` with any 8-bit layout folded in (the same mapping when it has none)."""
    from vidax_core.quant.source import QuantizedTensors, read_layout

    lay = read_layout(tensors, where)
    if lay.name is None:
        return tensors
    if log is not None:
        log(f"{where}: {lay.name} 8-bit weights ({lay.mode})" + "".join(f"; {n}" for n in lay.notes))
    return QuantizedTensors(tensors, lay, where)
