"""``vidax bench --reference diffusers`` for HunyuanVideo: the same text-to-video run with ``HunyuanVideoPipeline``.

torch/diffusers are test-only dependencies, imported only when the reference runs; without them the hook raises a
one-line :class:`UserError`. Phases are timed as the vidax side times them: ``load_s`` (``from_pretrained`` +
move), ``encode_s`` (``encode_prompt``, twice with true CFG), the steps (``callback_on_step_end`` stamps after a
device sync; the median of steps 1.. is ``per_step_s``, step 0 minus it ``compile_s``), ``decode_s`` (un-scale,
``vae.decode`` with diffusers' default tiling settings, post-processing).
"""

from __future__ import annotations

from typing import Any

from vidax_core.bench.torch_reference import DiffusersReference
from vidax_core.errors import UserError


class HunyuanDiffusersReference(DiffusersReference):
    text_only = None
    scheduler = "flow Euler"
    run_dtype = ("transformer", "text_encoder")

    def refuse(self, run: Any) -> None:
        super().refuse(run)
        if run.options.get("prompt_template") is not None or run.options.get("crop_start") is not None:
            raise UserError("--reference diffusers: leave options.prompt_template and options.crop_start unset")

    def decode(self, pipe: Any, latents: Any) -> dict[str, Any]:
        """The pipeline's decode of its final latents (un-scaled, ``vae.decode``, post-processed), timed as
        ``decode``, and the run's metrics row (1.0's and 1.5's pipelines decode the same way)."""
        with self.clock.phase("decode"):
            z = latents.to(pipe.vae.dtype) / pipe.vae.config.scaling_factor
            video = pipe.vae.decode(z, return_dict=False)[0]
            frames = pipe.video_processor.postprocess_video(video, output_type="np")
        return self.metrics(latents, frames)

    def __call__(self) -> dict[str, Any]:
        _, diffusers, device, _, clock = self.start()
        run, s = self.run, self.run.sampling
        true_cfg = float(run.options.get("true_cfg_scale") or 1.0)
        pipe = self.load(diffusers.HunyuanVideoPipeline)
        with clock.phase("encode"):
            pe, pp, pm = pipe.encode_prompt(prompt=run.prompt, device=device, max_sequence_length=s.max_sequence_length)
            neg = None
            if true_cfg > 1.0:
                neg = pipe.encode_prompt(prompt=run.negative_prompt, device=device,
                                         max_sequence_length=s.max_sequence_length)
        common = dict(prompt_embeds=pe, pooled_prompt_embeds=pp, prompt_attention_mask=pm, height=s.height,
                      width=s.width, num_frames=s.num_frames, num_inference_steps=s.num_steps,
                      guidance_scale=s.guidance_scale, true_cfg_scale=true_cfg,
                      max_sequence_length=s.max_sequence_length, generator=self.generator())
        if neg is not None:
            common.update(negative_prompt_embeds=neg[0], negative_pooled_prompt_embeds=neg[1],
                          negative_prompt_attention_mask=neg[2])
        with clock.sampling():
            latents = pipe(output_type="latent", callback_on_step_end=clock.on_step_end, **common).frames
        return self.decode(pipe, latents)
