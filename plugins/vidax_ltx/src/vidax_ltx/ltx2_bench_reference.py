"""``vidax bench --reference diffusers`` for LTX-2.x: the same text-to-video-with-audio run with ``LTX2Pipeline``
(every option under its call argument's name; the dev ids' dynamic shift and ``shift_terminal`` set on its
scheduler as vidax sets them).

torch/diffusers are test-only dependencies, imported only when the reference runs; without them the hook raises a
one-line :class:`UserError`. Phases are timed as the vidax side times them (``TorchClock``): ``load_s``
(``from_pretrained`` + move), ``encode_s`` (``encode_prompt``; the connectors run inside the call, as in the
pipeline), the steps, ``decode_s`` (the video VAE, the audio VAE and the vocoder on the pipeline's denormalised
latents).
"""

from __future__ import annotations

from typing import Any

from vidax_core.bench.torch_reference import DiffusersReference

from . import ltx2_presets


class LTX2DiffusersReference(DiffusersReference):
    family = "LTX-2"
    scheduler = "flow Euler"

    def _call_arguments(self) -> dict[str, Any]:
        s, o = self.run.sampling, self.run.options
        names = ("frame_rate", "motion_speed", "guidance_rescale", "stg_scale", "modality_scale",
                 "audio_guidance_scale", "audio_stg_scale", "audio_modality_scale", "audio_guidance_rescale",
                 "spatio_temporal_guidance_blocks", "noise_scale", "use_cross_timestep")
        args = {k: o[k] for k in names}
        args.update(height=s.height, width=s.width, num_frames=s.num_frames, num_inference_steps=s.num_steps,
                    guidance_scale=s.guidance_scale, max_sequence_length=s.max_sequence_length)
        if o.get("sigmas"):
            args["sigmas"] = [float(v) for v in o["sigmas"]]
        return args

    def configure(self, pipe: Any) -> None:
        if self.run.model.id in ltx2_presets.DEV_IDS:
            from diffusers import FlowMatchEulerDiscreteScheduler

            pipe.scheduler = FlowMatchEulerDiscreteScheduler.from_config(pipe.scheduler.config,
                                                                         **ltx2_presets.DEV_SCHEDULER)

    def __call__(self) -> dict[str, Any]:
        torch, diffusers, device, _, clock = self.start()
        run, s, o = self.run, self.run.sampling, self.run.options
        pipe = self.load(diffusers.LTX2Pipeline)
        args = self._call_arguments()
        guided = args["guidance_scale"] > 1.0 or (args["audio_guidance_scale"] or args["guidance_scale"]) > 1.0
        with clock.phase("encode"):
            pe, pm, ne, nm = pipe.encode_prompt(prompt=run.prompt, negative_prompt=run.negative_prompt or "",
                                                do_classifier_free_guidance=guided,
                                                max_sequence_length=s.max_sequence_length, device=device)
        with clock.sampling():
            out = pipe(prompt_embeds=pe, prompt_attention_mask=pm, negative_prompt_embeds=ne,
                       negative_prompt_attention_mask=nm, output_type="latent", generator=self.generator(),
                       callback_on_step_end=clock.on_step_end, **args)
        with clock.phase("decode"):
            z = out.frames.to(pipe.vae.dtype)
            t = torch.tensor([float(o.get("decode_timestep") or 0.0)], device=z.device) \
                if pipe.vae.config.timestep_conditioning else None
            video = pipe.vae.decode(z, t, return_dict=False)[0]
            frames = pipe.video_processor.postprocess_video(video, output_type="np")
            wave = pipe.vocoder(pipe.audio_vae.decode(out.audio.to(pipe.audio_vae.dtype), return_dict=False)[0])
        return self.metrics(out.frames, frames, audio_shape=list(wave.shape))
