"""``vidax bench --reference diffusers`` for Kandinsky 6: the same text-to-video-with-audio run with
``Kandinsky6TI2VAPipeline``.

torch/diffusers are test-only dependencies, imported only when the reference runs; without them the hook raises a
one-line :class:`UserError`. Phases are timed as the vidax side times them (``TorchClock``): ``load_s``
(``from_pretrained`` + move), ``encode_s`` (``encode_prompt`` of the prompt and, with guidance, the negative one),
the steps, ``decode_s`` (the video VAE, and the audio VAE and vocoder when the run makes sound).
"""

from __future__ import annotations

from typing import Any

from vidax_core.bench.torch_reference import DiffusersReference


class Kandinsky6DiffusersReference(DiffusersReference):
    family = "Kandinsky 6"
    scheduler = "the checkpoint's (flow Euler or PiFlow)"
    run_dtype = ("transformer", "text_encoder")

    def __call__(self) -> dict[str, Any]:
        _, diffusers, device, dtype, clock = self.start()
        run, s, o = self.run, self.run.sampling, self.run.options
        pipe = self.load(diffusers.Kandinsky6TI2VAPipeline)
        sound = bool(o.get("sample_audio", True))
        with clock.phase("encode"):
            pe, pp, pm, ne, np_, nm = pipe.encode_prompt(
                prompt=run.prompt, negative_prompt=run.negative_prompt or None,
                do_classifier_free_guidance=s.guidance_scale > 1.0, max_sequence_length=s.max_sequence_length,
                device=device, dtype=dtype)
            # the call takes no masks: a padded prompt goes in cut to its tokens (the same computation, as vidax)
            pe = pe if pm is None else pe[:, :int(pm.sum())]
            ne = ne if nm is None else ne[:, :int(nm.sum())]
        with clock.sampling():
            out = pipe(prompt_embeds=pe, pooled_prompt_embeds=pp, negative_prompt_embeds=ne,
                       negative_pooled_prompt_embeds=np_, height=s.height, width=s.width, num_frames=s.num_frames,
                       frame_rate=float(o.get("frame_rate", 24.0)), num_inference_steps=s.num_steps,
                       guidance_scale=s.guidance_scale, sample_audio=sound, generator=self.generator(),
                       output_type="latent", callback_on_step_end=clock.on_step_end)
        with clock.phase("decode"):
            z = out.frames.to(pipe.vae.dtype) / pipe.vae.config.scaling_factor
            frames = pipe.video_processor.postprocess_video(pipe.vae.decode(z, return_dict=False)[0],
                                                            output_type="np")
            shape = None
            if sound:
                mel = pipe.audio_vae.decode(out.audio.to(pipe.audio_vae.dtype) / pipe.audio_vae.config.scaling_factor,
                                            return_dict=False)[0]
                shape = list(pipe.vocoder(mel, return_dict=False)[0].shape)
        return self.metrics(out.frames, frames, **({"audio_shape": shape} if shape else {}))
