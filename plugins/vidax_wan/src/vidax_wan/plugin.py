"""The Wan family's plugin object: vidax's core finds :class:`WanPlugin` through the ``vidax`` entry point.

Wan2.1 / 2.2 text-, image- and text-image-to-video with diffusers' WanPipeline / WanImageToVideoPipeline run
semantics: UMT5 text (:mod:`vidax_core.encoders.wan_text`), classifier-free guidance (per expert for Wan2.2
A14B, :mod:`.experts`), the core's Wan VAEs, the original Wan-AI release files (:mod:`.original_format`).
Registering imports no JAX.
"""

from __future__ import annotations

import functools

from vidax_core import FamilyPlugin, dit_weight_dtype
from vidax_core.encoders.wan_text import WanTextHooks
from vidax_core.vae.wan_hooks import WanVAEHooks

from . import presets

# Linear layers outside the blocks stored 8-bit in an 8-bit run, as ComfyUI's scaled fp8 Wan files store them
# (time_embedding.0/2, time_projection.1, text_embedding.0/2 float8_e4m3fn with a scale_weight); the image
# embedder too (Kijai's loader runs img_emb fp8 from such files). They hold ~1.8% of Wan2.1-14B's bf16 bytes but,
# resident beside two streamed blocks, over a quarter of an offloaded run's device bytes. The patch embedding,
# the output head (0.3 M parameters), norms, modulation tables and biases stay in full precision.
QUANTIZED_OUTSIDE_BLOCKS = (r"time_linear_[12]", r"time_proj", r"text_linear_[12]", r"image_linear_[12]")


class WanPlugin(WanTextHooks, WanVAEHooks, FamilyPlugin):
    family = "wan"
    models = presets.MODELS
    checkpoint_formats = ("diffusers", "wan-original")
    dit_components = ("transformer", "transformer_2")
    diffusers_reference = ".bench_reference:WanDiffusersReference"
    checks = ".checks"
    dit_class = "vidax_core.wan_dit.model:WanDiT"
    dit_flops = "vidax_core.wan_dit.flops:counter"
    original_format = ".original_format:open_original"  # the Wan-AI release files (config.json, Wan2.x_VAE.pth...)
    # Wan2.2 A14B: diffusers loads an adapter into transformer_2 with load_into_transformer_2=True
    lora_experts = {"high_noise": "transformer", "low_noise": "transformer_2"}

    def dit_config(self, ckpt, component="transformer", **overrides):
        from vidax_core.wan_dit.model import WanDiTConfig

        return WanDiTConfig.from_config({**ckpt.config(component), **overrides})

    def conversion_rules(self, component):
        from vidax_core.wan_dit.keys import DIT_RULES

        return DIT_RULES

    def conversion_ignore(self, component):
        from vidax_core.wan_dit.keys import DIT_IGNORE

        return DIT_IGNORE

    def quantization_outside_blocks(self, spec, component):
        return QUANTIZED_OUTSIDE_BLOCKS

    def lora_key_map(self, spec, layout):
        """Original (ComfyUI / lightx2v / kohya) module names -> diffusers names: the original checkpoint's rename."""
        if layout != "original":
            return None
        from .original_format import dit_key

        return dit_key

    def build_dit(self, spec, ckpt, run):
        """One denoiser, or Wan2.2 A14B's two experts switched by timestep (each its own component and limits)."""
        from vidax_core.wan_dit.conditioning import example_inputs

        from .checks import grid_limit
        from .experts import boundary, two_experts

        def one(component: str, **expert):
            cfg = self.dit_config(ckpt, component, dtype=dit_weight_dtype(run))
            if cfg.is_i2v or cfg.in_channels != cfg.out_channels:  # condition channels, CLIP tokens
                expert["example_inputs"] = functools.partial(example_inputs, cfg, ckpt)
            return self.dit_build(cfg, component=component, grid_limit=grid_limit(cfg, component), **expert)

        if not two_experts(ckpt):
            return one("transformer")
        # Wan2.2 A14B: the high-noise expert runs while t >= boundary, then the low-noise expert.
        return [one("transformer", t_min=boundary(ckpt)), one("transformer_2", t_max=boundary(ckpt))]

    def guidance(self, spec, ckpt, run):
        """Classifier-free guidance; with two experts (Wan2.2 A14B) the low-noise expert's steps use
        ``sampling.guidance_scale_2`` (the reference's ``guidance_scale_2``; null = guidance_scale)."""
        from vidax_core import default_guidance

        from .experts import boundary, two_experts

        if not two_experts(ckpt):
            return None  # the core's default
        s = run.sampling  # the reference decides CFG from guidance_scale alone
        g, g2 = float(s.guidance_scale), float(s.guidance_scale if s.guidance_scale_2 is None else s.guidance_scale_2)
        b = boundary(ckpt)
        return default_guidance(run, scale=lambda t: g if t >= b else g2)

    def check_checkpoint(self, spec, ckpt, run):
        """Every DiT expert's and the VAE's config, each parse failure named by its file (the default parses
        transformer/config.json alone)."""
        from .checks import checkpoint_config_problems

        return checkpoint_config_problems(spec, ckpt)

    def prepare_conditioning(self, spec, ckpt, run, vae, latent_shape):
        from vidax_core.wan_dit.conditioning import prepare_for_run

        return prepare_for_run(run, ckpt, vae, latent_shape) if run.image is not None else None

    def component_file(self, spec, component, tensors, published):
        """A ComfyUI / original-names DiT file (``wan2.1_t2v_14B_fp8_e4m3fn.safetensors``...)."""
        if component in self.dit_components:
            from vidax_core.wan_dit.original import read_file

            return read_file(tensors, published)
        return None

    def bench_dit(self, spec, need_reference, config):
        """``vidax bench --dit-only``: a Wan DiT (the checkpoint's architecture, default Wan2.1-1.3B's) in vidax and
        diffusers, and the Wan2.1 VAE."""
        from .bench_reference import WanDitBench

        return WanDitBench(need_reference, config)
