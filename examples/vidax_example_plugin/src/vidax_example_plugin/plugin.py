"""The example family's hook implementations. vidax finds this module through the entry point

    [project.entry-points.vidax]
    example = "vidax_example_plugin.plugin"

Every per-model hook receives the model's ``ModelSpec`` first and returns None for models of other families, so
this plugin coexists with vidax-wan and any other family. Heavy imports (jax, flax, the model code) happen inside
the hooks, so ``vidax list-models`` stays fast.
"""

from __future__ import annotations

from vidax_core.errors import UserError
from vidax_core.hookspecs import hookimpl
from vidax_core.registry import ModelSpec

FAMILY = "example"
SPATIAL_MULTIPLE = 4  # VAE upsampling (2) x DiT patch size (2)
MAX_TOKENS = 4096  # full attention over all video tokens: keep the toy small


def _ours(spec: ModelSpec) -> bool:
    return spec.family == FAMILY


# ---- 1. models -------------------------------------------------------------------------------------------------


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
        )
    )


# ---- 2. the denoiser -------------------------------------------------------------------------------------------


@hookimpl
def build_dit(spec, ckpt, run):
    if not _ours(spec):
        return None
    import jax.numpy as jnp
    from flax import nnx

    from vidax_core.model_api import DitBuild

    from .dit import ExampleDiT, ExampleDiTConfig

    dtype = {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float16": jnp.float16}[run.model.dtype or "float32"]
    cfg = ExampleDiTConfig.from_config(ckpt.config("transformer"), dtype=dtype)
    latent_channels = ckpt.config("vae").get("latent_channels")
    if latent_channels != cfg.in_channels:
        raise UserError(
            f"checkpoint {ckpt.source}: transformer/config.json has in_channels={cfg.in_channels} but "
            f"vae/config.json has latent_channels={latent_channels}; the two components do not belong together"
        )
    return DitBuild(
        ctor=lambda: ExampleDiT(cfg, rngs=nnx.Rngs(0)),  # built under nnx.eval_shape first: costs no memory
        config=cfg,
        in_channels=cfg.in_channels,
        component="transformer",  # the checkpoint folder convert_checkpoint receives
        param_dtype=dtype,
        # read by the parallel checks before any weight loads (tp | heads, sp | tokens, offload chunking)
        heads=cfg.num_heads,
        patch_size=(1, cfg.patch_size, cfg.patch_size),
        block_counts={"blocks": cfg.num_layers},
    )


@hookimpl
def convert_checkpoint(spec, component, tensors, abstract):
    if not _ours(spec) or component != "transformer":
        return None
    from vidax_core.io.convert import convert

    from .dit import DIT_RULES

    return convert(tensors, DIT_RULES, abstract, component=component)


@hookimpl
def shard_rules(spec):
    if not _ours(spec):
        return None
    from .dit import EMBED, HEADS, LAYERS, MLP

    # Megatron-style tensor parallelism: attention heads and MLP hidden split over 'tp', the rest replicated.
    return [(EMBED, None), (HEADS, "tp"), (MLP, "tp"), (LAYERS, None)]


@hookimpl
def offload_block_groups(spec, model):
    if not _ours(spec):
        return None
    return ["blocks"]


# ---- 3. the prompt encoder -------------------------------------------------------------------------------------


@hookimpl
def build_text_encoder(spec, ckpt, run):
    if not _ours(spec):
        return None
    from .text import ByteTextEncoder

    return ByteTextEncoder.load(ckpt.config("text_encoder"), ckpt.tensors("text_encoder"))


@hookimpl
def encode_prompt(spec, encoder, prompts, run):
    if not _ours(spec):
        return None
    return encoder(prompts, run.sampling.max_sequence_length)


# ---- 4. the VAE ------------------------------------------------------------------------------------------------


@hookimpl
def build_vae(spec, ckpt, run):
    if not _ours(spec):
        return None
    from .vae import UpsampleVAE

    return UpsampleVAE(ckpt.config("vae"), ckpt.tensors("vae"))


# ---- 5. a checkpoint that ships with the plugin ------------------------------------------------------------------


@hookimpl
def builtin_checkpoint(spec, name):
    if not _ours(spec):
        return None
    from .tiny import builtin_folder

    return builtin_folder(name)


# ---- 6. checking a run before any heavy work ---------------------------------------------------------------------


@hookimpl
def check_run(spec, run):
    if not _ours(spec):
        return None
    s, m = run.sampling, SPATIAL_MULTIPLE
    problems = []
    for key in ("height", "width"):
        value = getattr(s, key)
        if value % m:
            problems.append(f"sampling.{key} must be a multiple of {m} for {spec.id}, got {value}: use {max(m, value // m * m)}")
    tokens = s.num_frames * (s.height // m) * (s.width // m)
    if not problems and tokens > MAX_TOKENS:
        problems.append(
            f"{spec.id} attends over all {tokens} video tokens (num_frames x height/{m} x width/{m}); "
            f"the toy allows {MAX_TOKENS}: lower sampling.num_frames, height or width"
        )
    return problems
