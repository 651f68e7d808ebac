"""``vidax bench --reference diffusers`` for CogVideoX: the same run with diffusers' CogVideoXPipeline
(text-to-video).

torch/diffusers are test-only dependencies, imported only when the reference runs; without them the hook raises a
one-line :class:`UserError`. Phases are timed as the vidax side times them: ``load_s`` (``from_pretrained`` +
move), ``encode_s`` (``encode_prompt``: T5 in fp32, vidax's policy), the steps (``callback_on_step_end`` stamps
after a device sync; the median of steps 1.. is ``per_step_s``, step 0 minus it ``compile_s``), ``decode_s``
(the pipeline's own pad drop + ``decode_latents`` + post-processing).
"""

from __future__ import annotations

from typing import Any

from vidax_core.bench.torch_reference import DiffusersReference


class CogVideoXDiffusersReference(DiffusersReference):
    family = "CogVideoX"
    scheduler = "CogVideoX DDIM"
    scheduler_options = ("scheduler_class",)

    def __call__(self) -> dict[str, Any]:
        _, diffusers, device, dtype, clock = self.start()
        run, s = self.run, self.run.sampling
        pipe = self.load(diffusers.CogVideoXPipeline)
        guided = s.guidance_scale > 1.0
        with clock.phase("encode"):
            pe, ne = pipe.encode_prompt(prompt=run.prompt, negative_prompt=run.negative_prompt if guided else None,
                                        do_classifier_free_guidance=guided,
                                        max_sequence_length=s.max_sequence_length, device=device)
        common = dict(prompt_embeds=pe.to(dtype), negative_prompt_embeds=None if ne is None else ne.to(dtype),
                      height=s.height, width=s.width, num_frames=s.num_frames, num_inference_steps=s.num_steps,
                      guidance_scale=s.guidance_scale, use_dynamic_cfg=bool(run.options.get("use_dynamic_cfg")),
                      max_sequence_length=s.max_sequence_length, generator=self.generator())
        with clock.sampling():
            latents = pipe(output_type="latent", callback_on_step_end=clock.on_step_end, **common).frames
        with clock.phase("decode"):
            f = (s.num_frames - 1) // pipe.vae_scale_factor_temporal + 1
            pad = latents.shape[1] - f
            video = pipe.decode_latents(latents[:, pad:].to(pipe.vae.dtype))
            frames = pipe.video_processor.postprocess_video(video=video, output_type="np")
        return self.metrics(latents, frames)
