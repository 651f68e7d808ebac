"""The diffusers side of ``vidax bench --reference diffusers``: the same checkpoint, dtype, shapes, steps and guidance
run by the PyTorch pipeline users would otherwise run, timed phase by phase like :func:`vidax_core.runner.pipeline.run`.

torch and diffusers are optional, test-only dependencies: they are imported here, lazily, and their absence is a
one-line :class:`~vidax_core.errors.UserError`.

Timing method (mirrors the vidax side):

* ``load_s``: ``WanPipeline.from_pretrained`` + move to the device;
* ``encode_s``: ``pipe.encode_prompt`` (prompt and negative prompt), outside the denoising call;
* steps: the pipeline is called with the prompt embeddings and ``output_type="latent"``; ``callback_on_step_end``
  stamps the end of every step (after a device synchronise), step 0 starts when the call starts. ``per_step_s``
  is the median of steps 1.. (the first step is warm-up, as the compiling step is for vidax); ``compile_s`` is
  step 0 minus that median (torch's first-call overhead: kernel selection, allocator growth);
* ``decode_s``: the pipeline's own decode (de-normalise, ``vae.decode``, ``postprocess_video``), timed separately;
* ``peak_rss_mb``: the process's peak RSS; device bytes: ``torch.cuda.max_memory_allocated`` on CUDA, else n/a.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np

from vidax_core.errors import UserError

MISSING = "--reference diffusers needs the test extra: pip install 'vidax-core[test]'"

_TORCH_DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16", None: "float32"}


def _imports():
    try:
        import torch
        from diffusers import WanPipeline
    except ImportError as exc:
        raise UserError(MISSING) from exc
    return torch, WanPipeline


def reference_scheduler(pipe, choice: Any):
    """The diffusers scheduler matching ``sampling.scheduler`` (None keeps the checkpoint's own)."""
    if choice is None:
        return pipe.scheduler
    from diffusers import FlowMatchEulerDiscreteScheduler, UniPCMultistepScheduler

    if isinstance(choice, str):
        name, opts = choice, {}
    else:
        opts = dict(choice)
        name = opts.pop("name", None)
    shift = opts.get("flow_shift", opts.get("shift"))
    if name == "unipc":
        kw = {"flow_shift": shift} if shift is not None else {}
        return UniPCMultistepScheduler.from_config(pipe.scheduler.config, **kw)
    if name in ("flow_euler", "euler"):
        kw = {"shift": shift} if shift is not None else {}
        return FlowMatchEulerDiscreteScheduler.from_config(pipe.scheduler.config, **kw)
    raise UserError(f"--reference diffusers: no diffusers scheduler mapped for sampling.scheduler={name!r}; "
                    "leave sampling.scheduler unset to use the checkpoint's scheduler")


def run_reference(cfg, ckpt_dir: str, device: str | None = None) -> dict[str, Any]:
    """Run ``cfg`` (a validated :class:`~vidax_core.config.RunConfig`) with diffusers from ``ckpt_dir``.

    Returns metrics with the same keys as the vidax side.
    """
    torch, WanPipeline = _imports()
    from vidax_core.runner.pipeline import peak_rss_mb

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    cuda = device.startswith("cuda")
    dtype = getattr(torch, _TORCH_DTYPES[cfg.model.dtype])
    s = cfg.sampling

    def sync():
        if cuda:
            torch.cuda.synchronize()

    if cuda:
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    # Only the DiT takes model.dtype in vidax; the text encoder and the VAE stay float32 there, so here too.
    with warnings.catch_warnings():  # newer diffusers prefer dtype=; torch_dtype= works on every supported release
        warnings.simplefilter("ignore", FutureWarning)
        pipe = WanPipeline.from_pretrained(ckpt_dir, torch_dtype={"transformer": dtype, "default": torch.float32})
    pipe.scheduler = reference_scheduler(pipe, s.scheduler)
    pipe.to(device)
    pipe.set_progress_bar_config(disable=True)
    sync()
    load_s = time.perf_counter() - start

    guided = s.guidance_scale > 1.0
    t0 = time.perf_counter()
    with torch.no_grad():
        prompt_embeds, negative_embeds = pipe.encode_prompt(
            prompt=cfg.prompt, negative_prompt=cfg.negative_prompt if guided else None,
            do_classifier_free_guidance=guided, max_sequence_length=s.max_sequence_length, device=device,
        )
    sync()
    encode_s = time.perf_counter() - t0

    stamps: list[float] = []

    def on_step_end(_pipe, i, t, kwargs):
        sync()
        stamps.append(time.perf_counter())
        return kwargs

    generator = torch.Generator(device="cpu").manual_seed(s.seed)
    kwargs = dict(
        prompt_embeds=prompt_embeds.to(dtype), negative_prompt_embeds=None if negative_embeds is None else negative_embeds.to(dtype),
        height=s.height, width=s.width, num_frames=s.num_frames, num_inference_steps=s.num_steps,
        guidance_scale=s.guidance_scale, generator=generator, output_type="latent",
        callback_on_step_end=on_step_end, max_sequence_length=s.max_sequence_length,
    )
    if s.guidance_scale_2 is not None:
        kwargs["guidance_scale_2"] = s.guidance_scale_2
    t_call = time.perf_counter()
    with torch.no_grad():
        latents = pipe(**kwargs).frames
    sync()
    edges = [t_call, *stamps]
    step_times = [b - a for a, b in zip(edges[:-1], edges[1:])]
    sampling_s = time.perf_counter() - t_call

    t0 = time.perf_counter()
    with torch.no_grad():
        vae = pipe.vae
        z = latents.to(vae.device, dtype=vae.dtype)
        mean = torch.tensor(vae.config.latents_mean).view(1, vae.config.z_dim, 1, 1, 1).to(z.device, z.dtype)
        inv_std = 1.0 / torch.tensor(vae.config.latents_std).view(1, vae.config.z_dim, 1, 1, 1).to(z.device, z.dtype)
        video = vae.decode(z / inv_std + mean, return_dict=False)[0]
        frames = pipe.video_processor.postprocess_video(video, output_type="np")
    sync()
    decode_s = time.perf_counter() - t0
    total_s = time.perf_counter() - start

    per_step = float(np.median(step_times[1:])) if len(step_times) > 1 else step_times[0]
    device_peak = int(torch.cuda.max_memory_allocated()) if cuda else None
    return {
        "engine": "diffusers",
        "load_s": load_s,
        "encode_s": encode_s,
        "compile_s": max(step_times[0] - per_step, 0.0) if len(step_times) > 1 else 0.0,
        "sampling_s": sampling_s,
        "per_step_s": per_step,
        "step_times_s": step_times,
        "num_steps": len(step_times),
        "decode_s": decode_s,
        "total_s": total_s,
        "peak_rss_mb": peak_rss_mb(),
        "device_peak_bytes": device_peak,
        "device_bytes_in_use": int(torch.cuda.memory_allocated()) if cuda else None,
        "latent_shape": list(latents.shape),
        "frames_shape": list(np.shape(frames)),
        "backend": device,
        "dtype": str(dtype).replace("torch.", ""),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "scheduler": type(pipe.scheduler).__name__,
    }
