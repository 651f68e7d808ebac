"""SkyReels-V2's side of ``vidax bench --reference diffusers``: the diffusers pipelines timed phase by phase.

The text-to-video id runs ``SkyReelsV2Pipeline``, the diffusion-forcing ids ``SkyReelsV2DiffusionForcingPipeline``
with the run's options (``fps`` is ``output.fps``): load, ``encode_prompt``, the denoising call with
``output_type="latent"`` (every window of a long video), and the pipeline's decode of the joined latents.
torch and diffusers are imported only when the reference runs.
"""

from __future__ import annotations

import sys
from typing import Any

from vidax_core.bench.torch_reference import (DiffusersReference, decode_wan_latents, identity_ftfy,
                                              wan_prompt_embeds)

from .presets import DIFFUSION_FORCING


class SkyReelsDiffusersReference(DiffusersReference):
    """Runs the run config with the id's diffusers pipeline from ``ckpt_dir`` and returns its metrics."""

    family = "SkyReels-V2"
    scheduler = "scheduler config"

    def __call__(self) -> dict[str, Any]:
        _, diffusers, device, dtype, clock = self.start()
        run, s = self.run, self.run.sampling
        forcing = run.model.id in DIFFUSION_FORCING
        cls = diffusers.SkyReelsV2DiffusionForcingPipeline if forcing else diffusers.SkyReelsV2Pipeline
        identity_ftfy(sys.modules[cls.__module__])
        pipe = self.load(cls)
        kwargs = dict(
            **wan_prompt_embeds(pipe, run, device, dtype, clock),
            height=s.height, width=s.width, num_frames=s.num_frames, num_inference_steps=s.num_steps,
            guidance_scale=s.guidance_scale, generator=self.generator(), output_type="latent",
            callback_on_step_end=clock.on_step_end, max_sequence_length=s.max_sequence_length)
        if forcing:
            kwargs.update(dict(run.options), fps=int(run.output.fps), prompt=None)
        with clock.sampling():
            latents = pipe(**kwargs).frames
        with clock.phase("decode"):
            frames = decode_wan_latents(pipe, latents)
        return self.metrics(latents, frames, scheduler=type(pipe.scheduler).__name__)
