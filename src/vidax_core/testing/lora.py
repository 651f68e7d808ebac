"""Tiny LoRA adapters for parity tests: written with real key names by the test, loaded by diffusers (the
reference: ``load_lora_weights`` + ``set_adapters`` + ``fuse_lora``) and by vidax (:mod:`vidax_core.lora`).

Needs the ``test`` extra (torch, diffusers, peft, safetensors)."""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Mapping, Sequence

import numpy as np


def save_adapter(path: str | os.PathLike, tensors: Mapping[str, np.ndarray],
                 peft_config: Mapping[str, Any] | None = None) -> str:
    """Write ``tensors`` as a safetensors adapter; ``peft_config`` is stored as diffusers stores it (the
    ``lora_adapter_metadata`` of the ``transformer`` component)."""
    from safetensors.numpy import save_file

    meta = {"format": "pt"}
    if peft_config is not None:
        meta["lora_adapter_metadata"] = json.dumps({f"transformer.{k}": v for k, v in peft_config.items()})
    save_file({k: np.ascontiguousarray(v, np.float32) for k, v in tensors.items()}, str(path), metadata=meta)
    return str(path)


def diffusers_fused(pipe: Any, adapters: Sequence[tuple[str, float, Mapping[str, Any]]],
                    components: Sequence[str] = ("transformer",)) -> dict[str, dict[str, np.ndarray]]:
    """The denoisers' state dicts after ``pipe.load_lora_weights`` of each ``(path, scale, load kwargs)``,
    ``pipe.set_adapters(names, scales)`` and ``fuse_lora``: the weights diffusers runs with, per component."""
    names = []
    for i, (path, _, kwargs) in enumerate(adapters):
        pipe.load_lora_weights(str(path), adapter_name=f"a{i}", **dict(kwargs))
        names.append(f"a{i}")
    pipe.set_adapters(names, adapter_weights=[float(s) for _, s, _ in adapters])
    pipe.fuse_lora(components=list(components), adapter_names=names)
    pipe.unload_lora_weights()
    return {c: {k: v.detach().float().numpy().copy() for k, v in getattr(pipe, c).state_dict().items()}
            for c in components}


def vidax_fused(base: Mapping[str, np.ndarray], adapters: Sequence[tuple[str, float]],
                key_map: Callable[[str], Any] | None, model: str = "model") -> dict[str, np.ndarray]:
    """``base`` (a checkpoint's tensors) with the adapters fused as a vidax load fuses them (same checks)."""
    from vidax_core.lora import fuse
    from vidax_core.lora.plan import read_adapter

    deltas: dict[str, list] = {}
    for i, (path, scale) in enumerate(adapters):
        _, targets = read_adapter(str(path), None, f"lora[{i}]", key_map, base, model)
        for k, items in fuse.terms(targets, float(scale)).items():
            deltas.setdefault(k, []).extend(items)
    view = fuse.fused(base, deltas)
    return {k: np.asarray(view[k], np.float32) for k in base}


def max_diff(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray]) -> float:
    """Largest absolute difference over the keys of ``a`` (every one must be in ``b`` with its shape)."""
    return max(float(np.max(np.abs(np.asarray(a[k], np.float64) - np.asarray(b[k], np.float64)).reshape(-1),
                               initial=0.0)) for k in a)


def random_lora(state: Mapping[str, np.ndarray], *, prefix: str = "transformer.", include: str = r".*",
                rank: int = 4, seed: int = 0, parts: tuple[str, str] = ("lora_A", "lora_B"),
                alpha: float | None = None, std: float = 0.3) -> dict[str, np.ndarray]:
    """A random adapter for every 2-D ``*.weight`` of ``state`` whose module name matches ``include`` (a regex),
    keyed ``<prefix><module>.<parts[0]>.weight`` / ``<parts[1]>.weight`` (+ ``.alpha``)."""
    import re

    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for key in sorted(state):
        w = state[key]
        if not key.endswith(".weight") or np.ndim(w) != 2 or not re.fullmatch(include, key[: -len(".weight")]):
            continue
        module = key[: -len(".weight")]
        o, i = np.shape(w)
        out[f"{prefix}{module}.{parts[0]}.weight"] = rng.normal(0, std, (rank, i)).astype(np.float32)
        out[f"{prefix}{module}.{parts[1]}.weight"] = rng.normal(0, std, (o, rank)).astype(np.float32)
        if alpha is not None:
            out[f"{prefix}{module}.alpha"] = np.float32(alpha)
    return out
