"""Helpers around the PyTorch reference (needs the ``test`` extra: torch, diffusers, transformers).

* :func:`randomize_` — every parameter of a reference module drawn from a seeded normal (norm gains around 1), so
  no term of a parity check is trivially zero; :func:`save_pipeline` writes a pipeline as a checkpoint folder.
* :func:`meta_tensors` and :func:`check_full_size` — a model's full published architecture checked without weights:
  the reference module built on the meta device gives key -> shape, zero-stride stand-ins carry the shapes, and the
  vidax conversion must fill the full-size ``eval_shape`` tree exactly, with as many parameters as the reference;
  :func:`registered_models` lists the ids a family's full-size test must cover.

torch is imported inside the functions, so importing this module costs nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
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
    core's lazy checkpoint readers have; ``aliases`` are the keys of tied parameters after their first name (T5's
    ``encoder.embed_tokens.weight`` is ``shared.weight``), which a parameter count takes once."""

    aliases: frozenset = frozenset()

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
    out = MetaTensors({k: np.broadcast_to(zero, tuple(v.shape)) for k, v in build.state_dict().items()})
    names = {k for k, _ in build.named_parameters(remove_duplicate=False)}
    out.aliases = frozenset(names - {k for k, _ in build.named_parameters()})
    return out


@dataclass(frozen=True)
class FullSize:
    reference_tensors: int
    vidax_leaves: int
    reference_params: int
    vidax_params: int
    tensors: Any = field(default=None, repr=False, compare=False)  # the stand-ins checked
    flat: Any = field(default=None, repr=False, compare=False)  # the vidax eval_shape tree, path -> leaf
    dropped: tuple[str, ...] = field(default=(), repr=False, compare=False)  # reference keys matched by ``ignore``


def check_full_size(tensors: Any, rules: Any, ctor: Callable[[], Any], *, component: str = "transformer",
                    ignore: Iterable[str] = (), label: str = "",
                    params: tuple[float, float] | None = None) -> FullSize:
    """A published architecture checked without weights: convert the stand-ins onto the ``eval_shape`` tree of
    ``ctor()`` (check only: every missing, unexpected or mis-shaped key raises) and assert that both sides count the
    same parameters (keys matched by the ``ignore`` regexes and tied aliases left out of the reference's count)
    and, with ``params=(lo, hi)``, that the count lies strictly between the published bounds.

    ``tensors`` is a dict of stand-ins, or the reference module (or a zero-argument builder of it, called on the
    meta device) whose :func:`meta_tensors` are taken; ``rules`` is a KeyRule table, or a function
    ``fill(tensors, flat)`` for a family whose conversion is code (it must convert check-only). Returns the counts,
    the stand-ins, the vidax tree and the dropped keys for the caller's own assertions."""
    import re

    from vidax_core.io.convert import convert
    from vidax_core.nn.state import abstract_model

    if not isinstance(tensors, dict):
        tensors = meta_tensors(tensors)
    ignore = list(ignore)
    _, _, flat = abstract_model(ctor)
    if callable(rules):
        rules(tensors, flat)
    else:
        convert(tensors, rules, flat, component=component, ignore=ignore, check_only=True)
    dropped = tuple(k for k in tensors if any(re.fullmatch(p, k) for p in ignore))
    uncounted = set(dropped) | set(getattr(tensors, "aliases", ()))
    n_ref = sum(int(np.prod(v.shape)) for k, v in tensors.items() if k not in uncounted)
    out = FullSize(len(tensors), len(flat), n_ref, sum(int(np.prod(v.shape)) for v in flat.values()), tensors, flat,
                   dropped)
    print(f"{label or component}: {out.reference_tensors} reference tensors -> {out.vidax_leaves} vidax leaves, "
          f"{out.vidax_params / 1e9:.3f}B parameters")
    assert out.reference_params == out.vidax_params, (
        f"{label or component}: the reference has {out.reference_params} parameters, vidax {out.vidax_params}")
    if params is not None:
        lo, hi = params
        assert lo < out.vidax_params < hi, f"{label or component}: {out.vidax_params} parameters, not in ({lo}, {hi})"
    return out


def registered_models(family: str) -> set[str]:
    """The model ids the installed plugins register for ``family`` (a full-size test covers each of them)."""
    from vidax_core.plugins import get_plugins

    return {s.id for s in get_plugins().registry if s.family == family}
