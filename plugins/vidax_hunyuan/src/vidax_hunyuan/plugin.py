"""The HunyuanVideo family's plugin object: vidax's core finds :class:`HunyuanPlugin` through the ``vidax`` entry
point.

Run semantics are those of diffusers' ``HunyuanVideoPipeline``: Llama-3 ``hidden_states[-3]`` of the templated
prompt (cropped) plus the pooled CLIP-L text, embedded guidance (``guidance_scale * 1000`` is a model input, one
pass), real classifier-free guidance on top with ``options.true_cfg_scale`` > 1, flow Euler over sigmas
``linspace(1, 0, N + 1)[:-1]`` shifted by the checkpoint's scheduler (shift 7), and the HunyuanVideo VAE (in the
core, :mod:`vidax_core.vae.hunyuan`, since Kandinsky 5 decodes with it too).
Registering imports no JAX.
"""

from __future__ import annotations

from vidax_core import FamilyPlugin, dit_weight_dtype
from vidax_core.cache.layout import CacheLayout
from vidax_core.vae.hunyuan_hooks import HunyuanVAEHooks

from . import presets


class HunyuanPlugin(HunyuanVAEHooks, FamilyPlugin):
    family = "hunyuan"
    models = presets.MODELS
    checkpoint_formats = ("diffusers", "hunyuan-original")
    diffusers_reference = ".bench_reference:HunyuanDiffusersReference"
    dit_config_class = ".dit:HunyuanDiTConfig"
    dit_class = ".dit:HunyuanDiT"
    dit_flops = ".flops:counter"
    dit_example_inputs = ".dit:example_inputs"
    checks = ".checks"
    # the release folder: [hunyuan-video-t2v-720p/]transformers/mp_rank_00_model_states.pt and vae/pytorch_model.pt
    # beside text_encoder/ and text_encoder_2/
    original_format = ".original_format:open_original"
    # both block groups carry (video, text) tokens; the pipelines key "cond" / "uncond" cache contexts
    cache_layout = CacheLayout(hidden=0)

    def lora_key_map(self, spec, layout):
        """Original-name LoRAs (``diffusion_model.double_blocks.0.img_attn_qkv``...): the original checkpoint's own
        renames and splits (fused qkv and ``linear1`` split on the output rows, the final AdaLN's shift/scale swap)."""
        if layout != "original":
            return None
        from .original_format import OriginalDiT

        return OriginalDiT.lora_targets

    def shard_rules(self, spec):
        return (("mod", "tp"),)  # the blocks' modulation outputs split like the heads; the rest as the defaults

    def convert_checkpoint(self, spec, component, tensors, abstract, config):
        from .convert_dit import convert_dit

        return convert_dit(tensors, abstract) if component == "transformer" else None

    def guidance(self, spec, ckpt, run):
        """Embedded guidance (``guidance_scale * 1000`` into the model), plus real CFG when true_cfg_scale > 1."""
        from vidax_core import Embedded

        return Embedded(scale=float(run.sampling.guidance_scale), multiplier=1000.0,
                        true_cfg_scale=float(run.options.get("true_cfg_scale") or 1.0))

    def sampling_plan(self, spec, ckpt, run, sampler, latent_shape):
        """The pipeline's sigmas ``linspace(1, 0, N + 1)[:-1]`` (the scheduler shifts them)."""
        if getattr(sampler, "name", "") != "flow_euler":
            return None
        import numpy as np

        return {"sigmas": np.linspace(1.0, 0.0, int(run.sampling.num_steps) + 1)[:-1]}

    def build_text_encoder(self, spec, ckpt, run, mesh):
        """Llama-3 (tensor-parallel over tp when tp > 1) and CLIP-L text, in the run's weight dtype for Llama."""
        from . import text

        load = text.load_i2v if "i2v" in spec.tasks else text.load
        return load(ckpt, dtype=dit_weight_dtype(run), mesh=mesh)

    def encode_prompt(self, spec, encoder, prompts, run):
        from . import text

        return text.encode_for_run(encoder, prompts, run, "i2v" in spec.tasks)

    def prepare_conditioning(self, spec, ckpt, run, vae, latent_shape):
        from .conditioning import prepare

        return prepare(run, vae, latent_shape) if "i2v" in spec.tasks else None
