"""``vidax bench --reference diffusers`` for Cosmos-Predict2.5: the same run with ``Cosmos2_5_PredictBasePipeline``.

torch/diffusers are test-only dependencies, imported only when the reference runs; without them the hook raises a
one-line :class:`UserError`. The pipeline's guardrail (``cosmos_guardrail``) is replaced by a pass-through object
and, when torchvision is missing, its two calls are given to the diffusers modules (:func:`stub_torchvision`).
Phases are timed as the vidax side times them: ``load_s`` (``from_pretrained`` + move), ``encode_s``
(``encode_prompt``), the steps (``callback_on_step_end`` stamps after a device sync; the median of steps 1.. is
``per_step_s``, step 0 minus it ``compile_s``), ``decode_s`` (un-normalise + ``vae.decode`` + post-processing).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from vidax_core.errors import UserError


def _torch_diffusers():
    try:
        import diffusers
        import torch
    except ImportError as exc:
        raise UserError("--reference diffusers needs the test extra: pip install 'vidax-core[test]'") from exc
    return torch, diffusers


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
    transforms = types.SimpleNamespace(functional=functional, InterpolationMode=types.SimpleNamespace(NEAREST="nearest"))
    transformer_cosmos.transforms = transforms
    pipeline_cosmos2_5_predict.torchvision = types.SimpleNamespace(transforms=transforms)


class CosmosDiffusersReference:
    engine = "diffusers"

    def __init__(self, ckpt_dir: str, run: Any) -> None:
        _torch_diffusers()
        if run.image is not None or run.video is not None:
            raise UserError("--reference diffusers: the Cosmos reference times text-to-world runs only; remove "
                            "`image`/`video`")
        if run.sampling.scheduler is not None:
            raise UserError("--reference diffusers: leave sampling.scheduler unset (the checkpoint's UniPC)")
        self.ckpt_dir, self.run = ckpt_dir, run

    def __call__(self) -> dict[str, Any]:
        torch, _ = _torch_diffusers()
        from diffusers.pipelines.cosmos.pipeline_cosmos2_5_predict import Cosmos2_5_PredictBasePipeline

        from vidax_core.runner.pipeline import peak_rss_mb

        stub_torchvision()
        run, s = self.run, self.run.sampling
        device = "cuda" if torch.cuda.is_available() else "cpu"
        cuda = device == "cuda"
        dtype = getattr(torch, run.model.dtype or "float32")
        sync = torch.cuda.synchronize if cuda else (lambda: None)
        start = time.perf_counter()
        pipe = Cosmos2_5_PredictBasePipeline.from_pretrained(
            self.ckpt_dir, safety_checker=NoGuardrail(), torch_dtype={"transformer": dtype, "default": torch.float32})
        pipe.to(device)
        pipe.set_progress_bar_config(disable=True)
        sync()
        load_s = time.perf_counter() - start
        guided = s.guidance_scale > 1.0
        t0 = time.perf_counter()
        with torch.no_grad():
            pe, ne = pipe.encode_prompt(prompt=run.prompt, negative_prompt=run.negative_prompt if guided else None,
                                        do_classifier_free_guidance=guided, max_sequence_length=s.max_sequence_length,
                                        device=device)
        sync()
        encode_s = time.perf_counter() - t0
        stamps: list[float] = []

        def on_step_end(_pipe, i, t, kwargs):
            sync()
            stamps.append(time.perf_counter())
            return kwargs

        t_call = time.perf_counter()
        with torch.no_grad():
            latents = pipe(prompt_embeds=pe.to(dtype), negative_prompt_embeds=None if ne is None else ne.to(dtype),
                           height=s.height, width=s.width, num_frames=s.num_frames, num_inference_steps=s.num_steps,
                           guidance_scale=s.guidance_scale, max_sequence_length=s.max_sequence_length,
                           generator=torch.Generator(device="cpu").manual_seed(s.seed), output_type="latent",
                           callback_on_step_end=on_step_end).frames
        sync()
        sampling_s = time.perf_counter() - t_call
        edges = [t_call, *stamps]
        step_times = [b - a for a, b in zip(edges[:-1], edges[1:])]
        t0 = time.perf_counter()
        with torch.no_grad():
            z = latents.to(pipe.vae.dtype)
            z = z / pipe.latents_std.to(z.device, z.dtype) + pipe.latents_mean.to(z.device, z.dtype)
            video = pipe.vae.decode(z, return_dict=False)[0]
            frames = pipe.video_processor.postprocess_video(video, output_type="np")
        sync()
        decode_s = time.perf_counter() - t0
        per_step = float(np.median(step_times[1:])) if len(step_times) > 1 else step_times[0]
        return {
            "engine": "diffusers", "load_s": load_s, "encode_s": encode_s,
            "compile_s": max(step_times[0] - per_step, 0.0) if len(step_times) > 1 else 0.0,
            "sampling_s": sampling_s, "per_step_s": per_step, "step_times_s": step_times,
            "num_steps": len(step_times), "decode_s": decode_s, "total_s": time.perf_counter() - start,
            "peak_rss_mb": peak_rss_mb(), "device_peak_bytes": int(torch.cuda.max_memory_allocated()) if cuda else None,
            "latent_shape": list(latents.shape), "frames_shape": list(np.shape(frames)), "backend": device,
            "dtype": str(dtype).replace("torch.", ""), "torch": torch.__version__,
        }
