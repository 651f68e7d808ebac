"""The Cosmos family's plugin object: vidax's core finds :data:`plugin` through the ``vidax`` entry point.

Run semantics are those of diffusers' ``Cosmos2_5_PredictBasePipeline``: text-to-world, image-to-world (``image:``)
and video-to-world (``video:``) through one step (:mod:`vidax_cosmos.conditioning`), Cosmos-Reason1 prompt
embeddings (:mod:`vidax_cosmos.text`), guidance ``cond + g * (cond - uncond)``, the checkpoint's UniPC sampler
(karras flow sigmas) with the DiT fed sigma per latent frame, the Wan2.1 VAE. The Cosmos3 ids (Nano, Edge) are
registered here too and every hook of theirs is handed to :data:`vidax_cosmos.cosmos3_plugin.hooks`. Registering
imports no JAX.
"""

from __future__ import annotations

from vidax_core import FamilyPlugin, dit_weight_dtype

from . import cosmos3_presets, presets


def _cosmos3(spec):
    """The Cosmos3 hooks when ``spec`` is a Cosmos3 id, else None (Predict2.5, or no spec as unit tests call)."""
    if getattr(spec, "id", None) not in cosmos3_presets.COSMOS3_IDS:
        return None
    from .cosmos3_plugin import hooks

    return hooks


class CosmosPlugin(FamilyPlugin):
    family = "cosmos"
    models = [*presets.MODELS, *cosmos3_presets.MODELS]
    options = presets.OPTIONS
    checkpoint_formats = ("diffusers", "cosmos-original")
    diffusers_reference = ".bench_reference:CosmosDiffusersReference"
    dit_config_class = ".dit:CosmosDiTConfig"
    dit_rules = ".convert_dit:DIT_RULES"

    def build_dit(self, spec, ckpt, run):
        if (c3 := _cosmos3(spec)) is not None:
            return c3.build_dit(spec, ckpt=ckpt, run=run)
        from vidax_core import DitBuild

        from .flops import counter as dit_flops

        from .dit import CosmosDiT

        cfg = self.dit_config(ckpt, dtype=dit_weight_dtype(run))
        return DitBuild.of(CosmosDiT, cfg, in_channels=cfg.out_channels, heads=cfg.num_attention_heads,
                           patch_size=cfg.patch_size, block_counts={"blocks": cfg.num_layers}, flops=dit_flops(cfg))

    def guidance(self, spec, ckpt, run):
        """``cond + g * (cond - uncond)`` when guidance_scale > 1 (the pipeline's formula), else one pass."""
        if (c3 := _cosmos3(spec)) is not None:
            return c3.guidance(spec, ckpt=ckpt, run=run)
        from vidax_core import ClassifierFree, NoGuidance

        g = float(run.sampling.guidance_scale)
        return ClassifierFree(scale=g, formula="cond") if g > 1.0 else NoGuidance()

    def check_run(self, spec, run):
        if (c3 := _cosmos3(spec)) is not None:
            return c3.check_run(spec, run=run)
        from .checks import run_problems

        return run_problems(spec, run)

    def check_checkpoint(self, spec, ckpt, run):
        if (c3 := _cosmos3(spec)) is not None:
            return c3.check_checkpoint(spec, ckpt=ckpt, run=run)
        from .checks import checkpoint_problems

        return super().check_checkpoint(spec, ckpt, run) or checkpoint_problems(spec, ckpt, self.dit_config(ckpt))

    def build_text_encoder(self, spec, ckpt, run, mesh):
        """Cosmos-Reason1 (Qwen2.5-VL text tower) in the run's weight dtype, tensor-parallel over tp when tp > 1."""
        if (c3 := _cosmos3(spec)) is not None:
            return c3.build_text_encoder(spec, ckpt=ckpt, run=run, mesh=mesh)
        from . import text

        return text.load(ckpt.require("tokenizer"), ckpt.config("text_encoder"), ckpt.tensors("text_encoder"),
                         dtype=dit_weight_dtype(run), mesh=mesh)

    def encode_prompt(self, spec, encoder, prompts, run):
        if (c3 := _cosmos3(spec)) is not None:
            return c3.encode_prompt(spec, encoder=encoder, prompts=prompts, run=run)
        from . import text

        return text.encode(encoder, prompts, int(run.sampling.max_sequence_length))

    def build_vae(self, spec, ckpt, run):
        if (c3 := _cosmos3(spec)) is not None:
            return c3.build_vae(spec, ckpt=ckpt, run=run)
        from vidax_core.vae.wan_video import load_wan_autoencoder

        with_encoder = run.image is not None or run.video is not None
        return load_wan_autoencoder(ckpt.config("vae"), ckpt.tensors("vae"), with_encoder=with_encoder)

    def vae_latent_shape(self, spec, ckpt, run):
        if (c3 := _cosmos3(spec)) is not None:
            return c3.vae_latent_shape(spec, ckpt=ckpt, run=run)
        from vidax_core.vae.wan_video import latent_grid

        s = run.sampling
        return latent_grid(ckpt.config("vae"), s.num_frames, s.height, s.width) if ckpt.has("vae") else None

    def prepare_conditioning(self, spec, ckpt, run, vae, latent_shape):
        if (c3 := _cosmos3(spec)) is not None:
            return c3.prepare_conditioning(spec, ckpt=ckpt, run=run, vae=vae, latent_shape=latent_shape)
        from .conditioning import prepare

        return prepare(run, vae, latent_shape, self.dit_config(ckpt).out_channels)

    def open_checkpoint(self, spec, path):
        """A folder with the original release's DiT ``*.pt`` (keys ``net.*``) next to diffusers-layout components."""
        if (c3 := _cosmos3(spec)) is not None:
            return c3.open_checkpoint(spec, path=path)
        from .original_format import open_original

        return open_original(spec, path)

    def convert_checkpoint(self, spec, component, tensors, abstract, config):
        if (c3 := _cosmos3(spec)) is not None:
            return c3.convert_checkpoint(spec, component, tensors, abstract, config)
        return super().convert_checkpoint(spec, component, tensors, abstract, config)

    def sampling_plan(self, spec, ckpt, run, sampler, latent_shape):
        if (c3 := _cosmos3(spec)) is not None:
            return c3.sampling_plan(spec, ckpt, run, sampler, latent_shape)
        return None

    def builtin_checkpoint(self, spec, name):
        if _cosmos3(spec) is not None:  # its own tiny checkpoint (the Predict2.5 one would not fit)
            return super().builtin_checkpoint(spec, f"cosmos3-{name}")
        return super().builtin_checkpoint(spec, name)

    def bench_reference(self, spec, engine, ckpt_dir, run):
        if _cosmos3(spec) is not None:
            if engine != "diffusers":
                return None
            from .cosmos3_bench_reference import Cosmos3DiffusersReference

            return Cosmos3DiffusersReference(ckpt_dir, run)
        return super().bench_reference(spec, engine, ckpt_dir, run)


plugin = CosmosPlugin()
