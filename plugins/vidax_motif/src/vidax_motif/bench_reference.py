"""``vidax bench --reference diffusers`` for Motif-Video: the same text-to-video run with ``MotifVideoPipeline``.

torch/diffusers are test-only dependencies, imported only when the reference runs; without them the hook raises a
one-line :class:`UserError`. The checkpoint's guider runs with ``sampling.guidance_scale`` when the run sets it.
Phases as the vidax side times them: ``load_s`` (``from_pretrained`` + move), ``encode_s`` (``encode_prompt`` of
the prompt and the negative prompt), the steps (``callback_on_step_end`` stamps), ``decode_s`` (de-normalise,
``vae.decode``, post-processing).
"""

from __future__ import annotations

from typing import Any

from vidax_core.bench.torch_reference import DiffusersReference, decode_wan_latents


class MotifDiffusersReference(DiffusersReference):
    family = "Motif-Video"
    run_dtype = ("transformer", "text_encoder")

    def configure(self, pipe: Any) -> None:
        g = self.run.sampling.guidance_scale
        if g is not None:
            pipe.guider = pipe.guider.new(guidance_scale=float(g))

    def __call__(self) -> dict[str, Any]:
        _, diffusers, device, dtype, clock = self.start()
        run, s = self.run, self.run.sampling
        pipe = self.load(diffusers.MotifVideoPipeline)
        with clock.phase("encode"):
            pe, ne, pm, nm = pipe.encode_prompt(prompt=run.prompt, negative_prompt=run.negative_prompt or "",
                                                max_sequence_length=s.max_sequence_length, device=device)
        with clock.sampling():
            latents = pipe(prompt_embeds=pe, prompt_attention_mask=pm, negative_prompt_embeds=ne,
                           negative_prompt_attention_mask=nm, height=s.height, width=s.width,
                           num_frames=s.num_frames, num_inference_steps=s.num_steps,
                           max_sequence_length=s.max_sequence_length, generator=self.generator(),
                           output_type="latent", callback_on_step_end=clock.on_step_end).frames
        with clock.phase("decode"):
            frames = decode_wan_latents(pipe, latents)
        return self.metrics(latents, frames)
