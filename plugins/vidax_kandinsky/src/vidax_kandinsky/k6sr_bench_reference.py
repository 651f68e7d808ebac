"""``vidax bench --reference diffusers`` for Kandinsky 6's super-resolution ids: the same clip through
``Kandinsky6SRPipeline``.

torch/diffusers are test-only dependencies, imported only when the reference runs. The pipeline takes no step
callback: the scheduler's ``step`` stamps each step (every tile's). It encodes, denoises, decodes and blends inside
one call, so its encode and decode are in its sampling time; its NABLA attention runs on PyTorch's flex attention,
eagerly on a CPU (dense, the pipeline warns), as the pipeline runs it there.
"""

from __future__ import annotations

from typing import Any

from vidax_core.bench.torch_reference import DiffusersReference


class Kandinsky6SRDiffusersReference(DiffusersReference):
    family = "Kandinsky 6 SR"
    text_only = None
    scheduler = "the checkpoint's (flow Euler or PiFlow)"

    def __call__(self) -> dict[str, Any]:
        import numpy as np

        from vidax_core.io.clip import read_video

        _, diffusers, _, _, clock = self.start()
        run, s, o = self.run, self.run.sampling, self.run.options
        pipe = self.load(diffusers.Kandinsky6SRPipeline)
        video = read_video(run.video, height=s.height, width=s.width)[None, :s.num_frames]
        step = pipe.scheduler.step

        def stamped(*args, **kwargs):
            out = step(*args, **kwargs)
            clock.on_step_end(pipe, len(clock.stamps), None, {})
            return out

        pipe.scheduler.step = stamped
        with clock.sampling():
            frames = pipe(video=video, resolution_scale=float(o.get("resolution_scale", 2.25)),
                          num_inference_steps=s.num_steps, lq_noise_scale=float(o.get("lq_noise_scale", 0.7)),
                          min_overlap=float(o.get("min_overlap", 0.2)),
                          tiles_batch_size=int(o.get("tiles_batch_size", 1)), generator=self.generator(),
                          output_type="np").frames
        return self.metrics(np.zeros(0), frames)
