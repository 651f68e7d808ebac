"""The AnyFlow family's plugin object: vidax's core finds :class:`AnyFlowPlugin` through the ``vidax`` entry point.

AnyFlow (NVIDIA, NUS ShowLab) distils Wan2.1 into any-step flow-map models, bidirectional (diffusers
``AnyFlowPipeline``) and causal (FAR, ``AnyFlowFARPipeline``: the video made chunk by chunk against a KV cache,
each chunk's frames out as soon as it is made). Built on Wan2.1's parts: the UMT5 prompt encoding and the Wan VAE
from the core (:class:`vidax_core.encoders.wan_text.WanTextHooks`, :class:`vidax_core.vae.wan_hooks.WanVAEHooks`),
the DiT the core's Wan DiT with the flow-map time embedding and FAR's compressed context (:mod:`.dit`), the
flow-map Euler sampler from the core (:mod:`vidax_core.schedulers.flow_map`), a FAR run a causal chunked run of the
core (:mod:`.far`). Registering imports no JAX.
"""

from __future__ import annotations

from vidax_core import FamilyPlugin
from vidax_core.encoders.wan_text import WanTextHooks
from vidax_core.vae.wan_hooks import WanVAEHooks

from . import presets


class AnyFlowPlugin(WanTextHooks, WanVAEHooks, FamilyPlugin):
    family = "anyflow"
    models = presets.MODELS
    diffusers_reference = ".bench_reference:AnyFlowDiffusersReference"
    checks = ".checks"
    dit_class = ".dit:AnyFlowDiT"
    dit_flops = ".flops:counter"
    dit_grid_limit = "vidax_core.wan_dit.limits:grid_limit"
    dit_rules = ".convert_dit:DIT_RULES"

    def dit_config(self, ckpt, **overrides):
        """transformer/config.json as an :class:`.dit.AnyFlowDiTConfig`, FAR or not by its class."""
        from .dit import AnyFlowDiTConfig, is_far

        config = ckpt.config("transformer")
        return AnyFlowDiTConfig.from_config(config, **{"far": bool(is_far(config)), **overrides})

    def conversion_ignore(self, component):
        from .convert_dit import DIT_IGNORE

        return DIT_IGNORE

    def builtin_checkpoint(self, spec, name):
        """``tiny-random`` is an AnyFlow-FAR pipeline; the bidirectional ids' is ``tiny-random-bidirectional``."""
        if spec.id not in presets.FAR_IDS:
            name = f"{name}-bidirectional"
        return super().builtin_checkpoint(spec, name)

    def prepare_conditioning(self, spec, ckpt, run, vae, latent_shape):
        """The bidirectional pipeline's: the step's target timestep for the flow map, and a clip's (or an image's)
        latents in front (:mod:`.conditioning`). A FAR run conditions chunk by chunk (:mod:`.far`)."""
        from .conditioning import bidirectional

        return bidirectional(run, vae, latent_shape)

    def sampling_windows(self, spec, ckpt, run):
        """A FAR id's chunks (:class:`.far.FarWindows`, with its KV cache); None for the bidirectional ids."""
        if spec.id not in presets.FAR_IDS:
            return None
        import numpy as np

        from vidax_core.model_api import dit_weight_dtype
        from vidax_core.vae.wan_video import latent_grid

        from .conditioning import encode, given_latent_frames, target_timestep
        from .far import FarWindows, geometry_for

        dit = self.dit_config(ckpt)
        _, h, w = latent_grid(ckpt.config("vae"), 1, run.sampling.height, run.sampling.width)
        geo = geometry_for(run, dit, (h, w))
        cache = geo.spec(dit.num_layers, dit.num_attention_heads, dit.attention_head_dim,
                         np.dtype(dit_weight_dtype(run)).name)
        given = given_latent_frames(run)
        return FarWindows(geo, (h, w), dit.out_channels, cache, int(run.sampling.num_steps), given_frames=given,
                          encode=(lambda vae: encode(run, vae)) if given else None,
                          step_kwargs=target_timestep(run), max_frames=dit.rope_max_seq_len)
