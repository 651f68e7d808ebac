"""The Wan family's hook implementations: vidax's core finds this module through the ``vidax`` entry point."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from flax import nnx

from vidax_core.io.convert import convert
from vidax_core.hookspecs import hookimpl
from vidax_core.model_api import DitBuild, dit_weight_dtype
from vidax_core.registry import ModelSpec

from . import presets
from .flops import counter as _flops

FAMILY = "wan"
SPATIAL_FACTOR = 8  # VAE spatial compression
TEMPORAL_FACTOR = 4  # VAE temporal compression




@hookimpl
def register_models(register):
    for m in presets.MODELS:
        register(ModelSpec(family=FAMILY, checkpoint_formats=("diffusers", "wan-original"), **m))


@hookimpl
def build_dit(spec, ckpt, run):
    from .dit import WanDiT, WanDiTConfig

    def one(component: str, **expert) -> DitBuild:
        cfg = WanDiTConfig.from_config({**ckpt.config(component), "dtype": dit_weight_dtype(run)})
        return DitBuild(ctor=lambda: WanDiT(cfg, rngs=nnx.Rngs(0)), config=cfg, in_channels=cfg.out_channels,
                        component=component, param_dtype=cfg.dtype, heads=cfg.num_attention_heads,
                        patch_size=cfg.patch_size, block_counts={"blocks": cfg.num_layers}, flops=_flops(cfg), **expert)

    if not _has_component(ckpt, "transformer_2"):
        return one("transformer")
    # Wan2.2 A14B: the high-noise expert runs while t >= boundary, then the low-noise expert.
    boundary = _boundary(ckpt)
    return [one("transformer", t_min=boundary), one("transformer_2", t_max=boundary)]


def _boundary(ckpt) -> float:
    return float(ckpt.model_index.get("boundary_ratio") or 0.875) * _train_timesteps(ckpt)


@hookimpl
def guidance(spec, ckpt, run):
    """Classifier-free guidance; with two experts (Wan2.2 A14B) the low-noise expert's steps use
    ``sampling.guidance_scale_2`` (the reference's ``guidance_scale_2``; null = guidance_scale)."""
    from vidax_core.guidance import ClassifierFree, NoGuidance

    s = run.sampling
    g, g2 = float(s.guidance_scale), float(s.guidance_scale if s.guidance_scale_2 is None else s.guidance_scale_2)
    if g <= 1.0:  # the reference decides CFG from guidance_scale alone
        return NoGuidance()
    if not _has_component(ckpt, "transformer_2"):
        return ClassifierFree(scale=g)
    boundary = _boundary(ckpt)
    return ClassifierFree(scale=lambda t: g if t >= boundary else g2)


def _has_component(ckpt, name: str) -> bool:
    entry = ckpt.model_index.get(name)
    return ckpt.has(name) and not (isinstance(entry, list) and entry[0] is None)


def _train_timesteps(ckpt) -> float:
    return float(ckpt.config("scheduler").get("num_train_timesteps", 1000))


# Logical axis -> mesh axis. Megatron TP: q/k/v, FFN-up kernels are (embed, heads|mlp) -> column-parallel; the
# attention-out and FFN-down kernels are (heads|mlp, embed) -> row-parallel; model width stays replicated.
# Activations: batch over dp (the two CFG halves), video tokens over sp.
WAN_SHARD_RULES = (
    ("embed", None),
    ("heads", "tp"),
    ("mlp", "tp"),
    ("layers", None),
    ("batch", "dp"),
    ("seq", "sp"),
)


@hookimpl
def shard_rules(spec):
    return WAN_SHARD_RULES


@hookimpl
def offload_block_groups(spec, model):
    return ["blocks"]


@hookimpl
def convert_checkpoint(spec, component, tensors, abstract):
    if component not in ("transformer", "transformer_2"):
        return None
    from .convert_dit import DIT_IGNORE, DIT_RULES

    return convert(tensors, DIT_RULES, abstract, component=component, ignore=DIT_IGNORE)


@hookimpl
def check_run(spec, run):
    s = run.sampling
    problems = []
    if (s.num_frames - 1) % TEMPORAL_FACTOR:
        k = max(round((s.num_frames - 1) / TEMPORAL_FACTOR), 0)
        problems.append(
            f"sampling.num_frames must be 4k+1 for Wan (the VAE compresses time by 4), got {s.num_frames}: use {4 * k + 1}"
        )
    multiple = presets.spatial_multiple(spec.id)  # VAE factor x DiT patch size
    for key in ("height", "width"):
        v = getattr(s, key)
        if v % multiple:
            problems.append(f"sampling.{key} must be a multiple of {multiple} for {spec.id}, got {v}: use {max(multiple, v // multiple * multiple)}")
    if run.image is None and "t2v" not in spec.tasks and "ti2v" not in spec.tasks:
        problems.append(f"{spec.id} is an image-to-video model: set image: <path to a png or jpg>")
    return problems


def _basic_clean(text: str) -> str:
    return html.unescape(html.unescape(text)).strip()


def prompt_clean(text: str) -> str:
    """The reference pipeline's prompt cleaning (HTML unescape twice, collapse whitespace)."""
    return re.sub(r"\s+", " ", _basic_clean(text)).strip()


@dataclass
class WanTextEncoder:
    tokenizer: Any
    encoder: Any
    encode_fn: Callable


@hookimpl
def build_text_encoder(spec, ckpt, run, mesh):
    """UMT5-XXL in fp32 (the reference's precision), tensor-parallel over the run's ``tp`` axis when tp > 1."""
    from vidax_core.encoders.t5 import T5Config, encode_text, load_t5
    from vidax_core.encoders.tokenizer import TextTokenizer

    tok = TextTokenizer.from_dir(ckpt.require("tokenizer"))
    cfg = T5Config.from_config({"model_type": "umt5", **ckpt.config("text_encoder")})
    enc = load_t5(cfg, ckpt.tensors("text_encoder"), mesh=mesh)
    return WanTextEncoder(tok, enc, encode_text)


@hookimpl
def encode_prompt(spec, encoder, prompts, run):
    max_len = run.sampling.max_sequence_length
    ids, mask = encoder.tokenizer([prompt_clean(p) for p in prompts], max_len)
    return np.asarray(encoder.encode_fn(encoder.encoder, ids, mask, max_len), np.float32)


@hookimpl
def build_vae(spec, ckpt, run):
    from vidax_core.vae.wan_video import load_wan_autoencoder

    return load_wan_autoencoder(ckpt.config("vae"), ckpt.tensors("vae"), with_encoder=run.image is not None)


@hookimpl
def prepare_conditioning(spec, ckpt, run, vae, latent_shape):
    if run.image is None:
        return None
    from . import conditioning
    from .dit import WanDiTConfig

    dit_cfg = WanDiTConfig.from_config(ckpt.config("transformer"))
    clip = processor = None
    if dit_cfg.image_dim is not None:  # Wan2.1 I2V: CLIP image tokens for the extra cross-attention
        from vidax_core.encoders.clip_vision import CLIPVisionConfig, load_clip_vision

        clip = load_clip_vision(CLIPVisionConfig.from_config(ckpt.config("image_encoder")), ckpt.tensors("image_encoder"))
        processor = ckpt.config("image_processor")
    return conditioning.prepare(run, vae, latent_shape, dit_cfg, ckpt.model_index, clip, processor)


@hookimpl
def open_checkpoint(spec, path):
    """A folder of the original Wan-AI release files (config.json, Wan2.x_VAE.pth, the UMT5 .pth...)."""
    from .original_format import open_original

    return open_original(spec, path)


@hookimpl
def builtin_checkpoint(spec, name):
    from vidax_core.io.builtin import packaged_checkpoint

    return packaged_checkpoint(__file__, name)


@hookimpl
def bench_reference(spec, engine, ckpt_dir, run):
    """``vidax bench --reference diffusers``: the same run with diffusers' WanPipeline (text-to-video)."""
    if engine != "diffusers":
        return None
    from .bench_reference import WanDiffusersReference

    return WanDiffusersReference(ckpt_dir, run)


@hookimpl
def bench_dit(spec, need_reference, config):
    """``vidax bench --dit-only``: a Wan DiT (the checkpoint's architecture, default Wan2.1-1.3B's) in vidax and
    diffusers, and the Wan2.1 VAE."""
    from .bench_reference import WanDitBench

    return WanDitBench(need_reference, config)


@hookimpl
def vae_latent_shape(spec, ckpt, run):
    """The latent grid from vae/config.json alone, through the same code as the loaded VAE."""
    if not ckpt.has("vae"):
        return None
    from types import SimpleNamespace

    from vidax_core.vae.wan21 import WanVAEConfig
    from vidax_core.vae.wan_video import WanVideoAutoencoder

    s = run.sampling
    shell = WanVideoAutoencoder(SimpleNamespace(cfg=WanVAEConfig.from_config(ckpt.config("vae"))))
    return shell.latent_shape(s.num_frames, s.height, s.width)


@hookimpl
def check_checkpoint(spec, ckpt, run):
    """Does the checkpoint fit this model id? Read from its config files only, before any weight loads."""
    from vidax_core.config.arch import SOURCE_KEY
    from vidax_core.errors import UserError
    from vidax_core.vae.wan21 import WanVAEConfig

    from .dit import WanDiTConfig

    problems: list[str] = []

    def read(component: str, build: Callable[[dict], Any]) -> tuple[Any, str]:
        raw = ckpt.config(component)
        where = str(raw.get(SOURCE_KEY) or f"{component}/config.json")
        try:
            return build(raw), where
        except UserError as exc:
            problems.append(str(exc))
        except Exception as exc:  # noqa: BLE001 - a config value the config class could not take
            problems.append(f"{where}: unusable value ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})")
        return None, where

    dits = [c for c in ("transformer", "transformer_2") if c == "transformer" or _has_component(ckpt, c)]
    vae, vae_file = read("vae", WanVAEConfig.from_config) if ckpt.has("vae") else (None, "")
    image_model = "i2v" in spec.tasks and "t2v" not in spec.tasks
    for component in dits:
        dit, where = read(component, WanDiTConfig.from_config)
        if dit is None:
            continue
        if image_model and dit.in_channels <= dit.out_channels:
            problems.append(
                f"{where}: in_channels={dit.in_channels} is a text-to-video denoiser, but {spec.id} is image-to-video "
                f"(it needs the noise, mask and image latents: in_channels > out_channels): use a {spec.id} checkpoint "
                "or a text-to-video model id"
            )
        elif not image_model and dit.in_channels != dit.out_channels:
            problems.append(
                f"{where}: in_channels={dit.in_channels} differs from out_channels={dit.out_channels} (an image-to-video "
                f"denoiser), but {spec.id} feeds it only the noisy latents: use a {spec.id} checkpoint or an "
                "image-to-video model id"
            )
        if dit.attention_head_dim < 6 or dit.attention_head_dim % 2:
            problems.append(f"{where}: attention_head_dim must be an even number of at least 6 (rotary embedding), "
                            f"got {dit.attention_head_dim}")
        if vae is not None and dit.out_channels != vae.z_dim:
            problems.append(f"{where}: out_channels={dit.out_channels} does not match z_dim={vae.z_dim} of {vae_file}")
    if vae is not None:
        for key in ("latents_mean", "latents_std"):
            n = len(getattr(vae, key))
            if n != vae.z_dim:
                problems.append(f"{vae_file}: {key} has {n} entries, z_dim is {vae.z_dim}: they must agree")
        if any(not s > 0 for s in vae.latents_std):
            problems.append(f"{vae_file}: latents_std must be positive numbers")
    return problems
