"""Wan2.2 A14B's two denoisers: which checkpoint has them and at which model timestep the second takes over."""

from __future__ import annotations


def has_component(ckpt, name: str) -> bool:
    """``name`` is a real component of the checkpoint (model_index.json may list it as ``[null, null]``)."""
    entry = ckpt.model_index.get(name)
    return ckpt.has(name) and not (isinstance(entry, list) and entry[0] is None)


def two_experts(ckpt) -> bool:
    return has_component(ckpt, "transformer_2")


def boundary(ckpt) -> float:
    """The model timestep where the high-noise expert hands over: ``boundary_ratio`` x the training steps."""
    steps = float(ckpt.config("scheduler").get("num_train_timesteps", 1000))
    return float(ckpt.model_index.get("boundary_ratio") or 0.875) * steps
