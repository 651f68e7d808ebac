"""The Cosmos family's hook implementations: vidax's core finds this module through the ``vidax`` entry point.

Run semantics are those of diffusers' ``Cosmos2_5_PredictBasePipeline``: text-to-world, image-to-world (``image:``)
and video-to-world (``video:``) through one step (:mod:`vidax_cosmos.conditioning`), Cosmos-Reason1 prompt
embeddings (:mod:`vidax_cosmos.text`), guidance ``cond + g * (cond - uncond)``, the checkpoint's UniPC sampler
(karras flow sigmas) with the DiT fed sigma per latent frame, the Wan2.1 VAE.
"""

from __future__ import annotations

from flax import nnx

from vidax_core.hookspecs import hookimpl
from vidax_core.model_api import DitBuild, dit_weight_dtype
from vidax_core.registry import ModelSpec

from . import presets
from .flops import counter as _flops

FAMILY = "cosmos"




@hookimpl
def register_models(register):
    for m in presets.MODELS:
        register(ModelSpec(family=FAMILY, checkpoint_formats=("diffusers", "cosmos-original"), options=presets.OPTIONS,
                           **m))


def _dit_config(ckpt, **overrides):
    from .dit import CosmosDiTConfig

    return CosmosDiTConfig.from_config(ckpt.config("transformer"), **overrides)


@hookimpl
def build_dit(spec, ckpt, run):
    from .dit import CosmosDiT

    cfg = _dit_config(ckpt, dtype=dit_weight_dtype(run))
    return DitBuild(ctor=lambda: CosmosDiT(cfg, rngs=nnx.Rngs(0)), config=cfg, in_channels=cfg.out_channels,
                    param_dtype=cfg.dtype, heads=cfg.num_attention_heads, patch_size=cfg.patch_size,
                    block_counts={"blocks": cfg.num_layers}, flops=_flops(cfg))


# Megatron TP over heads / MLP width; batch over dp; video tokens over sp.
COSMOS_SHARD_RULES = (("embed", None), ("heads", "tp"), ("mlp", "tp"), ("layers", None), ("batch", "dp"),
                      ("seq", "sp"))


@hookimpl
def shard_rules(spec):
    return COSMOS_SHARD_RULES


@hookimpl
def offload_block_groups(spec, model):
    return ["blocks"]


@hookimpl
def convert_checkpoint(spec, component, tensors, abstract):
    if component != "transformer":
        return None
    from vidax_core.io.convert import convert

    from .convert_dit import DIT_RULES

    return convert(tensors, DIT_RULES, abstract, component="Cosmos DiT (transformer)")


@hookimpl
def guidance(spec, ckpt, run):
    """``cond + g * (cond - uncond)`` when guidance_scale > 1 (the pipeline's formula), else one pass."""
    from vidax_core.guidance import ClassifierFree, NoGuidance

    g = float(run.sampling.guidance_scale)
    return ClassifierFree(scale=g, formula="cond") if g > 1.0 else NoGuidance()


@hookimpl
def check_run(spec, run):
    s = run.sampling
    problems = []
    if (s.num_frames - 1) % 4:
        k = max(round((s.num_frames - 1) / 4), 0)
        problems.append(f"sampling.num_frames must be 4k+1 for Cosmos-Predict2.5 (the VAE compresses time by 4), "
                        f"got {s.num_frames}: use {4 * k + 1}")
    for key in ("height", "width"):
        v = getattr(s, key)
        if v % 16:
            problems.append(f"sampling.{key} must be a multiple of 16 for {spec.id} (VAE factor 8 x patch 2), got {v}: "
                            f"use {max(16, v // 16 * 16)}")
    if run.image is not None and run.video is not None:
        problems.append(f"{spec.id} conditions on an image OR a video: set only one of image: and video:")
    o = run.options
    n = o.get("num_latent_conditional_frames")
    if n is not None and int(n) not in (1, 2):
        problems.append(f"options.num_latent_conditional_frames must be 1 or 2, got {n}")
    elif run.video is not None:
        latent_frames = (s.num_frames - 1) // 4 + 1
        if int(n or 2) >= latent_frames:
            problems.append(f"video-to-world with num_latent_conditional_frames={int(n or 2)} needs more latent "
                            f"frames than that: sampling.num_frames={s.num_frames} gives {latent_frames}; use at "
                            f"least {4 * int(n or 2) + 1}")
    cft = o.get("conditional_frame_timestep")
    if cft is not None and not float(cft) <= 1.0:
        problems.append(f"options.conditional_frame_timestep must be at most 1 (a sigma; negative = none), got {cft}")
    if s.max_sequence_length < 16:
        problems.append(f"sampling.max_sequence_length={s.max_sequence_length} cannot hold the chat template: "
                        "use 512 (the pipeline's)")
    return problems


