"""The Cosmos3 plugin object (``cosmos3-nano``, ``cosmos3-edge``): a second entry point of this package, beside
:class:`vidax_cosmos.plugin.CosmosPlugin` (Predict2.5); the core hands each id's hooks to the object that
registered it.

Run semantics are those of diffusers' ``Cosmos3OmniPipeline`` (guardrail off): no text encoder (the prompt's token
ids, :mod:`vidax_cosmos.cosmos3_prompt`, go to the DiT one guidance branch at a time, each at its own unpadded
length), guidance ``uncond + g * (cond - uncond)`` whenever ``g != 1``, the checkpoint's UniPC sampler fed the
0..1000 timestep (the model_index.json ``use_native_flow_schedule`` switch replaces its sigmas by
``linspace(1 - 1/T, 0, N + 1)[:-1]``), image- and video-to-video through :mod:`vidax_cosmos.cosmos3_conditioning`, the
Wan2.2 VAE.
"""

from __future__ import annotations

from vidax_core import FamilyPlugin
from vidax_core.vae.wan_hooks import WanVAEHooks

from . import cosmos3_presets


class Cosmos3Plugin(WanVAEHooks, FamilyPlugin):
    family = "cosmos"
    models = cosmos3_presets.MODELS
    diffusers_reference = ".cosmos3_bench_reference:Cosmos3DiffusersReference"
    dit_config_class = ".cosmos3_dit:Cosmos3DiTConfig"
    dit_class = ".cosmos3_dit:Cosmos3DiT"
    dit_flops = ".cosmos3_flops:counter"
    dit_example_inputs = ".cosmos3_conditioning:example_inputs"
    checks = ".cosmos3_checks"

    def builtin_checkpoint(self, spec, name):
        """``assets/cosmos3-<name>`` (the package's Predict2.5 assets hold ``<name>``)."""
        return super().builtin_checkpoint(spec, f"cosmos3-{name}")

    def convert_checkpoint(self, spec, component, tensors, abstract, config):
        """The key table of this config; ModelOpt FP8 weights are refused before any is read as a plain one."""
        if component != "transformer":
            return None
        from vidax_core.io.convert import convert

        from .convert_cosmos3 import IGNORED, dit_rules
        from .cosmos3_dit import Cosmos3DiTConfig
        from .cosmos3_fp8 import check_not_fp8

        check_not_fp8(tensors, config, repo=spec.hub_repo)
        return convert(tensors, dit_rules(Cosmos3DiTConfig.from_config(config)), abstract,
                       component="Cosmos3 DiT (transformer)", ignore=IGNORED)

    def guidance(self, spec, ckpt, run):
        from vidax_core import ClassifierFree, NoGuidance

        g = float(run.sampling.guidance_scale)
        return ClassifierFree(scale=g) if g != 1.0 else NoGuidance()

    def sampling_plan(self, spec, ckpt, run, sampler, latent_shape):
        if not ckpt.model_index.get("use_native_flow_schedule", False):
            return None
        import numpy as np

        t = int(ckpt.config("scheduler").get("num_train_timesteps", 1000)) if ckpt.has("scheduler") else 1000
        n = int(run.sampling.num_steps)
        return {"sigmas": [float(x) for x in np.linspace(1.0 - 1.0 / t, 0.0, n + 1)[:-1]]}

    def build_text_encoder(self, spec, ckpt, run, mesh):
        """The tokenizer and chat template only: the DiT embeds the token ids itself."""
        from .cosmos3_prompt import load

        return load(ckpt.require("text_tokenizer"), ckpt.model_index)

    def encode_prompt(self, spec, encoder, prompts, run):
        """One (1, L_i) int32 id array per prompt (``[prompt, negative_prompt]``), each at its own length."""
        from .cosmos3_prompt import token_ids

        return [token_ids(encoder, p, negative=i > 0, run=run) for i, p in enumerate(prompts)]


    def prepare_conditioning(self, spec, ckpt, run, vae, latent_shape):
        from .cosmos3_conditioning import prepare

        return prepare(run, vae, latent_shape)

