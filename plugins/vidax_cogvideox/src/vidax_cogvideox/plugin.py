"""The CogVideoX family's plugin object: vidax's core finds :class:`CogVideoXPlugin` through the ``vidax`` entry
point.

Run semantics are those of diffusers' CogVideoXPipeline (text-to-video) and CogVideoXImageToVideoPipeline
(``image:`` given): latents (B, F, C, H, W) (1.5: F padded in front to the temporal patch), T5 v1.1 text in fp32
without a mask, the checkpoint's sampler (CogVideoX DDIM on the hub repos; CogVideoX DPM via
``sampling.scheduler``), classifier-free guidance with optional dynamic cosine scale (``options.use_dynamic_cfg``),
and the I2V first-frame latent concatenated on channels. Registering imports no JAX.
"""

from __future__ import annotations

import math

from vidax_core import FamilyPlugin
from vidax_core.cache.layout import CacheLayout

from . import presets


def dynamic_scale(guidance_scale: float, num_steps: int):
    """The pipelines' ``use_dynamic_cfg`` scale as a function of the model timestep t (their formula verbatim:
    ``1 + g * (1 - cos(pi * ((N - t) / N) ** 5)) / 2``)."""
    g, n = float(guidance_scale), float(num_steps)
    return lambda t: 1.0 + g * (1.0 - math.cos(math.pi * ((n - float(t)) / n) ** 5.0)) / 2.0


class CogVideoXPlugin(FamilyPlugin):
    vae_decode_frames = 8  # frame batches of two latent frames
    family = "cogvideox"
    models = presets.MODELS
    options = presets.OPTIONS
    diffusers_reference = ".bench_reference:CogVideoXDiffusersReference"
    dit_config_class = ".dit:CogVideoXDiTConfig"
    dit_class = ".dit:CogVideoXDiT"
    dit_flops = ".flops:counter"
    dit_grid_limit = ".checks:grid_limit"
    dit_example_inputs = ".conditioning:example_inputs"
    dit_rules = ".convert_dit:DIT_RULES"
    checks = ".checks"
    # the original SAT release (transformer/1/mp_rank_00_model_states.pt, vae/3d-vae.pt) is not read: one line
    # pointing at the diffusers repo; any other foreign folder is declined
    original_format = ".original_format:refuse_sat"
    # the blocks carry (text, video); CogVideoXPipeline batches both guidance branches in one "cond_uncond" context
    cache_layout = CacheLayout(hidden=1, contexts="call")

    def scheduler(self, spec, ckpt, run):
        """``options.scheduler_class``: the checkpoint's scheduler config read as that class (the official 5B
        demo's ``CogVideoXDPMScheduler.from_config(pipe.scheduler.config)``); None = the checkpoint's own class."""
        cls = run.options.get("scheduler_class")
        if not cls:
            return None
        from vidax_core.schedulers.base import sampler_from_scheduler_config

        return sampler_from_scheduler_config({**ckpt.config("scheduler"), "_class_name": cls})

    def guidance(self, spec, ckpt, run):
        """The core's rule (CFG when guidance_scale > 1), with ``options.use_dynamic_cfg``'s cosine scale."""
        from vidax_core import default_guidance

        if run.options.get("use_dynamic_cfg"):
            return default_guidance(run, scale=dynamic_scale(run.sampling.guidance_scale, int(run.sampling.num_steps)))
        return default_guidance(run)

    def check_checkpoint(self, spec, ckpt, run):
        """The DiT config must fit the model id, the VAE's channels and the run's size; config files only (a SAT
        release folder, which has no transformer/config.json to parse, is named before any parse)."""
        from .checks import checkpoint_config_problems

        return checkpoint_config_problems(spec, ckpt, run)

    def build_text_encoder(self, spec, ckpt, run, mesh):
        """T5 v1.1 XXL in the run's encoder dtype (bf16 on an accelerator, as the reference pipeline loaded in bf16;
        unmasked, its padding drifts in bf16 as the reference's does)."""
        from vidax_core import load_t5_text

        return load_t5_text(ckpt, mesh)

    def encode_prompt(self, spec, encoder, prompts, run):
        """As ``CogVideoXPipeline._get_t5_prompt_embeds``: padded to ``max_sequence_length`` and encoded WITHOUT
        the attention mask (the DiT attends to the padding too)."""
        from vidax_core import encode_unmasked

        return encode_unmasked(encoder, prompts, run.sampling.max_sequence_length)[0]

    def vae_latent_shape(self, spec, ckpt, run):
        if not ckpt.has("vae"):
            return None
        from .autoencoder import latent_grid
        from .checks import patch_t, vae_factors

        t, sp = vae_factors(ckpt.config("vae"))
        s = run.sampling
        return latent_grid(s.num_frames, s.height, s.width, temporal=t, spatial=sp, patch_t=patch_t(ckpt))

    def build_vae(self, spec, ckpt, run):
        from . import vae as vae_lib
        from .autoencoder import CogVideoXAutoencoder
        from .checks import patch_t

        cfg = vae_lib.CogVideoXVAEConfig.from_config(ckpt.config("vae"))
        model = vae_lib.load_vae(cfg, ckpt.tensors("vae"), with_encoder=run.image is not None)
        return CogVideoXAutoencoder(model, cfg, patch_t(ckpt)).for_frames(int(run.sampling.num_frames))

    def prepare_conditioning(self, spec, ckpt, run, vae, latent_shape):
        from .conditioning import prepare

        return prepare(run, vae, latent_shape, self.dit_config(ckpt))
