"""``vidax bench --reference diffusers`` for the Cosmos3 ids: the same run with ``Cosmos3OmniPipeline`` (guardrail
off).

torch/diffusers are test-only dependencies, imported only when the reference runs; without them the hook raises a
one-line :class:`UserError`. Phases are timed as the vidax side times them: ``load_s`` (``from_pretrained`` +
move), ``encode_s`` (``tokenize_prompt``: the pipeline has no text encoder), the steps (``callback_on_step_end``
stamps after a device sync), ``decode_s`` (un-normalise + ``vae.decode`` + post-processing).
"""

from __future__ import annotations

from typing import Any

from vidax_core.bench.torch_reference import DiffusersReference


class Cosmos3DiffusersReference(DiffusersReference):
    family = "Cosmos3"
    refused_inputs = ("image", "video")
    scheduler = "UniPC"

    def __call__(self) -> dict[str, Any]:
        from diffusers import Cosmos3OmniPipeline

        *_, clock = self.start()
        run, s, o = self.run, self.run.sampling, self.run.options
        pipe = self.load(Cosmos3OmniPipeline, enable_safety_checker=False)
        options = dict(fps=float(o.get("fps", 24.0)), use_system_prompt=o.get("use_system_prompt"),
                       add_resolution_template=bool(o.get("add_resolution_template", True)),
                       add_duration_template=bool(o.get("add_duration_template", True)))
        with clock.phase("encode"):
            pipe.tokenize_prompt(run.prompt, run.negative_prompt, num_frames=s.num_frames, height=s.height,
                                 width=s.width, **options)
        with clock.sampling():
            latents = pipe(prompt=run.prompt, negative_prompt=run.negative_prompt, height=s.height, width=s.width,
                           num_frames=s.num_frames, num_inference_steps=s.num_steps, guidance_scale=s.guidance_scale,
                           generator=self.generator(), output_type="latent",
                           enable_safety_check=False, callback_on_step_end=clock.on_step_end, **options).video
        with clock.phase("decode"):
            z = latents.to(pipe.vae.dtype)
            mean = pipe._vae_latents_mean.to(z.device, z.dtype).view(1, -1, 1, 1, 1)
            inv_std = pipe._vae_latents_inv_std.to(z.device, z.dtype).view(1, -1, 1, 1, 1)
            video = pipe.vae.decode(z / inv_std + mean, return_dict=False)[0]
            frames = pipe.video_processor.postprocess_video(video, output_type="np")
        return self.metrics(latents, frames)
