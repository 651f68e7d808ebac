"""The example family's plugin object; vidax finds it through the entry point

    [project.entry-points.vidax]
    example = "vidax_example_plugin.plugin:ExamplePlugin"

It is one subclass of vidax_core.FamilyPlugin: every hook is a method that already has the core's default, and
the family overrides only what is its own. vidax calls a model's hooks only on the plugin that registered it, so
no method checks whose model it got. The top level imports only vidax_core (lazy) and the standard library:
`vidax list-models` imports every plugin, so jax, flax and the model code are imported inside the methods.
"""

from __future__ import annotations

from vidax_core import FamilyPlugin, Option

from . import __version__

SPATIAL_MULTIPLE = 4  # VAE upsampling (2) x DiT patch size (2)
MAX_TOKENS = 4096  # full attention over all video tokens: keep the toy small


class ExamplePlugin(FamilyPlugin):
    family = "example"
    models = [
        {
            "id": "example-tiny",
            "tasks": ("t2v",),
            "description": "toy text-to-video family from docs/writing-a-plugin.md (random weights: builtin:tiny)",
            "preset": {
                "model": {"checkpoint": "builtin:tiny"},
                "negative_prompt": "",
                "sampling": {"num_steps": 8, "guidance_scale": 3.0, "height": 64, "width": 64, "num_frames": 8,
                             "max_sequence_length": 32},
                "output": {"fps": 8},
            },
        }
    ]
    options = {
        "guidance_rescale": Option(0.0, float, "rescale the guided prediction towards the conditional one's "
                                               "spread (diffusers' guidance_rescale); 0 = off"),
    }


    def dit_config(self, ckpt, **overrides):
        from .dit import ExampleDiTConfig

        return ExampleDiTConfig.from_config(ckpt.config("transformer"), **overrides)

    def build_dit(self, spec, ckpt, run):
        from vidax_core import DitBuild, dit_weight_dtype

        from .dit import ExampleDiT

        cfg = self.dit_config(ckpt, dtype=dit_weight_dtype(run))  # model.dtype, or the policy: fp32 on CPU
        return DitBuild.of(
            ExampleDiT,  # ctor: ExampleDiT(cfg, rngs=nnx.Rngs(0)), built under nnx.eval_shape first (no memory)
            cfg,
            in_channels=cfg.in_channels,
            # read by the parallel checks before any weight loads (tp and sp divide heads, sp divides the tokens,
            # offload.chunk_size divides the blocks); block_counts also names the groups offload streams
            heads=cfg.num_heads,
            patch_size=(1, cfg.patch_size, cfg.patch_size),
            block_counts={"blocks": cfg.num_layers},
        )


    def conversion_rules(self, component):
        from .dit import DIT_RULES

        return DIT_RULES


    def check_checkpoint(self, spec, ckpt, run):
        problems = super().check_checkpoint(spec, ckpt, run)  # transformer/config.json parses (dit_config)
        dit, vae = ckpt.config("transformer"), ckpt.config("vae")
        if dit.get("in_channels") != vae.get("latent_channels"):
            problems.append(f"transformer/config.json: in_channels={dit.get('in_channels')} differs from "
                            f"latent_channels={vae.get('latent_channels')} of vae/config.json: the two components "
                            "do not belong together")
        if dit.get("hidden_dim", 0) % max(dit.get("num_heads", 1), 1):
            problems.append(f"transformer/config.json: hidden_dim={dit.get('hidden_dim')} is not divisible by "
                            f"num_heads={dit.get('num_heads')}")
        return problems


    def build_text_encoder(self, spec, ckpt, run, mesh):
        from .text import ByteTextEncoder

        return ByteTextEncoder.load(ckpt.config("text_encoder"), ckpt.tensors("text_encoder"))

    def encode_prompt(self, spec, encoder, prompts, run):
        # prompts is [prompt, negative_prompt] under classifier-free guidance, [prompt] without it
        return encoder(prompts, run.sampling.max_sequence_length)


    def build_vae(self, spec, ckpt, run):
        from .vae import UpsampleVAE

        return UpsampleVAE(ckpt.config("vae"), ckpt.tensors("vae"))

    vae_latent_grid = ".vae:latent_shape"  # vae_latent_shape calls it with (vae config, frames, height, width)


    def guidance(self, spec, ckpt, run):
        from vidax_core import default_guidance

        return default_guidance(run, rescale_phi=float(run.options["guidance_rescale"]))


    def builtin_checkpoint(self, spec, name):
        from .tiny import builtin_folder

        return builtin_folder(name)


    def check_run(self, spec, run):
        from vidax_core import size_problems

        s, m = run.sampling, SPATIAL_MULTIPLE
        problems = size_problems(s, m, spec.id)  # "sampling.height must be a multiple of 4 for example-tiny, ..."
        tokens = s.num_frames * (s.height // m) * (s.width // m)
        if not problems and tokens > MAX_TOKENS:
            problems.append(f"{spec.id} attends over all {tokens} video tokens (num_frames x height/{m} x "
                            f"width/{m}); the toy allows {MAX_TOKENS}: lower sampling.num_frames, height or width")
        return problems


def register(plugins) -> None:
    """Add the plugin object to a vidax plugin manager by hand, as the entry point does once the distribution is
    installed. The tests call it (through the test kit's ``plugin_modules``) to run from a source checkout."""
    if not plugins.pm.has_plugin("example"):
        plugins.add(ExamplePlugin(), "example", "vidax-example-plugin", __version__)
