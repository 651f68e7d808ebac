"""HunyuanVideo-1.5's guidance, read as its pipelines read it: from the checkpoint's ``guider/guider_config.json``.

The pipelines take no ``guidance_scale``; their ``ClassifierFreeGuidance`` guider holds it, with ``enabled``,
``use_original_formulation`` (``cond + g (cond - uncond)`` instead of ``uncond + g (cond - uncond)``),
``guidance_rescale`` and the step window ``start``/``stop`` (fractions of the steps: guidance applies at steps
``int(start N) <= i < int(stop N)``, the conditional prediction alone elsewhere). vidax takes every field from the
file (:mod:`vidax_core.guiders`, which also reads the other guider kind it runs) and the scale from
``sampling.guidance_scale`` (the presets hold the published 6.0). Guidance is off, one pass per step, when the
guider is disabled, its window holds no step, or the scale is the formulation's identity (1, or 0 for the original
formulation), as the guider's ``_is_cfg_enabled``.
"""

from __future__ import annotations

from typing import Any

from vidax_core.guiders import guidance_from_guider, guider_json, guider_problems

__all__ = ["guidance", "guider_problems"]


def guidance(ckpt: Any, run: Any):
    return guidance_from_guider(guider_json(ckpt), scale=float(run.sampling.guidance_scale),
                                num_steps=int(run.sampling.num_steps))
