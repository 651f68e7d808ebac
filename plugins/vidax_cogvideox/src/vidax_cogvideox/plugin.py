"""The CogVideoX family's hook implementations: vidax's core finds this module through the ``vidax`` entry point.

Run semantics are those of diffusers' CogVideoXPipeline (text-to-video) and CogVideoXImageToVideoPipeline
(``image:`` given): latents (B, F, C, H, W) (1.5: F padded in front to the temporal patch), T5 v1.1 text in fp32
without a mask, the checkpoint's sampler (CogVideoX DDIM on the hub repos; CogVideoX DPM via
``sampling.scheduler``), classifier-free guidance with optional dynamic cosine scale (``options.use_dynamic_cfg``),
and the I2V first-frame latent concatenated on channels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from flax import nnx

from vidax_core.hookspecs import hookimpl
from vidax_core.model_api import DitBuild, dit_weight_dtype
from vidax_core.registry import ModelSpec

from . import presets
from .flops import counter as _flops

FAMILY = "cogvideox"
SPATIAL_FACTOR, TEMPORAL_FACTOR = 8, 4




def _is_i2v(spec) -> bool:
    return "i2v" in spec.tasks


@hookimpl
def register_models(register):
    for m in presets.MODELS:
        register(ModelSpec(family=FAMILY, checkpoint_formats=("diffusers",), options=presets.OPTIONS, **m))


def _dit_config(ckpt, **overrides):
    from .dit import CogVideoXDiTConfig

    return CogVideoXDiTConfig.from_config(ckpt.config("transformer"), **overrides)


@hookimpl
def build_dit(spec, ckpt, run):
    from .dit import CogVideoXDiT

    cfg = _dit_config(ckpt, dtype=dit_weight_dtype(run))

    def shapes(batch, grid):
        f, h, w = grid
        return (batch, f, cfg.out_channels, h, w)

    return DitBuild(ctor=lambda: CogVideoXDiT(cfg, rngs=nnx.Rngs(0)), config=cfg, in_channels=cfg.out_channels,
                    param_dtype=cfg.dtype, heads=cfg.num_attention_heads, patch_size=cfg.patch,
                    block_counts={"blocks": cfg.num_layers}, latent_shapes=shapes, flops=_flops(cfg))


# Megatron TP over heads / FFN width; batch over dp; video tokens over sp (text tokens replicated).
COGVIDEOX_SHARD_RULES = (("embed", None), ("heads", "tp"), ("mlp", "tp"), ("layers", None), ("batch", "dp"),
                         ("seq", "sp"))


@hookimpl
def shard_rules(spec):
    return COGVIDEOX_SHARD_RULES


@hookimpl
def offload_block_groups(spec, model):
    return ["blocks"]


@hookimpl
def convert_checkpoint(spec, component, tensors, abstract):
    if component != "transformer":
        return None
    from vidax_core.io.convert import convert

    from .convert_dit import DIT_RULES

    return convert(tensors, DIT_RULES, abstract, component="CogVideoX DiT (transformer)")


@hookimpl
def scheduler(spec, ckpt, run):
    """``options.scheduler_class``: the checkpoint's scheduler config read as that class (the official 5B demo's
    ``CogVideoXDPMScheduler.from_config(pipe.scheduler.config)``); None = the checkpoint's own class."""
    cls = run.options.get("scheduler_class")
    if not cls:
        return None
    from vidax_core.schedulers.base import sampler_from_scheduler_config

    return sampler_from_scheduler_config({**ckpt.config("scheduler"), "_class_name": cls})


def dynamic_scale(guidance_scale: float, num_steps: int):
    """The pipelines' ``use_dynamic_cfg`` scale as a function of the model timestep t (their formula verbatim:
    ``1 + g * (1 - cos(pi * ((N - t) / N) ** 5)) / 2``)."""
    g, n = float(guidance_scale), float(num_steps)
    return lambda t: 1.0 + g * (1.0 - math.cos(math.pi * ((n - float(t)) / n) ** 5.0)) / 2.0


@hookimpl
def guidance(spec, ckpt, run):
    from vidax_core.guidance import ClassifierFree, NoGuidance

    g = float(run.sampling.guidance_scale)
    if g <= 1.0:  # the pipelines decide CFG from guidance_scale alone
        return NoGuidance()
    if run.options.get("use_dynamic_cfg"):
        return ClassifierFree(scale=dynamic_scale(g, int(run.sampling.num_steps)))
    return ClassifierFree(scale=g)


