"""LTX2Pipeline's guidance: up to four passes per step, combined per stream in the clean-sample space.

Each pass's velocity ``v`` becomes ``x0 = x - sigma v``. With the conditional ``c``, negative-prompt ``u``,
spatio-temporal ``p`` (the conditional pass with the self-attentions of ``spatio_temporal_guidance_blocks`` replaced
by their values) and modality-isolated ``m`` (the conditional pass without audio<->video attention) estimates, per
stream and with that stream's scales::

    x0 = c + (g - 1) (c - u) + s (c - p) + (k - 1) (c - m)

in that order of additions, then guidance rescale of ``x0`` against ``c`` when ``phi > 0`` (std over all but the
batch axis), and back to a velocity ``(x - x0) / sigma`` for the Euler step. A pass runs only when some stream needs
it (``g > 1``, ``s > 0``, ``k > 1`` for video or audio), as in the pipeline; a stream whose scale switches its term
off still adds it with a zero factor, as the pipeline does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import jax.numpy as jnp
import numpy as np

from vidax_core.guidance import NEGATIVE, PROMPT, Branch, Guidance, rescale

from .stg import stg_call_inputs


@dataclass(frozen=True)
class StreamScales:
    """One stream's scales: classifier-free ``g``, spatio-temporal ``s``, modality ``k``, rescale ``phi``."""

    g: float
    s: float
    k: float
    phi: float


@dataclass(frozen=True)
class LTX2Guidance(Guidance):
    video: StreamScales
    audio: StreamScales
    stg_blocks: tuple[int, ...] = ()
    num_layers: int = 0

    @property
    def cfg(self) -> bool:
        return self.video.g > 1.0 or self.audio.g > 1.0

    @property
    def stg(self) -> bool:
        return self.video.s > 0.0 or self.audio.s > 0.0

    @property
    def modality(self) -> bool:
        return self.video.k > 1.0 or self.audio.k > 1.0

    @property
    def branches(self) -> tuple[Branch, ...]:  # type: ignore[override]
        out = [Branch("cond")]
        if self.cfg:
            out.append(Branch("uncond", NEGATIVE))
        if self.stg:
            out.append(Branch("perturbed", PROMPT))
        if self.modality:
            out.append(Branch("isolated", PROMPT))
        return tuple(out)

    def shares_call(self, names) -> bool:
        """Every pass shares one call: the DiT takes the perturbed layers (``stg_skip``) and the audio<->video
        switch (``cross_modal``) per batch entry, so a streamed DiT's blocks cross to the device once a step."""
        return True

    def call_inputs(self, names, scales, sizes):
        """The spatio-temporal pass's inputs (:func:`vidax_ltx.stg.stg_call_inputs`); a call with the isolated pass
        switches the cross-modal attention off for its entries alone."""
        statics, arrays = stg_call_inputs(names, scales, sizes, self.num_layers, self.stg)
        if "isolated" in names:
            for name, batch, kw in zip(names, sizes, arrays):
                kw["cross_modal"] = jnp.full((batch,), 0.0 if name == "isolated" else 1.0, jnp.float32)
        return statics, arrays

    def scales(self, timesteps):
        if not self.stg:
            return {}
        skip = np.zeros((len(timesteps), self.num_layers), np.float32)
        skip[:, list(self.stg_blocks)] = 1.0
        return {"skip": skip}

    def combine_at(self, preds: Mapping[str, Any], scales, latents: Any, sigma) -> Any:
        out = {}
        for name, sc in (("video", self.video), ("audio", self.audio)):
            x = latents[name].astype(jnp.float32)
            x0 = {b: x - sigma * p[name].astype(jnp.float32) for b, p in preds.items()}
            c = x0["cond"]
            guided = c
            if "uncond" in x0:
                guided = guided + (sc.g - 1.0) * (c - x0["uncond"])
            if "perturbed" in x0:
                guided = guided + sc.s * (c - x0["perturbed"])
            if "isolated" in x0:
                guided = guided + (sc.k - 1.0) * (c - x0["isolated"])
            if sc.phi > 0:
                guided = rescale(guided, c, jnp.float32(sc.phi))
            out[name] = (x - guided) / sigma
        return out

    def combine(self, preds, scales):
        raise NotImplementedError("LTX2Guidance needs the step's latents and sigma: the step calls combine_at")

    def describe(self) -> str:
        return "LTX2Guidance(" + ", ".join(b.name for b in self.branches) + ")"


def _or(value: Any, fallback: float) -> float:
    """The pipeline's ``audio_x = audio_x or x``: None and 0 take the video value."""
    return float(value) if value else float(fallback)


def guidance(run: Any, num_layers: int) -> LTX2Guidance:
    """The run's guidance from ``sampling.guidance_scale`` and the options, with the pipeline's audio fallbacks."""
    o = run.options
    g, s, k, phi = (float(run.sampling.guidance_scale), float(o["stg_scale"]), float(o["modality_scale"]),
                    float(o["guidance_rescale"]))
    audio = StreamScales(_or(o.get("audio_guidance_scale"), g), _or(o.get("audio_stg_scale"), s),
                         _or(o.get("audio_modality_scale"), k), _or(o.get("audio_guidance_rescale"), phi))
    blocks = tuple(int(b) for b in (o.get("spatio_temporal_guidance_blocks") or ()))
    return LTX2Guidance(StreamScales(g, s, k, phi), audio, blocks, num_layers)
