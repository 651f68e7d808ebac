"""The example family's hook implementations; vidax finds this module through the entry point

    [project.entry-points.vidax]
    example = "vidax_example_plugin.plugin"

vidax calls each per-model hook only on the plugin that registered the model, so no hook checks whose model it
is. The module's top level imports only vidax_core (lazy) and the standard library: `vidax list-models` imports
every plugin, so jax, flax and the model code are imported inside the hooks that need them.
"""

from __future__ import annotations

import sys

from vidax_core import ModelSpec, Option, hookimpl

from . import __version__

FAMILY = "example"
SPATIAL_MULTIPLE = 4  # VAE upsampling (2) x DiT patch size (2)
MAX_TOKENS = 4096  # full attention over all video tokens: keep the toy small


@hookimpl
def register_models(register):
    register(
        ModelSpec(
            id="example-tiny",
            family=FAMILY,
            tasks=("t2v",),
            checkpoint_formats=("diffusers",),
            description="toy text-to-video family from docs/writing-a-plugin.md (random weights: builtin:tiny)",
            preset={
                "model": {"checkpoint": "builtin:tiny"},
                "negative_prompt": "",
                "sampling": {"num_steps": 8, "guidance_scale": 3.0, "height": 64, "width": 64, "num_frames": 8,
                             "max_sequence_length": 32},
                "output": {"fps": 8},
            },
            options={
                "guidance_rescale": Option(0.0, float, "rescale the guided prediction towards the conditional "
                                                       "one's spread (diffusers' guidance_rescale); 0 = off"),
            },
        )
    )


def register(plugins) -> None:
    """Add these hooks to a vidax plugin manager by hand, as the entry point does once the distribution is
    installed. The tests call it (through the test kit's ``plugin_modules``) to run from a source checkout."""
    if not plugins.pm.has_plugin("example"):
        plugins.add(sys.modules[__name__], "example", "vidax-example-plugin", __version__)


@hookimpl
def build_dit(spec, ckpt, run):
    import jax.numpy as jnp
    from flax import nnx

    from vidax_core import DitBuild

    from .dit import ExampleDiT, ExampleDiTConfig

    dtype = {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float16": jnp.float16}[run.model.dtype or "float32"]
    cfg = ExampleDiTConfig.from_config(ckpt.config("transformer"), dtype=dtype)
    return DitBuild(
        ctor=lambda: ExampleDiT(cfg, rngs=nnx.Rngs(0)),  # built under nnx.eval_shape first: costs no memory
        config=cfg,
        in_channels=cfg.in_channels,
        component="transformer",  # the checkpoint folder convert_checkpoint receives
        param_dtype=dtype,
        # read by the parallel checks before any weight loads (tp and sp divide heads, sp divides the tokens,
        # offload.chunk_size divides the blocks)
        heads=cfg.num_heads,
        patch_size=(1, cfg.patch_size, cfg.patch_size),
        block_counts={"blocks": cfg.num_layers},
    )


@hookimpl
def convert_checkpoint(spec, component, tensors, abstract):
    from vidax_core import convert

    from .dit import DIT_RULES

    return convert(tensors, DIT_RULES, abstract, component=component)


@hookimpl
def check_checkpoint(spec, ckpt, run):
    dit, vae = ckpt.config("transformer"), ckpt.config("vae")
    problems = []
    if dit.get("in_channels") != vae.get("latent_channels"):
        problems.append(f"transformer/config.json: in_channels={dit.get('in_channels')} differs from "
                        f"latent_channels={vae.get('latent_channels')} of vae/config.json: the two components do "
                        "not belong together")
    if dit.get("hidden_dim", 0) % max(dit.get("num_heads", 1), 1):
        problems.append(f"transformer/config.json: hidden_dim={dit.get('hidden_dim')} is not divisible by "
                        f"num_heads={dit.get('num_heads')}")
    return problems


@hookimpl
def shard_rules(spec):
    # Megatron tensor parallelism: attention heads and MLP hidden split over tp, the model width replicated;
    # the two guidance branches (batch) over dp, the video tokens (seq) over sp.
    return [("embed", None), ("heads", "tp"), ("mlp", "tp"), ("layers", None), ("batch", "dp"), ("seq", "sp")]


@hookimpl
def offload_block_groups(spec, model, run):
    return ["blocks"]


@hookimpl
def build_text_encoder(spec, ckpt, run, mesh):
    from .text import ByteTextEncoder

    return ByteTextEncoder.load(ckpt.config("text_encoder"), ckpt.tensors("text_encoder"))


@hookimpl
def encode_prompt(spec, encoder, prompts, run):
    # prompts is [prompt, negative_prompt] under classifier-free guidance, [prompt] without it
    return encoder(prompts, run.sampling.max_sequence_length)


@hookimpl
def build_vae(spec, ckpt, run):
    from .vae import UpsampleVAE

    return UpsampleVAE(ckpt.config("vae"), ckpt.tensors("vae"))


@hookimpl
def vae_latent_shape(spec, ckpt, run):
    from .vae import latent_shape

    s = run.sampling
    return latent_shape(ckpt.config("vae"), s.num_frames, s.height, s.width)


@hookimpl
def guidance(spec, ckpt, run):
    from vidax_core import ClassifierFree, NoGuidance

    scale = float(run.sampling.guidance_scale)
    if scale <= 1.0:
        return NoGuidance()
    return ClassifierFree(scale=scale, rescale_phi=float(run.options["guidance_rescale"]))


@hookimpl
def builtin_checkpoint(spec, name):
    from .tiny import builtin_folder

    return builtin_folder(name)


@hookimpl
def check_run(spec, run):
    s, m = run.sampling, SPATIAL_MULTIPLE
    problems = []
    for key in ("height", "width"):
        value = getattr(s, key)
        if value % m:
            problems.append(f"sampling.{key} must be a multiple of {m} for {spec.id}, got {value}: "
                            f"use {max(m, value // m * m)}")
    tokens = s.num_frames * (s.height // m) * (s.width // m)
    if not problems and tokens > MAX_TOKENS:
        problems.append(f"{spec.id} attends over all {tokens} video tokens (num_frames x height/{m} x width/{m}); "
                        f"the toy allows {MAX_TOKENS}: lower sampling.num_frames, height or width")
    return problems
