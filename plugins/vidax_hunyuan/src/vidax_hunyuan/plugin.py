"""The HunyuanVideo family's hook implementations: vidax's core finds this module through the ``vidax`` entry point.

Run semantics are those of diffusers' ``HunyuanVideoPipeline``: Llama-3 ``hidden_states[-3]`` of the templated
prompt (cropped) plus the pooled CLIP-L text, embedded guidance (``guidance_scale * 1000`` is a model input, one
pass), real classifier-free guidance on top with ``options.true_cfg_scale`` > 1, flow Euler over sigmas
``linspace(1, 0, N + 1)[:-1]`` shifted by the checkpoint's scheduler (shift 7), and the HunyuanVideo VAE.
"""

from __future__ import annotations

import numpy as np
from flax import nnx

from vidax_core.hookspecs import hookimpl
from vidax_core.model_api import DitBuild, dit_weight_dtype
from vidax_core.registry import ModelSpec

from . import presets
from .flops import counter as _flops

FAMILY = "hunyuan"


def _is_i2v(spec) -> bool:
    return "i2v" in spec.tasks




@hookimpl
def register_models(register):
    for m in presets.MODELS:
        register(ModelSpec(family=FAMILY, checkpoint_formats=("diffusers", "hunyuan-original"), **m))


def _dit_config(ckpt, **overrides):
    from .dit import HunyuanDiTConfig

    return HunyuanDiTConfig.from_config(ckpt.config("transformer"), **overrides)


@hookimpl
def build_dit(spec, ckpt, run):
    from .dit import HunyuanDiT

    cfg = _dit_config(ckpt, dtype=dit_weight_dtype(run))
    return DitBuild(ctor=lambda: HunyuanDiT(cfg, rngs=nnx.Rngs(0)), config=cfg, in_channels=cfg.in_channels,
                    param_dtype=cfg.dtype, heads=cfg.num_attention_heads, patch_size=cfg.patch,
                    block_counts={"double_blocks": cfg.num_layers, "single_blocks": cfg.num_single_layers}, flops=_flops(cfg))


# Megatron TP over heads / MLP width / the blocks' modulation outputs; batch over dp; video tokens over sp.
HUNYUAN_SHARD_RULES = (("embed", None), ("heads", "tp"), ("mlp", "tp"), ("mod", "tp"), ("layers", None),
                       ("batch", "dp"), ("seq", "sp"))


@hookimpl
def shard_rules(spec):
    return HUNYUAN_SHARD_RULES


@hookimpl
def offload_block_groups(spec, model):
    """Two stacks, streamed one after the other: the double-stream blocks, then the single-stream blocks."""
    return ["double_blocks", "single_blocks"]


@hookimpl
def convert_checkpoint(spec, component, tensors, abstract):
    if component != "transformer":
        return None
    from .convert_dit import convert_dit

    return convert_dit(tensors, abstract)


@hookimpl
def guidance(spec, ckpt, run):
    """Embedded guidance (``guidance_scale * 1000`` into the model), plus real CFG when true_cfg_scale > 1."""
    from vidax_core.guidance import Embedded

    return Embedded(scale=float(run.sampling.guidance_scale), multiplier=1000.0,
                    true_cfg_scale=float(run.options.get("true_cfg_scale") or 1.0))


@hookimpl
def sampling_plan(spec, ckpt, run, sampler, latent_shape):
    """The pipeline's sigmas ``linspace(1, 0, N + 1)[:-1]`` (the scheduler shifts them)."""
    if getattr(sampler, "name", "") != "flow_euler":
        return None
    n = int(run.sampling.num_steps)
    return {"sigmas": np.linspace(1.0, 0.0, n + 1)[:-1]}


@hookimpl
def check_run(spec, run):
    s = run.sampling
    problems = []
    if (s.num_frames - 1) % 4:
        k = max(round((s.num_frames - 1) / 4), 0)
        problems.append(f"sampling.num_frames must be 4k+1 for HunyuanVideo (the VAE compresses time by 4), got "
                        f"{s.num_frames}: use {4 * k + 1}")
    for key in ("height", "width"):
        v = getattr(s, key)
        if v % 16:
            problems.append(f"sampling.{key} must be a multiple of 16 for HunyuanVideo (VAE factor 8 x patch 2), "
                            f"got {v}: use {max(16, v // 16 * 16)}")
    if _is_i2v(spec) and run.image is None:
        problems.append(f"{spec.id} is image-to-video: give the first frame with image=path/to/image.png")
    if not _is_i2v(spec) and run.image is not None:
        problems.append(f"{spec.id} is text-to-video: it takes no image (image:); use hunyuanvideo-i2v-13b")
    if run.video is not None:
        problems.append(f"{spec.id} takes no video input (video:)")
    o = run.options
    tpl = o.get("prompt_template")
    if tpl is not None and tpl.count("{}") != 1:
        problems.append("options.prompt_template must hold exactly one {} where the prompt goes")
    if o.get("crop_start") is not None and int(o["crop_start"]) < 0:
        problems.append(f"options.crop_start must be >= 0, got {o['crop_start']}")
    if o.get("true_cfg_scale") is not None and float(o["true_cfg_scale"]) < 0:
        problems.append(f"options.true_cfg_scale must be >= 0 (1 = off), got {o['true_cfg_scale']}")
    if s.max_sequence_length < 1:
        problems.append(f"sampling.max_sequence_length must be positive, got {s.max_sequence_length}: use 256")
    return problems


