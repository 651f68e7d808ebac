"""AnyFlow's side of ``vidax bench --reference diffusers``: the diffusers pipelines timed phase by phase.

The FAR ids run ``AnyFlowFARPipeline`` (chunk by chunk, its own KV cache), the bidirectional ids ``AnyFlowPipeline``,
with the run's options (``chunk_partition``, ``use_mean_velocity``): load, ``encode_prompt``, the denoising call with
``output_type="latent"``, and the pipeline's decode. torch and diffusers are imported only when the reference runs.
"""

from __future__ import annotations

import sys
from typing import Any

from vidax_core.bench.torch_reference import (DiffusersReference, decode_wan_latents, identity_ftfy,
                                              wan_prompt_embeds)

from .presets import FAR_IDS


class AnyFlowDiffusersReference(DiffusersReference):
    """Runs the run config with the id's diffusers pipeline from ``ckpt_dir`` and returns its metrics."""

    family = "AnyFlow"
    scheduler = "scheduler config"
    scheduler_options = ("cache_window",)

    def refuse(self, run: Any) -> None:
        super().refuse(run)
        from vidax_core.errors import UserError

        if run.video is not None:
            raise UserError("--reference diffusers: the AnyFlow reference times text-to-video runs only; remove "
                            "`video`")
        if dict(run.options or {}).get("use_kv_cache") is False:
            raise UserError("--reference diffusers: leave options.use_kv_cache unset (the reference's own "
                            "use_kv_cache=False path does not run)")

    def __call__(self) -> dict[str, Any]:
        _, diffusers, device, dtype, clock = self.start()
        run, s = self.run, self.run.sampling
        far = run.model.id in FAR_IDS
        cls = diffusers.AnyFlowFARPipeline if far else diffusers.AnyFlowPipeline
        identity_ftfy(sys.modules[cls.__module__])
        pipe = self.load(cls)
        options = dict(run.options or {})
        kwargs = dict(
            **wan_prompt_embeds(pipe, run, device, dtype, clock),
            height=s.height, width=s.width, num_frames=s.num_frames, num_inference_steps=s.num_steps,
            guidance_scale=s.guidance_scale, generator=self.generator(), output_type="latent",
            callback_on_step_end=clock.on_step_end, max_sequence_length=s.max_sequence_length,
            use_mean_velocity=options.get("use_mean_velocity", True) is not False)
        if far and options.get("chunk_partition"):
            kwargs["chunk_partition"] = list(options["chunk_partition"])
        with clock.sampling():
            latents = pipe(**kwargs).frames
        with clock.phase("decode"):
            frames = decode_wan_latents(pipe, latents)
        return self.metrics(latents, frames, scheduler=type(pipe.scheduler).__name__)
