"""The LTX-Video family's plugin object: vidax's core finds :class:`LTXPlugin` through the ``vidax`` entry point.

Two run semantics (``options.pipeline``, :mod:`vidax_ltx.recipe`): ``condition``, diffusers' LTXConditionPipeline
(:mod:`vidax_ltx.condition`; the presets, and with ``options.multiscale`` the official two-pass recipe,
:mod:`vidax_ltx.multiscale`), and ``ltx``, LTXPipeline (text-to-video) / LTXImageToVideoPipeline (``image:`` given)
with packed latents (B, F*H*W, 128) and the checkpoint's dynamic shift from the token count
(:mod:`vidax_ltx.conditioning`). Both: T5 v1.1 text with its attention mask, flow Euler (or ``options.timesteps``),
classifier-free guidance with optional rescale, RoPE scaled by ``options.frame_rate``, and a timestep-conditioned
VAE decode. Registering imports no JAX.
"""

from __future__ import annotations

from vidax_core import FamilyPlugin, dit_weight_dtype
from vidax_core.cache.layout import CacheLayout

from . import presets
from .recipe import uses_condition_pipeline


class LTXPlugin(FamilyPlugin):
    family = "ltx"
    models = presets.MODELS
    options = presets.OPTIONS
    checkpoint_formats = ("diffusers", "ltx-original")
    diffusers_reference = ".bench_reference:LTXDiffusersReference"
    dit_config_class = ".dit:LTXDiTConfig"
    dit_class = ".dit:LTXDiT"
    dit_flops = ".flops:counter"
    dit_example_inputs = ".dit:example_inputs"
    dit_rules = ".convert_dit:DIT_RULES"
    checks = ".checks"
    # a folder with an original LTX-Video release file (DiT + VAE, config in its metadata) and the T5 folders
    original_format = ".original_format:open_original"
    # LTXPipeline runs both guidance branches as one batched call in one cache context ("cond_uncond")
    cache_layout = CacheLayout(contexts="call")

    def lora_key_map(self, spec, layout):
        """``diffusion_model.``-prefixed LoRAs (LTX-Video): the original release's renames (``patchify_proj`` ->
        ``proj_in``, ``adaln_single`` -> ``time_embed``, ``q_norm`` -> ``norm_q``); diffusers names pass unchanged."""
        if layout != "original":
            return None
        from .original_format import dit_key

        return dit_key

    def build_dit(self, spec, ckpt, run):
        """The default build, its latents packed (B, F*H*W, C) as LTXPipeline holds them; LTXConditionPipeline
        takes and returns unpacked latents (B, C, F, H, W), the core's default layout."""
        cfg = self.dit_config(ckpt, dtype=dit_weight_dtype(run))
        p, pt = cfg.patch_size, cfg.patch_size_t

        def packed(batch, grid):
            f, h, w = grid
            return (batch, (f // pt) * (h // p) * (w // p), cfg.in_channels)

        return self.dit_build(cfg, latent_shapes=None if uses_condition_pipeline(run) else packed)

    def guidance(self, spec, ckpt, run):
        """Classifier-free guidance with rescale (LTXPipeline); with ``options.guidance_timesteps`` the dev
        recipe's per-step guidance + spatio-temporal guidance lists (:mod:`vidax_ltx.stg`)."""
        from vidax_core import default_guidance

        o = run.options
        if o.get("guidance_timesteps") is not None:
            from .stg import per_step_guidance

            return per_step_guidance(o, self.dit_config(ckpt).num_layers)
        return default_guidance(run, rescale_phi=float(o.get("guidance_rescale") or 0.0))

    def sampling_plan(self, spec, ckpt, run, sampler, latent_shape):
        """The pipeline's timesteps or sigmas (and LTXPipeline's ``mu``): :func:`vidax_ltx.recipe.sampling_plan`."""
        from .recipe import sampling_plan

        return sampling_plan(run, sampler, latent_shape)

    def sampling_passes(self, spec, ckpt, run):
        """``options.multiscale``: the official recipe's two passes around the latent upscaler."""
        if not run.options.get("multiscale"):
            return None
        from .multiscale import passes

        return passes(ckpt, run)

    def build_text_encoder(self, spec, ckpt, run, mesh):
        """T5 v1.1 XXL in the run's encoder dtype, tensor-parallel over the run's ``tp`` axis when tp > 1."""
        from vidax_core import load_t5_text

        return load_t5_text(ckpt, mesh)

    def encode_prompt(self, spec, encoder, prompts, run):
        """As ``LTXPipeline._get_t5_prompt_embeds``: padded to ``max_sequence_length``, encoded WITHOUT the mask;
        the mask goes to the DiT's cross-attention."""
        from vidax_core import encode_unmasked

        hidden, mask = encode_unmasked(encoder, prompts, run.sampling.max_sequence_length)
        return {"hidden": hidden, "mask": mask}

    def vae_latent_shape(self, spec, ckpt, run):
        if not ckpt.has("vae"):
            return None
        from .autoencoder import latent_grid
        from .recipe import vae_factors

        t, sp = vae_factors(ckpt.config("vae"))
        s = run.sampling
        height, width = s.height, s.width
        if run.options.get("multiscale"):  # the larger, second pass
            from .multiscale import pass_sizes

            height, width = pass_sizes(s.height, s.width, float(run.options["downscale_factor"]), sp)[1]
        return latent_grid(s.num_frames, height, width, t, sp)

    def build_vae(self, spec, ckpt, run):
        from .recipe import load_vae

        return load_vae(ckpt, run)

    def prepare_conditioning(self, spec, ckpt, run, vae, latent_shape):
        from . import condition, conditioning
        from .recipe import vae_factors

        prepare = condition.prepare if uses_condition_pipeline(run) else conditioning.prepare
        return prepare(run, vae, latent_shape, self.dit_config(ckpt), vae_factors(ckpt.config("vae")))

    def component_file(self, spec, component, tensors, published):
        """A ComfyUI ``checkpoints/ltxv-*.safetensors`` (or ``model.files``) release file: its DiT or its VAE."""
        from .original_format import read_component_file

        return read_component_file(component, tensors)
