"""``vidax bench --reference diffusers`` for HunyuanVideo-1.5: the same run with ``HunyuanVideo15Pipeline`` (or
``HunyuanVideo15ImageToVideoPipeline`` for the image-to-video ids, the step-distilled one included).

torch/diffusers are test-only dependencies, imported only when the reference runs; without them the hook raises a
one-line :class:`UserError`. The run's settings reach the pipeline as vidax reads them: the guider's scale is
``sampling.guidance_scale``, the Qwen / byT5 lengths (pipeline attributes) are ``sampling.max_sequence_length`` and
``options.tokenizer_2_max_length``; the DiT and Qwen in ``model.dtype``, byT5, SigLIP and the VAE in float32.
Phases are timed as the vidax side times them (:class:`vidax_core.bench.torch_reference.TorchClock`): ``load_s``,
``encode_s`` (``encode_prompt``, once more for the negative prompt under CFG), the steps (these pipelines take no
step callback: the scheduler's ``step`` stamps each one), ``decode_s``. Image-to-video encodes its image (SigLIP,
VAE) inside the pipeline call, so that lands in its first step.
"""

from __future__ import annotations

import os
from typing import Any

from vidax_core.errors import UserError

from . import hunyuan15_presets as presets
from .bench_reference import HunyuanDiffusersReference


class Hunyuan15DiffusersReference(HunyuanDiffusersReference):
    """1.0's checks (torch present, the checkpoint's own scheduler) plus a diffusers-layout folder; 1.5's run."""

    def refuse(self, run: Any) -> None:
        super().refuse(run)
        if not os.path.isfile(os.path.join(self.ckpt_dir, "model_index.json")):
            raise UserError(f"--reference diffusers: {self.ckpt_dir} is not a diffusers-layout pipeline folder (the "
                            "original release is not): bench a hunyuanvideo-community diffusers checkpoint")

    def __call__(self) -> dict[str, Any]:
        _, diffusers, device, dtype, clock = self.start()
        run, s = self.run, self.run.sampling
        i2v = run.image is not None
        pipe = self.load(diffusers.HunyuanVideo15ImageToVideoPipeline if i2v else diffusers.HunyuanVideo15Pipeline)
        pipe.guider.guidance_scale = float(s.guidance_scale)
        pipe.tokenizer_max_length = int(s.max_sequence_length)
        byt5 = run.options.get("tokenizer_2_max_length")
        pipe.tokenizer_2_max_length = presets.BYT5_LENGTH if byt5 is None else int(byt5)
        step = pipe.scheduler.step

        def stamped_step(*args, **kwargs):
            out = step(*args, **kwargs)
            clock.on_step_end(pipe, len(clock.stamps), None, {})
            return out

        pipe.scheduler.step = stamped_step
        names = ("prompt_embeds", "prompt_embeds_mask", "prompt_embeds_2", "prompt_embeds_mask_2")
        with clock.phase("encode"):
            embeds = dict(zip(names, pipe.encode_prompt(prompt=run.prompt, device=device, dtype=dtype)))
            if pipe.guider._enabled and pipe.guider.num_conditions > 1:
                neg = pipe.encode_prompt(prompt=run.negative_prompt or "", device=device, dtype=dtype)
                embeds.update({f"negative_{n}": v for n, v in zip(names, neg)})
        if i2v:
            from PIL import Image

            size = {"image": Image.open(run.image).convert("RGB")}
        else:
            size = {"height": s.height, "width": s.width}
        with clock.sampling():
            latents = pipe(num_frames=s.num_frames, num_inference_steps=s.num_steps, output_type="latent",
                           generator=self.generator(), **size, **embeds).frames
        return self.decode(pipe, latents)
