"""A checkpoint's diffusers guider (``guider/guider_config.json``) as a :class:`vidax_core.guidance.Guidance`.

Pipelines built on diffusers' guiders take no ``guidance_scale``: the guider component holds it with its other
settings. Two kinds are read:

* ``ClassifierFreeGuidance``: ``guidance_scale``, ``guidance_rescale``, ``use_original_formulation`` (``cond + g
  (cond - uncond)`` instead of ``uncond + g (cond - uncond)``), ``start`` / ``stop``, ``enabled``;
* ``AdaptiveProjectedGuidance``: the same, plus ``adaptive_projected_guidance_momentum``,
  ``adaptive_projected_guidance_rescale`` (the norm threshold), ``adaptive_projected_guidance_norm_dim`` and
  ``eta`` (:class:`vidax_core.guidance.AdaptiveProjected`).

Keys a file leaves out take the class's defaults; a checkpoint without a ``guider/`` folder is read as a default
``ClassifierFreeGuidance``. Guidance runs at steps ``int(start N) <= i < int(stop N)`` (the conditional prediction
alone elsewhere), and not at all, one pass per step, when the guider is disabled, when that window holds no step,
or when the scale is its formulation's identity (1, or 0 for the original formulation), as the guiders'
``_is_cfg_enabled`` / ``_is_apg_enabled``. The scale is the run's ``sampling.guidance_scale`` when set, else the
file's.
"""

from __future__ import annotations

import math
import os
from typing import Any, Mapping

from vidax_core.guidance import AdaptiveProjected, ClassifierFree, Guidance, NoGuidance, WindowedClassifierFree

FILE = "guider/guider_config.json"
CFG, APG = "ClassifierFreeGuidance", "AdaptiveProjectedGuidance"
_COMMON = {"guidance_scale": 7.5, "guidance_rescale": 0.0, "use_original_formulation": False, "start": 0.0,
           "stop": 1.0, "enabled": True}
#: each guider class -> its fields and their defaults (diffusers 0.42)
DEFAULTS: dict[str, dict[str, Any]] = {
    CFG: dict(_COMMON),
    APG: dict(_COMMON, adaptive_projected_guidance_momentum=None, adaptive_projected_guidance_rescale=15.0,
              adaptive_projected_guidance_norm_dim=None, eta=1.0),
}


def guider_json(ckpt: Any) -> dict | None:
    """The checkpoint's guider config as a dict (None without a ``guider/`` folder; {} without its json file)."""
    from vidax_core.io.checkpoint import read_json_file

    if not ckpt.has("guider"):
        return None
    path = os.path.join(ckpt.path("guider"), "guider_config.json")
    return read_json_file(path) if os.path.isfile(path) else {}


def read_guider(config: Mapping[str, Any] | None) -> tuple[str, dict[str, Any]]:
    """(class name, every field with the file's value or the class's default); raises ValueError (one phrase) for
    a class vidax does not run or a value of the wrong kind."""
    config = dict(config or {})
    name = config.get("_class_name", CFG)
    if name not in DEFAULTS:
        raise ValueError(f"_class_name={name!r} is not supported (vidax runs {', '.join(DEFAULTS)})")
    out = dict(DEFAULTS[name])
    for key, default in DEFAULTS[name].items():
        if key not in config:
            continue
        value = config[key]
        if key == "adaptive_projected_guidance_norm_dim":
            dims = [value] if isinstance(value, int) and not isinstance(value, bool) else value
            if dims is not None and (not isinstance(dims, (list, tuple)) or not dims or
                                     not all(isinstance(d, int) and not isinstance(d, bool) for d in dims)):
                raise ValueError(f"{key}={value!r} must be an integer, a list of integers or null")
            out[key] = None if dims is None else tuple(dims)
        elif isinstance(default, bool):
            if not isinstance(value, bool):
                raise ValueError(f"{key}={value!r} must be true or false")
            out[key] = value
        elif value is None and default is None:
            out[key] = None
        else:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{key}={value!r} must be a finite number")
            out[key] = float(value)
    if not 0.0 <= out["start"] < 1.0 or not out["start"] <= out["stop"] <= 1.0:
        raise ValueError(f"start={out['start']}, stop={out['stop']} must satisfy 0 <= start < 1 and start <= stop <= 1")
    return name, out


def guider_problems(ckpt: Any) -> list[str]:
    """The guider config's problems, one line each (none without a guider)."""
    config = guider_json(ckpt)
    if config is None:
        return []
    if not isinstance(config, dict):
        return [f"{FILE}: not a JSON object"]
    try:
        read_guider(config)
    except ValueError as exc:
        return [f"{FILE}: {exc}"]
    return []


def guider_scale(config: Mapping[str, Any] | None) -> float:
    """The guider's ``guidance_scale`` (its class's default when the file leaves it out)."""
    return float(read_guider(config)[1]["guidance_scale"])


def guidance_from_guider(config: Mapping[str, Any] | None, *, scale: float | None, num_steps: int) -> Guidance:
    """The strategy of guider ``config`` (a ``guider_config.json`` dict, None for the default guider) for a run of
    ``num_steps`` steps; ``scale`` replaces the file's ``guidance_scale`` when not None."""
    name, g = read_guider(config)
    scale = float(g["guidance_scale"] if scale is None else scale)
    original = bool(g["use_original_formulation"])
    first, last = int(g["start"] * num_steps), int(g["stop"] * num_steps)
    if not g["enabled"] or math.isclose(scale, 0.0 if original else 1.0) or last <= first:
        return NoGuidance()
    formula = "cond" if original else "uncond"
    window = {} if (first, last) == (0, num_steps) else {"first": first, "last": last}
    if name == APG:
        return AdaptiveProjected(scale=scale, momentum=g["adaptive_projected_guidance_momentum"],
                                 norm_threshold=float(g["adaptive_projected_guidance_rescale"]),
                                 norm_dims=g["adaptive_projected_guidance_norm_dim"], eta=float(g["eta"]),
                                 formula=formula, rescale_phi=float(g["guidance_rescale"]), **window)
    if window:
        return WindowedClassifierFree(scale=scale, formula=formula, rescale_phi=float(g["guidance_rescale"]),
                                      **window)
    return ClassifierFree(scale=scale, formula=formula, rescale_phi=float(g["guidance_rescale"]))


__all__ = ["APG", "CFG", "DEFAULTS", "FILE", "guidance_from_guider", "guider_json", "guider_problems",
           "guider_scale", "read_guider"]
