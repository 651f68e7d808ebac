"""The Helios family's plugin object: vidax's core finds :class:`HeliosPlugin` through the ``vidax`` entry point.

Helios (PKU-YuanGroup) is a Wan2.1-14B fine-tune that makes long video chunk by chunk, each chunk conditioned on a
multi-scale history of the latents before it. The UMT5 prompt encoding and the Wan VAE come from the core
(:class:`vidax_core.encoders.wan_text.WanTextHooks`, :class:`vidax_core.vae.wan_hooks.WanVAEHooks`); its DiT is built
from the core's Wan DiT parts (:mod:`.dit`); ``helios-base`` runs as diffusers' ``HeliosPipeline``, chunk by chunk
(:mod:`.chunks`), with the checkpoint's HeliosScheduler (:mod:`vidax_core.schedulers.helios`); ``helios-mid`` and
``helios-distilled`` as ``HeliosPyramidPipeline``, each chunk coarse to fine in stages (UniPC with CFG-Zero*, or
the DMD step). Registering imports no JAX.
"""

from __future__ import annotations

import functools

from vidax_core import FamilyPlugin, dit_weight_dtype
from vidax_core.encoders.wan_text import WanTextHooks
from vidax_core.vae.wan_hooks import WanVAEHooks

from . import presets


class HeliosPlugin(WanTextHooks, WanVAEHooks, FamilyPlugin):
    family = "helios"
    models = presets.MODELS
    options = presets.OPTIONS
    diffusers_reference = ".bench_reference:HeliosDiffusersReference"
    checks = ".checks"
    dit_config_class = ".dit:HeliosDiTConfig"
    dit_class = ".dit:HeliosDiT"
    dit_rules = ".convert_dit:DIT_RULES"

    def conversion_ignore(self, component):
        from .convert_dit import DIT_IGNORE

        return DIT_IGNORE

    def build_dit(self, spec, ckpt, run):
        """The default build, its FLOP count and example inputs at the run's history sizes."""
        from .chunks import example_inputs
        from .flops import counter

        cfg = self.dit_config(ckpt, dtype=dit_weight_dtype(run))
        sizes = list(dict(run.options or {}).get("history_sizes", [16, 2, 1]))
        return self.dit_build(cfg, flops=counter(cfg, sizes),
                              example_inputs=functools.partial(example_inputs, cfg, sizes))

    def sampling_windows(self, spec, ckpt, run):
        from vidax_core.vae.wan_video import latent_grid

        from .checks import is_pyramid
        from .chunks import HeliosChunks, HeliosPyramidChunks

        dit = self.dit_config(ckpt)
        _, h, w = latent_grid(ckpt.config("vae"), 1, run.sampling.height, run.sampling.width)
        args = (run, (h, w), dit.in_channels, tuple(dit.patch_size), dict(ckpt.config("scheduler")))
        if is_pyramid(spec):
            return HeliosPyramidChunks(*args, zero_star=bool(ckpt.model_index.get("is_cfg_zero_star", False)))
        return HeliosChunks(*args)

    def guidance(self, spec, ckpt, run):
        """CFG-Zero* for a pyramid checkpoint with ``is_cfg_zero_star`` (Helios-Mid); the core's default else."""
        from .checks import is_pyramid
        from .chunks import pyramid_guidance

        if not is_pyramid(spec):
            return None
        return pyramid_guidance(run, bool(ckpt.model_index.get("is_cfg_zero_star", False)), 0)

    def builtin_checkpoint(self, spec, name):
        """``tiny-random`` of a pyramid id: the packaged tiny Helios weights as a HeliosPyramidPipeline with the
        id's scheduler (generated into the cache on first use)."""
        from .checks import is_pyramid

        if not is_pyramid(spec) or name != "tiny-random":
            return super().builtin_checkpoint(spec, name)
        from .tiny import pyramid_builtin

        return pyramid_builtin(super().builtin_checkpoint(spec, name), spec.id)
