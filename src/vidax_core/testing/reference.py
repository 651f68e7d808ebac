"""Helpers around the PyTorch reference (needs the ``test`` extra: torch, diffusers, transformers).

* :func:`randomize_` — every parameter of a reference module drawn from a seeded normal (norm gains around 1), so
  no term of a parity check is trivially zero; :func:`save_pipeline` writes a pipeline as a checkpoint folder.
* :func:`meta_tensors` and :func:`check_full_size` — a model's full published architecture checked without weights:
  the reference module built on the meta device gives key -> shape, zero-stride stand-ins carry the shapes, and the
  vidax conversion table must fill the full-size ``eval_shape`` tree exactly.

torch is imported inside the functions, so importing this module costs nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np


def randomize_(module, seed: int, std: float = 0.1) -> None:
    """Overwrite every parameter of a torch module with seeded normal noise (norm gains around 1)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(module.named_parameters()):
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32) * std
            is_gain = p.ndim <= 1 and ("norm" in name or name.endswith("gamma")) and "bias" not in name
            p.copy_((1.0 + noise) if is_gain else noise)


def save_pipeline(pipe, folder: str | os.PathLike) -> Path:
    """``save_pretrained`` a diffusers pipeline (safetensors) into ``folder``: a checkpoint vidax loads as a user's."""
    pipe.save_pretrained(str(folder), safe_serialization=True)
    return Path(folder)


def torch_param_bytes(module) -> int:
    """Bytes of a torch module's parameters at fp32 (the reference's own count)."""
    return sum(int(p.numel()) for p in module.parameters()) * 4


class MetaTensors(dict):
    """key -> zero-stride float32 stand-in of the reference tensor's shape (no memory), with ``shape(key)`` as the
    core's lazy checkpoint readers have."""

    def shape(self, key):
        return self[key].shape


def meta_tensors(build: Callable[[], Any] | Any) -> MetaTensors:
    """The state dict of a reference module as stand-ins; ``build`` is called under ``torch.device("meta")`` (or is
    a module already built there)."""
    import torch

    if callable(build) and not isinstance(build, torch.nn.Module):
        with torch.device("meta"):
            build = build()
    zero = np.zeros((), np.float32)
    return MetaTensors({k: np.broadcast_to(zero, tuple(v.shape)) for k, v in build.state_dict().items()})


@dataclass(frozen=True)
class FullSize:
    reference_tensors: int
    vidax_leaves: int
    reference_params: int
    vidax_params: int


def check_full_size(tensors: dict, rules, ctor: Callable[[], Any], *, component: str,
                    ignore: Iterable[str] = (), label: str = "") -> FullSize:
    """Convert the stand-ins ``tensors`` with ``rules`` onto the ``eval_shape`` tree of ``ctor()`` (check only:
    every missing, unexpected or mis-shaped key raises); return the tensor and parameter counts of both sides (keys
    matched by the ``ignore`` regexes left out of the reference's parameter count) for the caller's assertions."""
    import re

    from vidax_core.io.convert import convert
    from vidax_core.nn.state import abstract_model

    ignore = list(ignore)
    _, _, flat = abstract_model(ctor)
    convert(tensors, rules, flat, component=component, ignore=ignore, check_only=True)
    kept = [k for k in tensors if not any(re.fullmatch(p, k) for p in ignore)]
    out = FullSize(len(tensors), len(flat), sum(int(np.prod(tensors[k].shape)) for k in kept),
                   sum(int(np.prod(v.shape)) for v in flat.values()))
    print(f"{label or component}: {out.reference_tensors} reference tensors -> {out.vidax_leaves} vidax leaves, "
          f"{out.vidax_params / 1e9:.3f}B parameters")
    return out
