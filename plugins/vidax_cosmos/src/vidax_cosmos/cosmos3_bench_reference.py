"""``vidax bench --reference diffusers`` for the Cosmos3 ids: the same run with ``Cosmos3OmniPipeline`` (guardrail
off).

torch/diffusers are test-only dependencies, imported only when the reference runs; without them the hook raises a
one-line :class:`UserError`. Phases are timed as the vidax side times them: ``load_s`` (``from_pretrained`` +
move), ``encode_s`` (``tokenize_prompt``: the pipeline has no text encoder), the steps (``callback_on_step_end``
stamps after a device sync), ``decode_s`` (un-normalise + ``vae.decode`` + post-processing).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vidax_core.bench.torch_reference import TorchClock, torch_diffusers, torch_dtype
from vidax_core.errors import UserError


class Cosmos3DiffusersReference:
    engine = "diffusers"

    def __init__(self, ckpt_dir: str, run: Any) -> None:
        torch_diffusers()
        if run.image is not None or run.video is not None:
            raise UserError("--reference diffusers: the Cosmos3 reference times text-to-video runs only; remove "
                            "`image`")
        if run.sampling.scheduler is not None:
            raise UserError("--reference diffusers: leave sampling.scheduler unset (the checkpoint's UniPC)")
        self.ckpt_dir, self.run = ckpt_dir, run

    def __call__(self) -> dict[str, Any]:
        torch, _ = torch_diffusers()
        from diffusers import Cosmos3OmniPipeline

        run, s, o = self.run, self.run.sampling, self.run.options
        device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype = torch_dtype(torch, run.model.dtype)
        clock = TorchClock(torch, device)
        with clock.phase("load"):
            pipe = Cosmos3OmniPipeline.from_pretrained(self.ckpt_dir, enable_safety_checker=False,
                                                       torch_dtype={"transformer": dtype, "default": torch.float32})
            pipe.to(device)
            pipe.set_progress_bar_config(disable=True)
        options = dict(fps=float(o.get("fps", 24.0)), use_system_prompt=o.get("use_system_prompt"),
                       add_resolution_template=bool(o.get("add_resolution_template", True)),
                       add_duration_template=bool(o.get("add_duration_template", True)))
        with clock.phase("encode"):
            pipe.tokenize_prompt(run.prompt, run.negative_prompt, num_frames=s.num_frames, height=s.height,
                                 width=s.width, **options)
        with clock.sampling():
            latents = pipe(prompt=run.prompt, negative_prompt=run.negative_prompt, height=s.height, width=s.width,
                           num_frames=s.num_frames, num_inference_steps=s.num_steps, guidance_scale=s.guidance_scale,
                           generator=torch.Generator(device="cpu").manual_seed(s.seed), output_type="latent",
                           enable_safety_check=False, callback_on_step_end=clock.on_step_end, **options).video
        with clock.phase("decode"):
            z = latents.to(pipe.vae.dtype)
            mean = pipe._vae_latents_mean.to(z.device, z.dtype).view(1, -1, 1, 1, 1)
            inv_std = pipe._vae_latents_inv_std.to(z.device, z.dtype).view(1, -1, 1, 1, 1)
            video = pipe.vae.decode(z / inv_std + mean, return_dict=False)[0]
            frames = pipe.video_processor.postprocess_video(video, output_type="np")
        return clock.metrics(latent_shape=list(latents.shape), frames_shape=list(np.shape(frames)),
                             dtype=str(dtype).replace("torch.", ""))
