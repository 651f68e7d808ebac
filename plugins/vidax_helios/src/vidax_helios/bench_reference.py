"""Helios' side of ``vidax bench --reference diffusers``: ``HeliosPipeline`` timed phase by phase (load,
``encode_prompt``, every chunk's denoising with ``output_type="latent"``, which the pipeline decodes chunk by chunk
inside its loop, so its decode is counted in sampling there). torch and diffusers are imported only when the
reference runs."""

from __future__ import annotations

import sys
from typing import Any

from vidax_core.bench.torch_reference import DiffusersReference, identity_ftfy


class HeliosDiffusersReference(DiffusersReference):
    """Runs the run config with diffusers' ``HeliosPipeline`` from ``ckpt_dir`` and returns its metrics."""

    family = "Helios"
    scheduler = "HeliosScheduler"

    def __call__(self) -> dict[str, Any]:
        _, diffusers, device, dtype, clock = self.start()
        run, s = self.run, self.run.sampling
        identity_ftfy(sys.modules[diffusers.HeliosPipeline.__module__])
        pipe = self.load(diffusers.HeliosPipeline)
        guided = s.guidance_scale > 1.0
        with clock.phase("encode"):
            prompt_embeds, negative_embeds = pipe.encode_prompt(
                prompt=run.prompt, negative_prompt=run.negative_prompt if guided else None,
                do_classifier_free_guidance=guided, max_sequence_length=s.max_sequence_length, device=device)
        with clock.sampling():
            frames = pipe(prompt_embeds=prompt_embeds.to(dtype),
                          negative_prompt_embeds=None if negative_embeds is None else negative_embeds.to(dtype),
                          height=s.height, width=s.width, num_frames=s.num_frames, num_inference_steps=s.num_steps,
                          guidance_scale=s.guidance_scale, generator=self.generator(), output_type="np",
                          callback_on_step_end=clock.on_step_end, max_sequence_length=s.max_sequence_length,
                          **{k: (list(v) if isinstance(v, (list, tuple)) else v) for k, v in dict(run.options).items()}
                          ).frames
        with clock.phase("decode"):
            pass
        return self.metrics(frames[:, :0], frames, scheduler=type(pipe.scheduler).__name__)
