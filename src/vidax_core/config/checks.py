"""Checks of a typed run config that go beyond one field's type: upper bounds, paths, sampler options.

These run once, in :func:`vidax_core.config.validate`, so every later stage can trust the values: sizes are
bounded (no overflow or multi-GiB allocation from a typo), paths are expanded (``~``) and printable, output
files are distinct, and numeric sampler options are finite.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, Mapping

from vidax_core.config.parse import short_repr
from vidax_core.errors import UserError

# key -> inclusive upper bound; far above any real run, far below what overflows or exhausts memory.
UPPER_BOUNDS = {
    "sampling.num_steps": 10_000,
    "sampling.boundary_step_index": 10_000,
    "sampling.height": 16_384,
    "sampling.width": 16_384,
    "sampling.num_frames": 10_001,
    "sampling.max_sequence_length": 65_536,
    "sampling.guidance_scale": 1e6,
    "sampling.guidance_scale_2": 1e6,
    "parallel.tp": 65_536,
    "parallel.sp": 65_536,
    "parallel.dp": 65_536,
    "offload.chunk_size": 65_536,
    "output.fps": 1_000,
}

# Keys holding file or folder names (expanded with ``~`` and checked to be usable names).
PATH_KEYS = (
    "image",
    "video",
    "sampling.initial_noise",
    "output.path",
    "output.save_latents",
    "output.save_frames",
    "output.save_audio",
    "output.metrics",
    "runtime.compilation_cache_dir",
)
OUTPUT_KEYS = ("output.path", "output.save_latents", "output.save_frames", "output.save_audio", "output.metrics")
NAME_MAX = 255
PATH_MAX = 4096


def _get(cfg: Any, dotted: str) -> Any:
    obj = cfg
    for part in dotted.split("."):
        if not hasattr(obj, part):
            return None
        obj = getattr(obj, part)
    return obj


def _replace(cfg: Any, dotted: str, value: Any) -> Any:
    head, _, rest = dotted.partition(".")
    if not rest:
        return dataclasses.replace(cfg, **{head: value})
    return dataclasses.replace(cfg, **{head: _replace(getattr(cfg, head), rest, value)})


def check_path_text(key: str, value: str) -> str:
    """``value`` with ``~`` expanded, or a UserError if it cannot name a file on this system."""
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise UserError(f"config key {key} contains a control character (NUL, newline...): {short_repr(value)}")
    path = os.path.expanduser(value)
    if len(os.fsencode(path)) > PATH_MAX:
        raise UserError(f"config key {key} is longer than {PATH_MAX} bytes")
    for part in path.split(os.sep):
        if len(os.fsencode(part)) > NAME_MAX:
            raise UserError(f"config key {key} has a name longer than {NAME_MAX} bytes: {short_repr(part)}")
    return path


def check_bounds(cfg: Any) -> None:
    for key, top in UPPER_BOUNDS.items():
        value = _get(cfg, key)
        if isinstance(value, (int, float)) and value > top:
            raise UserError(f"config key {key} must be at most {top:g}, got {short_repr(value)}")


def check_paths(cfg: Any) -> Any:
    """Bounds and path checks of a validated config; returns it with every path ``~``-expanded."""
    check_bounds(cfg)
    for key in PATH_KEYS:
        value = _get(cfg, key)
        if isinstance(value, str):
            if key == "runtime.compilation_cache_dir" and not value.strip():
                raise UserError("config key runtime.compilation_cache_dir must name a folder "
                                "(or set runtime.compilation_cache=false)")
            expanded = check_path_text(key, value) if value else value
            if expanded != value:
                cfg = _replace(cfg, key, expanded)
    ckpt = _get(cfg, "model.checkpoint")
    if isinstance(ckpt, str):
        check_path_text("model.checkpoint", ckpt)
    files = _get(cfg, "model.files")
    if isinstance(files, Mapping):
        for key, path in files.items():
            if isinstance(path, str):
                check_path_text(f"model.files.{key}", path)
    seen: dict[str, str] = {}
    for key in OUTPUT_KEYS:
        value = _get(cfg, key)
        if not value:
            continue
        real = os.path.realpath(value)
        if real in seen:
            raise UserError(f"config keys {seen[real]} and {key} name the same file {value}: "
                            "give each output its own name")
        seen[real] = key
    return cfg


def check_scheduler_options(sched: Any) -> None:
    """Numeric options of ``sampling.scheduler: {name: ..., ...}`` must be finite; counts at least 1."""
    if not isinstance(sched, Mapping):
        return
    for k, v in sched.items():
        key = f"sampling.scheduler.{k}"
        if not isinstance(k, str):
            raise UserError(f"config key sampling.scheduler has a non-name key {short_repr(k)}: use option names")
        if isinstance(v, bool):
            continue
        if isinstance(v, float) and not math.isfinite(v):
            raise UserError(f"config key {key} must be a finite number, got {v!r}")
        if isinstance(v, int) and not -(2**31) <= v < 2**31:
            raise UserError(f"config key {key} is out of range, got {short_repr(v)}")
        if isinstance(v, (list, tuple)):
            for x in v:
                if isinstance(x, float) and not math.isfinite(x):
                    raise UserError(f"config key {key} must hold finite numbers, got {short_repr(v)}")
        if ((k.startswith("num_") or k.endswith("_steps") or k.endswith("_timesteps"))
                and isinstance(v, (int, float)) and v < 1):
            raise UserError(f"config key {key} must be at least 1, got {v!r}")