@hookimpl
def check_run(spec, run):
    s = run.sampling
    problems = []
    step = 2 * TEMPORAL_FACTOR  # an odd latent frame count: the VAE decodes an even one into 3 extra frames
    if (s.num_frames - 1) % step:
        k = max(round((s.num_frames - 1) / step), 0)
        hint = " (CogVideoX1.5 is trained on 16N+1: 81)" if spec.id.startswith("cogvideox1.5") else ""
        problems.append(f"sampling.num_frames must be 8k+1 for CogVideoX (the VAE compresses time by 4 and decodes "
                        f"an odd latent frame count), got {s.num_frames}: use {step * k + 1}{hint}")
    multiple = SPATIAL_FACTOR * 2  # VAE factor x the DiT's 2x2 patch
    for key in ("height", "width"):
        v = getattr(s, key)
        if v % multiple:
            problems.append(f"sampling.{key} must be a multiple of {multiple} for CogVideoX, got {v}: use "
                            f"{max(multiple, v // multiple * multiple)}")
    if _is_i2v(spec) and run.image is None:
        problems.append(f"{spec.id} is an image-to-video model: set image: <path to a png or jpg>")
    if not _is_i2v(spec) and run.image is not None:
        problems.append(f"{spec.id} is a text-to-video model and takes no image: drop image: or use "
                        f"{spec.id}-i2v")
    if run.video is not None:
        problems.append(f"{spec.id} takes no video input (video:)")
    tiling = getattr(getattr(run, "vae", None), "tiling", False)
    if tiling:  # diffusers' enable_tiling knobs, checked by the VAE module before anything loads
        from vidax_core.errors import UserError

        from .vae import check_tiling

        try:
            check_tiling(tiling)
        except UserError as exc:
            problems.append(str(exc))
    return problems


@dataclass
class CogVideoXTextEncoder:
    tokenizer: Any
    encoder: Any


@hookimpl
def build_text_encoder(spec, ckpt, run, mesh):
    """T5 v1.1 XXL in fp32 whatever the DiT dtype (without a mask a bf16 T5 drifts by tens of percent),
    tensor-parallel over the run's ``tp`` axis when tp > 1."""
    from vidax_core.encoders.t5 import T5Config, load_t5
    from vidax_core.encoders.tokenizer import TextTokenizer

    tok = TextTokenizer.from_dir(ckpt.require("tokenizer"))
    cfg = T5Config.from_config(ckpt.config("text_encoder"))
    return CogVideoXTextEncoder(tok, load_t5(cfg, ckpt.tensors("text_encoder"), mesh=mesh))


@hookimpl
def encode_prompt(spec, encoder, prompts, run):
    """As ``CogVideoXPipeline._get_t5_prompt_embeds``: padded to ``max_sequence_length`` and encoded WITHOUT the
    attention mask (the DiT attends to the padding too)."""
    from vidax_core.encoders.t5 import call_encoder

    ids, _ = encoder.tokenizer(list(prompts), int(run.sampling.max_sequence_length))
    return np.asarray(call_encoder(encoder.encoder, ids), np.float32)


def _patch_t(ckpt) -> int:
    return int(ckpt.config("transformer").get("patch_size_t") or 1)


def _vae_factors(config: dict) -> tuple[int, int]:
    """(temporal, spatial) compression of an ``AutoencoderKLCogVideoX`` config."""
    blocks = config.get("block_out_channels") or (128, 256, 256, 512)
    return int(config.get("temporal_compression_ratio") or TEMPORAL_FACTOR), 2 ** (len(blocks) - 1)


@hookimpl
def vae_latent_shape(spec, ckpt, run):
    if not ckpt.has("vae"):
        return None
    from .autoencoder import latent_grid

    t, sp = _vae_factors(ckpt.config("vae"))
    s = run.sampling
    return latent_grid(s.num_frames, s.height, s.width, temporal=t, spatial=sp, patch_t=_patch_t(ckpt))


@hookimpl
def build_vae(spec, ckpt, run):
    from . import vae as vae_lib
    from .autoencoder import CogVideoXAutoencoder

    cfg = vae_lib.CogVideoXVAEConfig.from_config(ckpt.config("vae"))
    model = vae_lib.load_vae(cfg, ckpt.tensors("vae"), with_encoder=run.image is not None)
    return CogVideoXAutoencoder(model, cfg, _patch_t(ckpt)).for_frames(int(run.sampling.num_frames))


@hookimpl
def prepare_conditioning(spec, ckpt, run, vae, latent_shape):
    from .conditioning import prepare

    return prepare(run, vae, latent_shape, _dit_config(ckpt))


@hookimpl
def open_checkpoint(spec, path):
    """The original SAT release (``transformer/1/mp_rank_00_model_states.pt``, ``vae/3d-vae.pt``) is not read:
    one line pointing at the diffusers repo; any other foreign folder is declined (None)."""
    from .original_format import refuse_sat

    refuse_sat(spec, path)


@hookimpl
def builtin_checkpoint(spec, name):
    from vidax_core.io.builtin import packaged_checkpoint

    return packaged_checkpoint(__file__, name)


@hookimpl
def bench_reference(spec, engine, ckpt_dir, run):
    """``vidax bench --reference diffusers``: the same text-to-video run with diffusers' CogVideoXPipeline."""
    if engine != "diffusers":
        return None
    from .bench_reference import CogVideoXDiffusersReference

    return CogVideoXDiffusersReference(ckpt_dir, run)


@hookimpl
def check_checkpoint(spec, ckpt, run):
    """The DiT config must fit the model id, the VAE's channels and the run's size; read from config files only."""
    from .checks import checkpoint_problems

    return checkpoint_problems(spec, ckpt, run)