@hookimpl
def build_text_encoder(spec, ckpt, run, mesh):
    """Llama-3 (tensor-parallel over tp when tp > 1) and CLIP-L text, in the run's weight dtype for Llama."""
    from . import text

    if _is_i2v(spec):
        return text.load_i2v(ckpt, dtype=dit_weight_dtype(run), mesh=mesh)
    return text.load(ckpt, dtype=dit_weight_dtype(run), mesh=mesh)


@hookimpl
def encode_prompt(spec, encoder, prompts, run):
    from . import text

    o = run.options
    if _is_i2v(spec):
        return _encode_i2v(encoder, prompts, run)
    template = o.get("prompt_template") or presets.T2V_TEMPLATE
    crop = o.get("crop_start")
    crop = presets.T2V_CROP_START if crop is None else int(crop)
    return text.encode(encoder, prompts, template=template, crop_start=crop,
                       max_length=int(run.sampling.max_sequence_length))


def _encode_i2v(encoder, prompts, run):
    """The prompt with the run's image (``image_embed_interleave``), the negative prompt with a black image of the
    run's size and interleave 2, as the pipeline; one context per prompt (their lengths differ)."""
    from PIL import Image

    from vidax_core.io.image import load_image

    from . import text

    o, s = run.options, run.sampling
    start, end, length = presets.I2V_IMAGE_EMB
    start = start if o.get("image_emb_start") is None else int(o["image_emb_start"])
    length = length if o.get("image_emb_len") is None else int(o["image_emb_len"])
    tpl = text.I2VTemplate(o.get("prompt_template") or presets.I2V_TEMPLATE,
                           presets.I2V_CROP_START if o.get("crop_start") is None else int(o["crop_start"]),
                           start, start + length, length)
    images = [load_image(run.image), Image.new("RGB", (s.width, s.height), 0)]
    interleave = [int(o.get("image_embed_interleave") or 4), 2]
    return [text.encode_i2v(encoder, p, images[i], tpl=tpl, max_length=int(s.max_sequence_length),
                            interleave=interleave[i]) for i, p in enumerate(prompts)]


@hookimpl
def prepare_conditioning(spec, ckpt, run, vae, latent_shape):
    if not _is_i2v(spec):
        return None
    from .conditioning import prepare

    return prepare(run, vae, latent_shape)


@hookimpl
def vae_latent_shape(spec, ckpt, run):
    if not ckpt.has("vae"):
        return None
    from .autoencoder import latent_grid

    s = run.sampling
    return latent_grid(ckpt.config("vae"), s.num_frames, s.height, s.width)


@hookimpl
def build_vae(spec, ckpt, run):
    from .autoencoder import load_autoencoder

    return load_autoencoder(ckpt.config("vae"), ckpt.tensors("vae"), with_encoder=_is_i2v(spec))


@hookimpl
def open_checkpoint(spec, path):
    """The original release folder: ``[hunyuan-video-t2v-720p/]transformers/mp_rank_00_model_states.pt`` and
    ``vae/pytorch_model.pt`` beside ``text_encoder/`` and ``text_encoder_2/`` (see :mod:`.original_format`)."""
    from .original_format import open_original

    return open_original(spec, path)


@hookimpl
def builtin_checkpoint(spec, name):
    from vidax_core.io.builtin import packaged_checkpoint

    return packaged_checkpoint(__file__, name)


@hookimpl
def bench_reference(spec, engine, ckpt_dir, run):
    """``vidax bench --reference diffusers``: the same text-to-video run with diffusers' HunyuanVideoPipeline."""
    if engine != "diffusers":
        return None
    from .bench_reference import HunyuanDiffusersReference

    return HunyuanDiffusersReference(ckpt_dir, run)


@hookimpl
def check_checkpoint(spec, ckpt, run):
    """The DiT config must be a HunyuanVideo 1.0 one and fit the VAE; read from config files only."""
    try:
        dit = _dit_config(ckpt)
    except Exception as exc:  # noqa: BLE001 - a config value the config class could not take
        return [f"transformer/config.json: unusable ({' '.join(str(exc).split())[:160]})"]
    problems: list[str] = []
    want = "token_replace" if _is_i2v(spec) else None
    if dit.image_condition_type != want:
        problems.append(f"transformer/config.json: image_condition_type={dit.image_condition_type!r}; {spec.id} "
                        f"needs {want!r}" + (" (the latent_concat I2V variant is not supported)" if want else ""))
    if ckpt.has("vae"):
        c = ckpt.config("vae").get("latent_channels", 16)
        if dit.in_channels != c:
            problems.append(f"transformer/config.json: in_channels={dit.in_channels} does not match latent_channels="
                            f"{c} of vae/config.json")
    return problems
