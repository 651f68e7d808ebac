"""The Motif-Video family's plugin object: vidax's core finds :data:`plugin` through the ``vidax`` entry point.

Run semantics are those of diffusers' ``MotifVideoPipeline`` (text-to-video) and ``MotifVideoImage2VideoPipeline``
(image-to-video, when the run gives ``image:``): T5Gemma2's ``last_hidden_state`` of the prompt padded to
``max_sequence_length`` with its mask (:mod:`.text`); the guidance of the checkpoint's guider
(``guider/guider_config.json``: classifier-free or adaptive projected guidance, :mod:`vidax_core.guiders`), its
scale ``sampling.guidance_scale`` when set; the scheduler of ``scheduler/scheduler_config.json`` over the
pipeline's sigmas ``linspace(1, 1 / N, N)`` with the dynamic shift ``mu`` of the video's token count; the DiT fed
``2 C + 1`` channels and, for image-to-video, the first frame's SigLIP features (:mod:`.conditioning`); the Wan
VAE (the core's). Registering imports no JAX.
"""

from __future__ import annotations

import functools

from vidax_core import FamilyPlugin, dit_weight_dtype
from vidax_core.vae.wan_hooks import WanVAEHooks

from . import presets


class MotifPlugin(WanVAEHooks, FamilyPlugin):
    family = "motif"
    models = presets.MODELS
    diffusers_reference = ".bench_reference:MotifDiffusersReference"
    dit_config_class = ".dit:MotifDiTConfig"
    checks = ".checks"

    def build_dit(self, spec, ckpt, run):
        from vidax_core import DitBuild

        from .conditioning import uses_image
        from .dit import MotifDiT, example_inputs
        from .flops import counter

        cfg = self.dit_config(ckpt, dtype=dit_weight_dtype(run))
        frames = (run.sampling.num_frames - 1) // presets.TEMPORAL + 1
        image = self._image_tokens(ckpt) if uses_image(run, (frames, 0, 0)) else 0
        return DitBuild.of(MotifDiT, cfg, in_channels=cfg.out_channels, heads=cfg.num_attention_heads,
                           patch_size=cfg.patch, block_counts=cfg.groups, flops=counter(cfg, image),
                           example_inputs=functools.partial(example_inputs, cfg))

    @staticmethod
    def _image_tokens(ckpt) -> int:
        """SigLIP's tokens per image (the square of its patches per side), 0 without a vision tower."""
        vision = ckpt.config("text_encoder").get("vision_config") if ckpt.has("text_encoder") else None
        if not isinstance(vision, dict):
            return 0
        return (int(vision.get("image_size", 224)) // int(vision.get("patch_size", 16))) ** 2

    def shard_rules(self, spec):
        return (("mod", "tp"),)  # the blocks' modulation outputs split like the heads; the rest as the defaults

    def convert_checkpoint(self, spec, component, tensors, abstract, config):
        if component != "transformer":
            return None
        from .convert_dit import convert_dit
        from .dit import MotifDiTConfig

        return convert_dit(MotifDiTConfig.from_config(config), tensors, abstract)

    def build_text_encoder(self, spec, ckpt, run, mesh):
        from . import text

        return text.load(ckpt, mesh=mesh)

    def encode_prompt(self, spec, encoder, prompts, run):
        from . import text

        return text.encode(encoder, prompts, run.sampling.max_sequence_length)

    def prepare_conditioning(self, spec, ckpt, run, vae, latent_shape):
        from .conditioning import prepare

        return prepare(ckpt, run, vae, tuple(latent_shape), int(vae.vae.cfg.z_dim))

    def guidance(self, spec, ckpt, run):
        from vidax_core.guiders import guidance_from_guider, guider_json

        s = run.sampling
        return guidance_from_guider(guider_json(ckpt), scale=s.guidance_scale, num_steps=int(s.num_steps))

    def sampling_plan(self, spec, ckpt, run, sampler, latent_shape):
        """The pipeline's sigmas ``linspace(1, 1 / N, N)`` and ``mu`` from the token count (the scheduler config's
        ``base_image_seq_len`` ... ``max_shift``); a scheduler that takes no sigmas is refused, as diffusers does."""
        import inspect

        import numpy as np

        from vidax_core import UserError
        from vidax_core.schedulers import calculate_shift

        params = inspect.signature(sampler.plan).parameters
        if "sigmas" not in params:
            raise UserError(f"{spec.id}: the pipeline hands its sigmas to the scheduler, and {sampler.name} takes "
                            "none (diffusers raises): use sampling.scheduler=flow_euler or unipc")
        cfg = self.dit_config(ckpt)
        f, h, w = latent_shape
        seq = (f // cfg.patch_size_t) * (h // cfg.patch_size) * (w // cfg.patch_size)
        sc = ckpt.config("scheduler") if ckpt.has("scheduler") else {}
        n = int(run.sampling.num_steps)
        out = {"sigmas": np.linspace(1.0, 1.0 / n, n)}
        if "mu" in params:
            out["mu"] = calculate_shift(seq, sc.get("base_image_seq_len", 256), sc.get("max_image_seq_len", 4096),
                                        sc.get("base_shift", 0.5), sc.get("max_shift", 1.15))
        return out


