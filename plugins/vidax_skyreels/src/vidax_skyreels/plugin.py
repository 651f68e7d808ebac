"""The SkyReels-V2 family's plugin object: vidax's core finds :class:`SkyReelsPlugin` through the ``vidax`` entry
point.

SkyReels-V2 (Skywork) is built on Wan2.1's parts: the UMT5 prompt encoding and the Wan VAE come from the core
(:class:`vidax_core.encoders.wan_text.WanTextHooks`, :class:`vidax_core.vae.wan_hooks.WanVAEHooks`), its DiT is
the core's Wan DiT with per-frame timesteps, causal frame blocks and an fps embedding (:mod:`.dit`). The
text-to-video id runs as diffusers' ``SkyReelsV2Pipeline`` (one pass, classifier-free guidance), the image-to-video
id as ``SkyReelsV2ImageToVideoPipeline`` (Wan2.1's image conditioning, from the core); the diffusion-forcing ids as
``SkyReelsV2DiffusionForcingPipeline``, window by window (:mod:`.forcing`).
Registering imports no JAX.
"""

from __future__ import annotations

import functools

from vidax_core import FamilyPlugin, dit_weight_dtype
from vidax_core.encoders.wan_text import WanTextHooks
from vidax_core.vae.wan_hooks import WanVAEHooks

from . import presets


class SkyReelsPlugin(WanTextHooks, WanVAEHooks, FamilyPlugin):
    family = "skyreels"
    models = presets.MODELS
    diffusers_reference = ".bench_reference:SkyReelsDiffusersReference"
    checks = ".checks"
    dit_class = ".dit:SkyReelsDiT"
    dit_flops = "vidax_core.wan_dit.flops:counter"
    dit_grid_limit = "vidax_core.wan_dit.limits:grid_limit"
    dit_rules = ".convert_dit:DIT_RULES"

    def dit_config(self, ckpt, run=None, **overrides):
        from .dit import config_for_run

        return config_for_run(ckpt.config("transformer"), run, **overrides)

    def conversion_ignore(self, component):
        from .convert_dit import DIT_IGNORE

        return DIT_IGNORE

    def build_dit(self, spec, ckpt, run):
        """The default build of the run's config (its fps embedding follows the run); the example inputs read the
        checkpoint's image encoder."""
        from .dit import example_inputs

        cfg = self.dit_config(ckpt, run, dtype=dit_weight_dtype(run))
        return self.dit_build(cfg, example_inputs=functools.partial(example_inputs, cfg, ckpt))

    def builtin_checkpoint(self, spec, name):
        """``builtin:tiny-random`` is every id's own tiny pipeline: the diffusion-forcing one for the forcing ids,
        the text- or image-to-video one (packaged as ``tiny-random-t2v`` / ``tiny-random-i2v``, names also
        taken as they are) for the others."""
        if spec.id not in presets.DIFFUSION_FORCING:
            kind = "i2v" if "i2v" in spec.tasks else "t2v"
            if name in ("tiny-random", f"tiny-random-{kind}"):
                name = f"tiny-random-{kind}"
            else:
                return None
        elif name != "tiny-random":
            return None
        return super().builtin_checkpoint(spec, name)

    def prepare_conditioning(self, spec, ckpt, run, vae, latent_shape):
        """Image-to-video as Wan2.1's: the first frame's latents and mask concatenated on channels, CLIP image
        tokens for the image cross-attention (:mod:`vidax_core.wan_dit.conditioning`)."""
        if run.image is None:
            return None
        from vidax_core.wan_dit.conditioning import prepare_for_run

        return prepare_for_run(run, ckpt, vae, latent_shape, dit_cfg=self.dit_config(ckpt, run))

    def sampling_windows(self, spec, ckpt, run):
        """Diffusion forcing: the windows of :mod:`.forcing` (one window for a video no longer than
        ``base_num_frames``); the text-to-video id runs one ordinary pass."""
        if spec.id not in presets.DIFFUSION_FORCING:
            return None
        from vidax_core.vae.wan_video import latent_grid

        from .forcing import ForcingWindows

        dit = self.dit_config(ckpt, run)
        _, h, w = latent_grid(ckpt.config("vae"), 1, run.sampling.height, run.sampling.width)
        return ForcingWindows(run, (h, w), dit.in_channels, fps_embedding=dit.inject_sample_info)
