"""The Cosmos family's plugin object: vidax's core finds :class:`CosmosPlugin` through the ``vidax`` entry point.

Run semantics are those of diffusers' ``Cosmos2_5_PredictBasePipeline``: text-to-world, image-to-world (``image:``)
and video-to-world (``video:``) through one step (:mod:`vidax_cosmos.conditioning`), Cosmos-Reason1 prompt
embeddings (:mod:`vidax_cosmos.text`), guidance ``cond + g * (cond - uncond)``, the checkpoint's UniPC sampler
(karras flow sigmas) with the DiT fed sigma per latent frame, the Wan2.1 VAE. Registering imports no JAX. The
Cosmos3 ids are registered by the package's second plugin object, :class:`vidax_cosmos.cosmos3_plugin.Cosmos3Plugin`.
"""

from __future__ import annotations

from vidax_core import FamilyPlugin, TextLayerReader, dit_weight_dtype
from vidax_core.vae.wan_hooks import WanVAEHooks

from . import presets


class CosmosPlugin(WanVAEHooks, FamilyPlugin):
    family = "cosmos"
    models = presets.MODELS
    options = presets.OPTIONS
    checkpoint_formats = ("diffusers", "cosmos-original")
    diffusers_reference = ".bench_reference:CosmosDiffusersReference"
    dit_config_class = ".dit:CosmosDiTConfig"
    dit_class = ".dit:CosmosDiT"
    dit_flops = ".flops:counter"
    dit_grid_limit = ".checks:grid_limit"
    dit_rules = ".convert_dit:DIT_RULES"
    checks = ".checks"
    original_format = ".original_format:open_original"  # the release's DiT *.pt (keys net.*) beside diffusers parts
    # the DiT's cross-attention input is every Qwen layer's hidden state: a random checkpoint with a cut text
    # encoder scales it with it
    text_layer_readers = (TextLayerReader("transformer", "crossattn_proj_in_channels", r"crossattn_proj\.0\.weight"),)

    def guidance(self, spec, ckpt, run):
        """``cond + g * (cond - uncond)`` when guidance_scale > 1 (the pipeline's formula), else one pass."""
        from vidax_core import default_guidance

        return default_guidance(run, formula="cond")

    def build_text_encoder(self, spec, ckpt, run, mesh):
        """Cosmos-Reason1 (Qwen2.5-VL text tower) in the run's weight dtype, tensor-parallel over tp when tp > 1."""
        from . import text

        return text.load(ckpt.require("tokenizer"), ckpt.config("text_encoder"), ckpt.tensors("text_encoder"),
                         dtype=dit_weight_dtype(run), mesh=mesh)

    def encode_prompt(self, spec, encoder, prompts, run):
        from . import text

        return text.encode(encoder, prompts, int(run.sampling.max_sequence_length))

    def prepare_conditioning(self, spec, ckpt, run, vae, latent_shape):
        from .conditioning import prepare

        return prepare(run, vae, latent_shape, self.dit_config(ckpt).out_channels)
