"""``vidax bench --reference diffusers`` for LTX-Video: the same one-pass text-to-video run with the diffusers
pipeline of its semantics, LTXConditionPipeline (``options.pipeline: condition``) or LTXPipeline (``ltx``). The
multi-scale recipe has no one-pipeline reference, so the bench times a single pass (``options.multiscale=false``).

torch/diffusers are test-only dependencies, imported only when the reference runs; without them the hook raises a
one-line :class:`UserError`. Phases are timed as the vidax side times them: ``load_s`` (``from_pretrained`` +
move), ``encode_s`` (``encode_prompt``), the steps (``callback_on_step_end`` stamps after a device sync; the median
of steps 1.. is ``per_step_s``, step 0 minus it ``compile_s``), ``decode_s`` (the pipeline's own un-normalise +
timestep-conditioned ``vae.decode`` + post-processing, with the run's ``options``).
"""

from __future__ import annotations

from typing import Any

from vidax_core.bench.torch_reference import DiffusersReference
from vidax_core.errors import UserError


class LTXDiffusersReference(DiffusersReference):
    family = "LTX"
    scheduler = "flow Euler"

    def refuse(self, run: Any) -> None:
        super().refuse(run)
        if run.options.get("multiscale"):
            raise UserError("--reference diffusers times one pass: add options.multiscale=false (the multi-scale "
                            "recipe chains three diffusers calls)")

    def __call__(self) -> dict[str, Any]:
        torch, diffusers, device, dtype, clock = self.start()
        run, s, o = self.run, self.run.sampling, self.run.options
        condition = o.get("pipeline", "condition") == "condition"
        pipe = self.load(diffusers.LTXConditionPipeline if condition else diffusers.LTXPipeline)
        guided = s.guidance_scale > 1.0
        with clock.phase("encode"):
            pe, pm, ne, nm = pipe.encode_prompt(prompt=run.prompt,
                                                negative_prompt=run.negative_prompt if guided else None,
                                                do_classifier_free_guidance=guided,
                                                max_sequence_length=s.max_sequence_length, device=device)
        common = dict(prompt_embeds=pe.to(dtype), prompt_attention_mask=pm,
                      negative_prompt_embeds=None if ne is None else ne.to(dtype), negative_prompt_attention_mask=nm,
                      height=s.height, width=s.width, num_frames=s.num_frames, num_inference_steps=s.num_steps,
                      guidance_scale=s.guidance_scale, guidance_rescale=float(o.get("guidance_rescale") or 0.0),
                      frame_rate=int(round(float(o.get("frame_rate") or 25))),
                      max_sequence_length=s.max_sequence_length, generator=self.generator())
        if condition:  # LTXPipeline computes its own sigmas and takes no timestep list
            common.update(image_cond_noise_scale=0.0)
            if o.get("timesteps"):
                common.update(timesteps=[float(t) for t in o["timesteps"]], num_inference_steps=len(o["timesteps"]))
        with clock.sampling():
            latents = pipe(output_type="latent", callback_on_step_end=clock.on_step_end, **common).frames
        with clock.phase("decode"):
            vae = pipe.vae
            grid = ((s.num_frames - 1) // pipe.vae_temporal_compression_ratio + 1,
                    s.height // pipe.vae_spatial_compression_ratio, s.width // pipe.vae_spatial_compression_ratio)
            z = latents if condition else pipe._unpack_latents(latents, *grid, pipe.transformer_spatial_patch_size,
                                                               pipe.transformer_temporal_patch_size)
            z = pipe._denormalize_latents(z, vae.latents_mean, vae.latents_std, vae.config.scaling_factor)
            t = torch.tensor([float(o.get("decode_timestep") or 0.0)], device=z.device) \
                if vae.config.timestep_conditioning else None
            video = vae.decode(z.to(vae.dtype), t, return_dict=False)[0]
            frames = pipe.video_processor.postprocess_video(video, output_type="np")
        return self.metrics(latents, frames)
