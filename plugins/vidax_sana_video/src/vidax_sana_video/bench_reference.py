"""``vidax bench --reference diffusers`` for SANA-Video: the same text-to-video run with ``SanaVideoPipeline``.

torch/diffusers are test-only dependencies, imported only when the reference runs. Phases are timed as the vidax
side times them: ``load_s``, ``encode_s`` (``encode_prompt`` with the run's complex human instruction),
the steps (``callback_on_step_end`` stamps), ``decode_s`` (de-normalise, ``vae.decode``, the binning resize and
post-processing, as the pipeline's tail).
"""

from __future__ import annotations

from typing import Any

from vidax_core.bench.torch_reference import DiffusersReference, decode_wan_latents


class SanaVideoDiffusersReference(DiffusersReference):
    family = "SANA-Video"
    run_dtype = ("transformer", "text_encoder")

    def __call__(self) -> dict[str, Any]:
        _, diffusers, device, dtype, clock = self.start()
        run, s = self.run, self.run.sampling
        pipe = self.load(diffusers.SanaVideoPipeline)
        binning = bool(run.options.get("use_resolution_binning", True))
        instruction = list(run.options.get("complex_human_instruction") or [])
        with clock.phase("encode"):
            embeds = pipe.encode_prompt(run.prompt, s.guidance_scale > 1.0, negative_prompt=run.negative_prompt,
                                        device=device, max_sequence_length=s.max_sequence_length,
                                        complex_human_instruction=instruction)
        pe, pm, ne, nm = embeds
        with clock.sampling():
            latents = pipe(negative_prompt=None, prompt_embeds=pe, prompt_attention_mask=pm, negative_prompt_embeds=ne,
                           negative_prompt_attention_mask=nm, height=s.height, width=s.width, frames=s.num_frames,
                           num_inference_steps=s.num_steps, guidance_scale=s.guidance_scale,
                           use_resolution_binning=binning, generator=self.generator(), output_type="latent",
                           callback_on_step_end=clock.on_step_end).frames
        with clock.phase("decode"):
            frames = decode_wan_latents(pipe, latents)
            if binning and frames.shape[2:4] != (s.height, s.width):
                import numpy as np

                from vidax_core.binning import cover_and_crop

                frames = cover_and_crop(np.asarray(frames), s.height, s.width)  # the pipeline's resize, same math
        return self.metrics(latents, frames)
