"""Helios' side of ``vidax bench --reference diffusers``: ``HeliosPipeline`` (``HeliosPyramidPipeline`` for the
pyramid ids) timed phase by phase (load, ``encode_prompt``, every chunk's denoising, which the pipeline decodes chunk
by chunk inside its loop, so its decode is counted in sampling there). diffusers 0.42.1's CFG-Zero* branch calls
``.view()`` on the DiT's permuted output, which fails; the reference gets the same output made contiguous. torch
and diffusers are imported only when the reference runs."""

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
        pyramid = "pyramid_num_inference_steps_list" in dict(run.options)
        cls = diffusers.HeliosPyramidPipeline if pyramid else diffusers.HeliosPipeline
        identity_ftfy(sys.modules[cls.__module__])
        pipe = self.load(cls)
        if pyramid:
            forward = pipe.transformer.forward
            pipe.transformer.forward = lambda *a, **k: (lambda o: (o[0].contiguous(), *o[1:]))(forward(*a, **k))
        steps = {} if pyramid else {"num_inference_steps": s.num_steps}
        guided = s.guidance_scale > 1.0
        with clock.phase("encode"):
            prompt_embeds, negative_embeds = pipe.encode_prompt(
                prompt=run.prompt, negative_prompt=run.negative_prompt if guided else None,
                do_classifier_free_guidance=guided, max_sequence_length=s.max_sequence_length, device=device)
        with clock.sampling():
            frames = pipe(prompt_embeds=prompt_embeds.to(dtype),
                          negative_prompt_embeds=None if negative_embeds is None else negative_embeds.to(dtype),
                          height=s.height, width=s.width, num_frames=s.num_frames, **steps,
                          guidance_scale=s.guidance_scale, generator=self.generator(), output_type="np",
                          callback_on_step_end=clock.on_step_end, max_sequence_length=s.max_sequence_length,
                          **{k: (list(v) if isinstance(v, (list, tuple)) else v) for k, v in dict(run.options).items()}
                          ).frames
        with clock.phase("decode"):
            pass
        return self.metrics(frames[:, :0], frames, scheduler=type(pipe.scheduler).__name__)
