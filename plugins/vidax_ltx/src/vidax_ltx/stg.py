"""The LTX-Video dev recipe's per-step guidance: classifier-free guidance plus spatio-temporal guidance (STG) whose
scales, rescale and skipped blocks change along the schedule (Lightricks' ``ltxv-13b-0.9.8-dev.yaml``:
``guidance_timesteps``, ``guidance_scale``, ``stg_scale``, ``rescaling_scale``, ``skip_block_list``).

diffusers has no such pipeline, so this is checked against a float64 restatement of the formula. Per step, with
model timestep ``t``, the list entry used is the last ``i`` with ``guidance_timesteps[i] >= t`` (the first when
none is): ``pred = u + g_i (c - u) + s_i (c - p)``, then guidance rescale with ``phi_i`` (std over all but the batch
axis, unbiased), where ``c``, ``u``, ``p`` are the conditional, negative-prompt and perturbed passes; the perturbed
pass is the conditional one with the self-attention of the blocks in ``skip_block_list[i]`` skipped (values pass
through, LTX's "attention values" strategy).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import jax.numpy as jnp
import numpy as np

from vidax_core.guidance import NEGATIVE, PROMPT, Branch, Guidance, _lin, rescale


def step_index(guidance_timesteps: Sequence[float], t: float) -> int:
    """The list entry a step at model timestep ``t`` uses."""
    idx = [i for i, g in enumerate(guidance_timesteps) if g >= t]
    return idx[-1] if idx else 0


def stg_call_inputs(names, scales, sizes, num_layers: int, on: bool = True):
    """One model call's inputs for spatio-temporal guidance's passes (``Guidance.call_inputs``): where the call
    holds the ``perturbed`` pass (and ``on``), the DiT's perturbed program (``perturbed``, static) with that pass's
    entries skipping the step's layers (``scales["skip"]``) and every other entry none, so the conditional and
    negative passes share the call and a streamed DiT crosses to the device once a step."""
    perturbed = on and "perturbed" in names
    arrays = []
    for name, batch in zip(names, sizes):
        kw = {}
        if perturbed:
            row = scales["skip"] if name == "perturbed" else jnp.zeros_like(scales["skip"])
            kw["stg_skip"] = jnp.broadcast_to(row[None], (batch, num_layers))
        arrays.append(kw)
    return ({"perturbed": True} if perturbed else {}), arrays


@dataclass(frozen=True)
class PerStepSTG(Guidance):
    """Three passes (conditional, negative, perturbed) with per-step lists; ``num_layers`` sizes the skip masks."""

    guidance_timesteps: tuple[float, ...]
    guidance_scales: tuple[float, ...]
    stg_scales: tuple[float, ...]
    rescales: tuple[float, ...]
    skip_blocks: tuple[tuple[int, ...], ...]
    num_layers: int

    @property
    def branches(self) -> tuple[Branch, ...]:  # type: ignore[override]
        return (Branch("cond"), Branch("uncond", NEGATIVE), Branch("perturbed", PROMPT))

    def scales(self, timesteps):
        idx = [step_index(self.guidance_timesteps, float(t)) for t in timesteps]
        skip = np.zeros((len(idx), self.num_layers), np.float32)
        for n, i in enumerate(idx):
            skip[n, list(self.skip_blocks[i])] = 1.0

        def pick(values):
            return np.asarray([values[i] for i in idx], np.float32)

        return {"g": pick(self.guidance_scales), "s": pick(self.stg_scales), "phi": pick(self.rescales), "skip": skip}

    def shares_call(self, names) -> bool:
        return True  # the DiT takes the skipped layers per batch entry (:func:`stg_call_inputs`)

    def call_inputs(self, names, scales, sizes):
        return stg_call_inputs(names, scales, sizes, self.num_layers)

    def combine(self, preds, scales):
        g, s = scales["g"], scales["s"]
        out = _lin(lambda c, u, p: u + g * (c - u) + s * (c - p), preds["cond"], preds["uncond"], preds["perturbed"])
        return rescale(out, preds["cond"], scales["phi"])

    def describe(self) -> str:
        return "PerStepSTG"


def per_step_guidance(options, num_layers: int) -> PerStepSTG:
    """The dev recipe's guidance from ``options``' five per-step lists (checked by ``check_run``)."""
    o = options
    return PerStepSTG(tuple(float(v) for v in o["guidance_timesteps"]), tuple(float(v) for v in o["guidance_scales"]),
                      tuple(float(v) for v in o["stg_scales"]), tuple(float(v) for v in o["guidance_rescales"]),
                      tuple(tuple(int(b) for b in blocks) for blocks in o["stg_skip_blocks"]), num_layers)
