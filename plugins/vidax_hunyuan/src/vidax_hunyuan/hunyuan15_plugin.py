"""The HunyuanVideo-1.5 plugin object (``hunyuanvideo-1.5-{t2v,i2v}-{480p,720p}``, the step-distilled 480p I2V
``hunyuanvideo-1.5-i2v-480p-step-distilled``): a
second entry point of this package, beside :class:`vidax_hunyuan.plugin.HunyuanPlugin` (1.0); the core hands each
id's hooks to the object that registered it.

Run semantics are those of diffusers' ``HunyuanVideo15Pipeline``: Qwen2.5-VL ``hidden_states[-3]`` of the chat
(cropped at 108) plus byT5 on the prompt's quoted text (:mod:`.hunyuan15_text`), real classifier-free guidance
from the checkpoint's guider config (:mod:`.hunyuan15_guidance`), flow Euler over sigmas
``linspace(1, 0, N + 1)[:-1]`` shifted by the checkpoint's scheduler, the DiT fed ``2 C + 1`` channels
(:mod:`.hunyuan15_conditioning`), the HunyuanVideo-1.5 VAE (:mod:`.vae15`). Registering imports no JAX.
"""

from __future__ import annotations

from vidax_core import FamilyPlugin, dit_weight_dtype

from . import hunyuan15_presets
from .plugin import HunyuanPlugin


def example_inputs(cfg, batch: int, grid, text: int):
    """``DitBuild.example_inputs``: the ``2 C + 1``-channel DiT input and the Qwen / byT5 contexts, plus what a real
    call of this config also gets (the call its FLOP count describes): the SigLIP image tokens of an
    image-to-video config and ``timestep_r`` of a meanflow one."""
    latents = ((batch, cfg.in_channels) + tuple(grid), cfg.dtype)
    context = {"hidden": ((batch, text, cfg.text_embed_dim), cfg.dtype), "mask": ((batch, text), "int32"),
               "hidden_2": ((batch, hunyuan15_presets.BYT5_LENGTH, cfg.text_embed_2_dim), cfg.dtype),
               "mask_2": ((batch, hunyuan15_presets.BYT5_LENGTH), "int32")}
    if cfg.task_type == "i2v":
        context["image"] = ((batch, hunyuan15_presets.IMAGE_TOKENS, cfg.image_embed_dim), cfg.dtype)
    return latents, context, ({"timestep_r": ((batch,), "float32")} if cfg.use_meanflow else {})


class Hunyuan15Plugin(FamilyPlugin):
    family = "hunyuan"
    models = hunyuan15_presets.MODELS
    checkpoint_formats = ("diffusers", "hunyuan15-release")
    diffusers_reference = ".hunyuan15_bench_reference:Hunyuan15DiffusersReference"
    dit_config_class = ".dit15:HunyuanDiT15Config"
    dit_class = ".dit15:HunyuanDiT15"
    dit_flops = ".flops:counter15"
    dit_example_inputs = ".hunyuan15_plugin:example_inputs"
    dit_rules = ".convert_dit15:DIT15_RULES"
    checks = ".hunyuan15_checks"
    # the original release folder (tencent/HunyuanVideo-1.5 plus the encoders its download notes add), or one of its
    # transformer/<variant>/ DiT folders
    original_format = ".release15:open_release"
    vae_latent_grid = ".vae15:latent_grid15"

    def shard_rules(self, spec):
        return (("mod", "tp"),)  # the blocks' modulation outputs split like the heads, as 1.0's

    def guidance(self, spec, ckpt, run):
        from .hunyuan15_guidance import guidance

        return guidance(ckpt, run)

    sampling_plan = HunyuanPlugin.sampling_plan  # the same sigmas as 1.0's pipeline

    def build_text_encoder(self, spec, ckpt, run, mesh):
        from . import hunyuan15_text

        return hunyuan15_text.load(ckpt, dtype=dit_weight_dtype(run), mesh=mesh, i2v="i2v" in spec.tasks)

    def encode_prompt(self, spec, encoder, prompts, run):
        from . import hunyuan15_text

        return hunyuan15_text.encode_for_run(encoder, prompts, run)

    def prepare_conditioning(self, spec, ckpt, run, vae, latent_shape):
        from . import hunyuan15_conditioning

        dit = self.dit_config(ckpt)
        if "i2v" not in spec.tasks:
            return hunyuan15_conditioning.text_to_video(dit.use_meanflow)
        return hunyuan15_conditioning.image_to_video(run, vae, dit.target_size, latent_shape, dit.use_meanflow)

    def builtin_checkpoint(self, spec, name):
        return super().builtin_checkpoint(spec, f"hunyuan15-{name}")  # a text-to-video pipeline

    def build_vae(self, spec, ckpt, run):
        from .vae15 import load_autoencoder15

        return load_autoencoder15(ckpt.config("vae"), ckpt.tensors("vae"), with_encoder="i2v" in spec.tasks)

    def component_file(self, spec, component, tensors, published):
        """A ComfyUI / release-named single file: the DiT or the VAE (:func:`.release15.read_component_file`)."""
        from .release15 import read_component_file

        return read_component_file(spec, component, tensors, published)
