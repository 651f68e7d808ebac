"""Turn the block Linear layers of a built model (and the layers outside the blocks a family names) into 8-bit
layers (kernel + per-output-channel scale).

Applied to the module a :class:`~vidax_core.model_api.DitBuild` constructs, under ``nnx.eval_shape`` (shapes
only: the checkpoint conversion then fills the 8-bit kernels and their scales) or on real weights (at-load
quantization of a random model: benchmarks). The scale carries the kernel's logical axis names with every input
axis unnamed, so tensor parallelism splits it exactly as it splits the kernel's output axis.
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping

import jax.numpy as jnp
from flax import nnx

from vidax_core.nn.layers import LAYERS, Linear
from vidax_core.quant import modes


def scale_names(kernel_names: tuple) -> tuple:
    """Logical names of a kernel's scale: the layer axis and the output axis keep theirs, input axes None."""
    n = len(kernel_names)
    return tuple(name if (i == n - 1 or name == LAYERS) else None for i, name in enumerate(kernel_names))


def _stacked(node: Linear) -> bool:
    names = tuple(node.kernel.get_metadata().get("out_sharding") or ())
    return bool(names) and names[0] == LAYERS


def block_linears(model: nnx.Module, keep: Iterable[str], outside: Iterable[str] = ()) -> list[tuple[str, Linear]]:
    """('/'-joined path, layer) of every Linear inside a stacked group whose path matches no ``keep`` regex, and of
    every Linear outside the stacked groups whose path fully matches an ``outside`` regex (a family's list)."""
    keep_re = [re.compile(p) for p in keep]
    outside_re = [re.compile(p) for p in outside]
    out = []
    for path, node in nnx.iter_graph(model):
        if not isinstance(node, Linear) or node.kernel_scale is not None:
            continue
        where = "/".join(map(str, path))
        if _stacked(node):
            if not any(r.search(where) for r in keep_re):
                out.append((where, node))
        elif any(r.fullmatch(where) for r in outside_re):
            out.append((where, node))
    return out


def quantize_model(model: nnx.Module, mode: str, keep: Iterable[str], outside: Iterable[str] = ()) -> list[str]:
    """Make the block Linear layers of ``model`` (and the ``outside`` ones) 8-bit in ``mode`` (in place); return
    their paths. A stacked kernel gets scales per layer, an unstacked one per tensor (fp8) / channel (int8)."""
    done = []
    for where, lin in block_linears(model, keep, outside):
        quantize_linear(lin, mode)
        done.append(where)
    return done


def quantize_layers(model: nnx.Module, modes_by_path: Mapping[tuple, str]) -> None:
    """Make the Linear layers of ``model`` at the given parameter paths (``(..., "q", "kernel")``, as a
    checkpoint conversion names them) 8-bit, each in its mode (in place)."""
    for path, node in nnx.iter_graph(model):
        mode = modes_by_path.get(tuple(path) + ("kernel",))
        if mode is not None and isinstance(node, Linear) and node.kernel_scale is None:
            quantize_linear(node, mode)


def quantize_linear(lin: Linear, mode: str) -> None:
    """One Linear layer made 8-bit in ``mode``: kernel values and a per-output-channel scale (per layer when
    stacked), the kernel's former dtype kept as the dtype its matmul computes in."""
    meta = lin.kernel.get_metadata()
    names = tuple(meta.get("out_sharding") or (None,) * lin.kernel.ndim)
    axes = (0,) if _stacked(lin) else ()
    q, scale = modes.quantize(lin.kernel[...], mode, per_tensor_axes=axes, xp=jnp)
    compute = lin.kernel[...].dtype
    lin.kernel = nnx.Param(q, **meta)
    lin.kernel_scale = nnx.Param(scale, **{**meta, "out_sharding": scale_names(names)})
    lin.compute_dtype = compute
