"""The Kandinsky 5 family's plugin object: vidax's core finds :class:`KandinskyPlugin` through the ``vidax`` entry
point.

Run semantics are those of diffusers' ``Kandinsky5T2VPipeline`` / ``Kandinsky5I2VPipeline``: Qwen2.5-VL's last
hidden state of the templated prompt (cropped at 128) plus the pooled CLIP-L text (:mod:`.text`), classifier-free
guidance ``uncond + g (cond - uncond)`` when ``guidance_scale`` > 1 (each branch its own call, the prompts'
lengths differ), flow Euler from the checkpoint's scheduler config, channel-last latents, the DiT fed
``2 C + 1`` channels and the RoPE scale of the run's size (:mod:`.conditioning`), the HunyuanVideo VAE (the
core's, :mod:`vidax_core.vae.hunyuan`). The family needs nothing from vidax-hunyuan. Registering imports no JAX.
"""

from __future__ import annotations

from vidax_core import FamilyPlugin, dit_weight_dtype
from vidax_core.vae.hunyuan_hooks import HunyuanVAEHooks

from . import presets


def example_inputs(cfg, batch: int, grid, text: int):
    """``DitBuild.example_inputs``: the ``C_in``-channel channel-last latents, the Qwen / CLIP context and the
    RoPE scale of a 512x768 run."""
    import numpy as np

    latents = ((batch, *grid, cfg.in_channels), cfg.dtype)
    context = {"hidden": ((batch, text, cfg.in_text_dim), cfg.dtype), "pooled": ((batch, cfg.in_text_dim2), cfg.dtype)}
    return latents, context, {"scale_factor": np.tile(np.float32([1.0, 2.0, 2.0]), (batch, 1))}


class KandinskyPlugin(HunyuanVAEHooks, FamilyPlugin):
    family = "kandinsky"
    models = presets.MODELS
    diffusers_reference = ".bench_reference:KandinskyDiffusersReference"
    dit_config_class = ".dit:KandinskyDiTConfig"
    dit_class = ".dit:KandinskyDiT"
    dit_flops = ".flops:counter"
    dit_example_inputs = ".plugin:example_inputs"
    dit_rules = ".convert_dit:DIT_RULES"
    checks = ".checks"
    vae_channels_last = True  # the pipelines hold latents as (B, T, H, W, C)

    def build_text_encoder(self, spec, ckpt, run, mesh):
        """Qwen2.5-VL (in the run's weight dtype, tensor-parallel over tp when tp > 1) and CLIP-L text."""
        from . import text

        return text.load(ckpt, dtype=dit_weight_dtype(run), mesh=mesh)

    def encode_prompt(self, spec, encoder, prompts, run):
        from . import text

        return text.encode_for_run(encoder, prompts, run)

    def prepare_conditioning(self, spec, ckpt, run, vae, latent_shape):
        from .conditioning import prepare

        dit = self.dit_config(ckpt)
        return prepare(run, vae, latent_shape, dit.in_visual_dim, visual_cond=dit.visual_cond,
                       i2v="i2v" in spec.tasks)
