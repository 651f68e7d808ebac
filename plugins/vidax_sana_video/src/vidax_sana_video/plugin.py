"""The SANA-Video family's plugin object: vidax's core finds :data:`plugin` through the ``vidax`` entry point.

Run semantics are those of diffusers' ``SanaVideoPipeline`` and, with ``image:``, ``SanaImageToVideoPipeline`` (one
checkpoint serves both): Gemma-2's last hidden state of the prompt after the "complex human instruction"
(:mod:`.text`), classifier-free guidance ``uncond + g (cond - uncond)`` when ``guidance_scale`` > 1, the checkpoint's
scheduler (DPM-Solver++ on flow sigmas), the DiT of :mod:`.dit` (linear attention and a convolutional feed-forward
from the core), the Wan VAE (the core's, :class:`vidax_core.vae.wan_hooks.WanVAEHooks`), resolution binning through
the core's ``resolution_binning`` hook, and for image-to-video the image's latents held on frame 0 with timestep 0
(:mod:`.conditioning`). Registering imports no JAX.
"""

from __future__ import annotations

import functools

from vidax_core import FamilyPlugin, dit_weight_dtype
from vidax_core.vae.wan_hooks import WanVAEHooks

from . import presets


class SanaVideoPlugin(WanVAEHooks, FamilyPlugin):
    family = "sana-video"
    models = presets.MODELS
    options = presets.OPTIONS
    encoders_in_weight_dtype = ("text_encoder",)  # Gemma-2, as the model card runs it (bf16 on accelerators)
    diffusers_reference = ".bench_reference:SanaVideoDiffusersReference"
    dit_config_class = ".dit:SanaVideoDiTConfig"
    dit_rules = ".convert_dit:DIT_RULES"
    checks = ".checks"

    def build_dit(self, spec, ckpt, run):
        from vidax_core import DitBuild, GridLimit

        from .dit import ATTENTION_KINDS, SanaVideoDiT, example_inputs
        from .flops import counter

        cfg = self.dit_config(ckpt, dtype=dit_weight_dtype(run))
        n = cfg.rope_max_seq_len
        limit = GridLimit((n, n, n), f"rope_max_seq_len={n} in transformer/config.json (the DiT's RoPE table)")
        return DitBuild.of(SanaVideoDiT, cfg, in_channels=cfg.in_channels, heads=cfg.num_attention_heads,
                           patch_size=tuple(cfg.patch_size), block_counts={"blocks": cfg.num_layers},
                           attention_kinds=ATTENTION_KINDS, flops=counter(cfg), grid_limit=limit,
                           example_inputs=functools.partial(example_inputs, cfg))

    def build_text_encoder(self, spec, ckpt, run, mesh):
        """The tokenizer and Gemma-2 (in the run's weight dtype, tensor-parallel over tp when tp > 1)."""
        from . import text

        return text.load(ckpt, dtype=dit_weight_dtype(run), mesh=mesh)

    def encode_prompt(self, spec, encoder, prompts, run):
        from . import text

        return text.encode_for_run(encoder, prompts, run)

    def resolution_binning(self, spec, ckpt, run):
        """The pipelines' 480p or 720p aspect-ratio bins, by the transformer's ``sample_size``, unless
        ``options.use_resolution_binning`` is off."""
        if not run.options.get("use_resolution_binning", True):
            return None
        from .checks import resolution_bins

        return resolution_bins(self.dit_config(ckpt))

    def prepare_conditioning(self, spec, ckpt, run, vae, latent_shape):
        from .conditioning import prepare

        return prepare(run, vae, latent_shape[0] // self.dit_config(ckpt).patch_size[0])


