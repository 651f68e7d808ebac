"""``vidax bench --reference diffusers`` for Kandinsky 5: the same text-to-video run with ``Kandinsky5T2VPipeline``.

torch/diffusers are test-only dependencies, imported only when the reference runs; without them the hook raises a
one-line :class:`UserError`. Phases are timed as the vidax side times them: ``load_s`` (``from_pretrained`` +
move), ``encode_s`` (``encode_prompt`` of the prompt and, with guidance, the negative prompt), the steps
(``callback_on_step_end`` stamps after a device sync; the median of steps 1.. is ``per_step_s``, step 0 minus it
``compile_s``), ``decode_s`` (un-scale, channel-first, ``vae.decode``, post-processing).
"""

from __future__ import annotations

from typing import Any

from vidax_core.bench.torch_reference import DiffusersReference


class KandinskyDiffusersReference(DiffusersReference):
    family = "Kandinsky 5"
    scheduler = "flow Euler"
    run_dtype = ("transformer", "text_encoder")

    def __call__(self) -> dict[str, Any]:
        _, diffusers, device, dtype, clock = self.start()
        run, s = self.run, self.run.sampling
        pipe = self.load(diffusers.Kandinsky5T2VPipeline)
        guided = s.guidance_scale > 1.0
        with clock.phase("encode"):
            pq, pc, pl = pipe.encode_prompt(prompt=run.prompt, max_sequence_length=s.max_sequence_length,
                                            device=device, dtype=dtype)
            neg = (pipe.encode_prompt(prompt=run.negative_prompt, max_sequence_length=s.max_sequence_length,
                                      device=device, dtype=dtype) if guided else (None, None, None))
        with clock.sampling():
            latents = pipe(prompt_embeds_qwen=pq, prompt_embeds_clip=pc, prompt_cu_seqlens=pl,
                           negative_prompt_embeds_qwen=neg[0], negative_prompt_embeds_clip=neg[1],
                           negative_prompt_cu_seqlens=neg[2], height=s.height, width=s.width,
                           num_frames=s.num_frames, num_inference_steps=s.num_steps, guidance_scale=s.guidance_scale,
                           max_sequence_length=s.max_sequence_length, generator=self.generator(),
                           output_type="latent", callback_on_step_end=clock.on_step_end).frames
        with clock.phase("decode"):
            z = latents.to(pipe.vae.dtype).permute(0, 4, 1, 2, 3) / pipe.vae.config.scaling_factor
            video = pipe.vae.decode(z, return_dict=False)[0]
            frames = pipe.video_processor.postprocess_video(video, output_type="np")
        return self.metrics(latents, frames)