@hookimpl
def build_text_encoder(spec, ckpt, run, mesh):
    """Cosmos-Reason1 (Qwen2.5-VL text tower) in the run's weight dtype, tensor-parallel over tp when tp > 1."""
    from . import text

    return text.load(ckpt.require("tokenizer"), ckpt.config("text_encoder"), ckpt.tensors("text_encoder"),
                     dtype=dit_weight_dtype(run), mesh=mesh)


@hookimpl
def encode_prompt(spec, encoder, prompts, run):
    from . import text

    return text.encode(encoder, prompts, int(run.sampling.max_sequence_length))


@hookimpl
def build_vae(spec, ckpt, run):
    from vidax_core.vae.wan_video import load_wan_autoencoder

    with_encoder = run.image is not None or run.video is not None
    return load_wan_autoencoder(ckpt.config("vae"), ckpt.tensors("vae"), with_encoder=with_encoder)


@hookimpl
def vae_latent_shape(spec, ckpt, run):
    if not ckpt.has("vae"):
        return None
    from vidax_core.vae.wan_video import latent_grid

    s = run.sampling
    return latent_grid(ckpt.config("vae"), s.num_frames, s.height, s.width)


@hookimpl
def prepare_conditioning(spec, ckpt, run, vae, latent_shape):
    from .conditioning import prepare

    return prepare(run, vae, latent_shape, _dit_config(ckpt).out_channels)


@hookimpl
def open_checkpoint(spec, path):
    """A folder with the original release's DiT ``*.pt`` (keys ``net.*``) next to diffusers-layout components."""
    from .original_format import open_original

    return open_original(spec, path)


@hookimpl
def bench_reference(spec, engine, ckpt_dir, run):
    """``vidax bench --reference diffusers``: the same text-to-world run with Cosmos2_5_PredictBasePipeline."""
    if engine != "diffusers":
        return None
    from .bench_reference import CosmosDiffusersReference

    return CosmosDiffusersReference(ckpt_dir, run)


@hookimpl
def builtin_checkpoint(spec, name):
    from vidax_core.io.builtin import packaged_checkpoint

    return packaged_checkpoint(__file__, name)


@hookimpl
def check_checkpoint(spec, ckpt, run):
    """The DiT config must be a Cosmos-Predict2.5 one and fit the VAE; read from config files only."""
    problems: list[str] = []
    try:
        dit = _dit_config(ckpt)
    except Exception as exc:  # noqa: BLE001 - a config value the config class could not take
        return [f"transformer/config.json: unusable ({' '.join(str(exc).split())[:160]})"]
    where = "transformer/config.json"
    if dit.extra_pos_embed_type is not None:
        problems.append(f"{where}: extra_pos_embed_type={dit.extra_pos_embed_type!r} is a Cosmos-1.0 model; "
                        f"{spec.id} needs null")
    if dit.img_context_dim_in or dit.controlnet_block_every_n:
        problems.append(f"{where}: image context / ControlNet inputs (Cosmos-Transfer2.5) are not supported by "
                        f"{spec.id}")
    if dit.in_channels != dit.out_channels + 1:
        problems.append(f"{where}: in_channels={dit.in_channels} must be out_channels + 1 (the condition mask) "
                        f"for Cosmos-Predict2.5, out_channels is {dit.out_channels}")
    if dit.patch_size[0] != 1:
        problems.append(f"{where}: patch_size[0]={dit.patch_size[0]}: per-frame timesteps need 1")
    if ckpt.has("vae"):
        z = ckpt.config("vae").get("z_dim", 16)
        if dit.out_channels != z:
            problems.append(f"{where}: out_channels={dit.out_channels} does not match z_dim={z} of vae/config.json")
    if ckpt.has("text_encoder") and dit.use_crossattn_projection:
        te = ckpt.config("text_encoder")
        tc = te.get("text_config") if isinstance(te.get("text_config"), dict) else te
        try:
            width = int(tc["hidden_size"]) * int(tc["num_hidden_layers"])
        except (KeyError, TypeError, ValueError):
            width = None
        if width is not None and width != dit.crossattn_proj_in_channels:
            problems.append(f"{where}: crossattn_proj_in_channels={dit.crossattn_proj_in_channels} must equal the "
                            f"text encoder's hidden_size x num_hidden_layers = {width} (text_encoder/config.json)")
    return problems
