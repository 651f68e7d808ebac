"""``vidax bench --reference diffusers`` for Cosmos-Predict2.5: the same run with ``Cosmos2_5_PredictBasePipeline``.

torch/diffusers are test-only dependencies, imported only when the reference runs; without them the hook raises a
one-line :class:`UserError`. The pipeline's guardrail (``cosmos_guardrail``) is replaced by a pass-through object
and, when torchvision is missing, its two calls are given to the diffusers modules (:func:`stub_torchvision`).
Phases are timed as the vidax side times them: ``load_s`` (``from_pretrained`` + move), ``encode_s``
(``encode_prompt``), the steps (``callback_on_step_end`` stamps after a device sync; the median of steps 1.. is
``per_step_s``, step 0 minus it ``compile_s``), ``decode_s`` (un-normalise + ``vae.decode`` + post-processing).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vidax_core.bench.torch_reference import DiffusersReference


class NoGuardrail:
    """Stands in for ``CosmosSafetyChecker``: every text and video passes unchanged."""

    def to(self, *args, **kwargs):
        return self

    def check_text_safety(self, text):
        return True

    def check_video_safety(self, video):
        return video


def stub_torchvision() -> None:
    """Give diffusers' Cosmos modules the two torchvision functions they call when torchvision is not installed:
    the transformer's nearest ``resize`` of the padding mask and the pipeline's ``to_tensor`` of the image
    (torchvision's tensor path is ``interpolate(mode="nearest")``; ``to_tensor`` is HWC uint8 -> CHW / 255)."""
    import types

    import torch
    from diffusers.models.transformers import transformer_cosmos
    from diffusers.pipelines.cosmos import pipeline_cosmos2_5_predict

    if hasattr(transformer_cosmos, "transforms") and hasattr(pipeline_cosmos2_5_predict, "torchvision"):
        return

    def resize(x, size, interpolation=None):
        return torch.nn.functional.interpolate(x, size=list(size), mode="nearest")

    def to_tensor(image):
        a = np.asarray(image.convert("RGB") if hasattr(image, "convert") else image)
        return torch.from_numpy(np.ascontiguousarray(a.transpose(2, 0, 1))).float() / 255.0

    functional = types.SimpleNamespace(resize=resize, to_tensor=to_tensor)
    transforms = types.SimpleNamespace(functional=functional,
                                       InterpolationMode=types.SimpleNamespace(NEAREST="nearest"))
    transformer_cosmos.transforms = transforms
    pipeline_cosmos2_5_predict.torchvision = types.SimpleNamespace(transforms=transforms)


class CosmosDiffusersReference(DiffusersReference):
    family = "Cosmos"
    text_only = "text-to-world"
    refused_inputs = ("image", "video")
    remove = "`image`/`video`"
    scheduler = "UniPC"

    def __call__(self) -> dict[str, Any]:
        from diffusers.pipelines.cosmos.pipeline_cosmos2_5_predict import Cosmos2_5_PredictBasePipeline

        stub_torchvision()
        _, _, device, dtype, clock = self.start()
        run, s = self.run, self.run.sampling
        pipe = self.load(Cosmos2_5_PredictBasePipeline, safety_checker=NoGuardrail())
        guided = s.guidance_scale > 1.0
        with clock.phase("encode"):
            pe, ne = pipe.encode_prompt(prompt=run.prompt, negative_prompt=run.negative_prompt if guided else None,
                                        do_classifier_free_guidance=guided, max_sequence_length=s.max_sequence_length,
                                        device=device)
        with clock.sampling():
            latents = pipe(prompt_embeds=pe.to(dtype), negative_prompt_embeds=None if ne is None else ne.to(dtype),
                           height=s.height, width=s.width, num_frames=s.num_frames, num_inference_steps=s.num_steps,
                           guidance_scale=s.guidance_scale, max_sequence_length=s.max_sequence_length,
                           generator=self.generator(), output_type="latent",
                           callback_on_step_end=clock.on_step_end).frames
        with clock.phase("decode"):
            z = latents.to(pipe.vae.dtype)
            z = z / pipe.latents_std.to(z.device, z.dtype) + pipe.latents_mean.to(z.device, z.dtype)
            video = pipe.vae.decode(z, return_dict=False)[0]
            frames = pipe.video_processor.postprocess_video(video, output_type="np")
        return self.metrics(latents, frames)
