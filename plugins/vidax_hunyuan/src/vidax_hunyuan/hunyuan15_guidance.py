"""HunyuanVideo-1.5's guidance, read as its pipelines read it: from the checkpoint's ``guider/guider_config.json``.

The pipelines take no ``guidance_scale``; their ``ClassifierFreeGuidance`` guider holds it, with ``enabled``,
``use_original_formulation`` (``cond + g (cond - uncond)`` instead of ``uncond + g (cond - uncond)``),
``guidance_rescale`` and the step window ``start``/``stop`` (fractions of the steps: guidance applies at steps
``int(start N) <= i < int(stop N)``, the conditional prediction alone elsewhere). vidax takes every field from the
file and the scale from ``sampling.guidance_scale`` (the presets hold the published 6.0). Guidance is off, one
pass per step, when the guider is disabled or the scale is the formulation's identity (1, or 0 for the original
formulation), as the guider's ``_is_cfg_enabled``; a step outside the window combines with scale 1 (uncond
formulation) or 0 (original), which is the conditional prediction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from vidax_core.guidance import ClassifierFree, NoGuidance, WindowedClassifierFree
from vidax_core.guiders import FILE, guider_json

KNOWN = ("ClassifierFreeGuidance",)


@dataclass(frozen=True)
class GuiderConfig:
    guidance_scale: float = 7.5  # ClassifierFreeGuidance's defaults, for keys a file leaves out
    guidance_rescale: float = 0.0
    use_original_formulation: bool = False
    start: float = 0.0
    stop: float = 1.0
    enabled: bool = True

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "GuiderConfig":
        return cls(**{k: type(getattr(cls, k))(config[k]) for k in cls.__dataclass_fields__ if k in config})


def read_guider(ckpt: Any) -> GuiderConfig:
    """The checkpoint's guider config (the class's defaults for what it leaves out, or without a guider)."""
    config = guider_json(ckpt)
    return GuiderConfig.from_config(config) if config is not None else GuiderConfig()


def guider_problems(ckpt: Any) -> list[str]:
    config = guider_json(ckpt)
    if config is None:
        return []
    if not isinstance(config, dict):
        return [f"{FILE}: not a JSON object"]
    name = config.get("_class_name", "ClassifierFreeGuidance")
    if name not in KNOWN:
        return [f"{FILE}: _class_name={name!r} is not supported (vidax runs {', '.join(KNOWN)})"]
    try:
        g = GuiderConfig.from_config(config)
    except (TypeError, ValueError) as exc:
        return [f"{FILE}: unusable ({exc})"]
    if not 0.0 <= g.start <= g.stop <= 1.0:
        return [f"{FILE}: start={g.start}, stop={g.stop} must satisfy 0 <= start <= stop <= 1"]
    return []


def guidance(ckpt: Any, run: Any):
    g = read_guider(ckpt)
    scale = float(run.sampling.guidance_scale)
    identity = 0.0 if g.use_original_formulation else 1.0
    if not g.enabled or math.isclose(scale, identity):
        return NoGuidance()
    n = int(run.sampling.num_steps)
    formula = "cond" if g.use_original_formulation else "uncond"
    if (g.start, g.stop) == (0.0, 1.0):
        return ClassifierFree(scale=scale, formula=formula, rescale_phi=g.guidance_rescale)
    return WindowedClassifierFree(scale=scale, formula=formula, rescale_phi=g.guidance_rescale,
                                  first=int(g.start * n), last=int(g.stop * n))
