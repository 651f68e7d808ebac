"""The LTX-Video family's hook implementations: vidax's core finds this module through the ``vidax`` entry point.

Two run semantics (``options.pipeline``): ``condition``, diffusers' LTXConditionPipeline (:mod:`vidax_ltx.condition`;
the presets, and with ``options.multiscale`` the official two-pass recipe, :mod:`vidax_ltx.multiscale`), and
``ltx``, LTXPipeline (text-to-video) / LTXImageToVideoPipeline (``image:`` given) with packed latents
(B, F*H*W, 128) and the checkpoint's dynamic shift from the token count (:mod:`vidax_ltx.conditioning`). Both: T5
v1.1 text with its attention mask, flow Euler (or ``options.timesteps``), classifier-free guidance with optional
rescale, RoPE scaled by ``options.frame_rate``, and a timestep-conditioned VAE decode.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from flax import nnx

from vidax_core.hookspecs import hookimpl
from vidax_core.model_api import DitBuild, dit_weight_dtype
from vidax_core.registry import ModelSpec

from . import presets
from .flops import counter as _flops

FAMILY = "ltx"




@hookimpl
def register_models(register):
    for m in presets.MODELS:
        register(ModelSpec(family=FAMILY, checkpoint_formats=("diffusers", "ltx-original"), options=presets.OPTIONS,
                           **m))


def _dit_config(ckpt, **overrides):
    from .dit import LTXDiTConfig

    return LTXDiTConfig.from_config(ckpt.config("transformer"), **overrides)


@hookimpl
def build_dit(spec, ckpt, run):
    from .dit import LTXDiT

    cfg = _dit_config(ckpt, dtype=dit_weight_dtype(run))
    p, pt = cfg.patch_size, cfg.patch_size_t

    def packed(batch, grid):
        f, h, w = grid
        return (batch, (f // pt) * (h // p) * (w // p), cfg.in_channels)

    # LTXConditionPipeline takes and returns unpacked latents (B, C, F, H, W): the core's default layout.
    return DitBuild(ctor=lambda: LTXDiT(cfg, rngs=nnx.Rngs(0)), config=cfg, in_channels=cfg.in_channels,
                    param_dtype=cfg.dtype, heads=cfg.num_attention_heads, patch_size=(pt, p, p),
                    block_counts={"blocks": cfg.num_layers}, latent_shapes=None if _condition(run) else packed, flops=_flops(cfg))


def _condition(run) -> bool:
    return run.options.get("pipeline", "condition") == "condition"


# Megatron TP over heads / FFN width; batch over dp; video tokens over sp.
LTX_SHARD_RULES = (("embed", None), ("heads", "tp"), ("mlp", "tp"), ("layers", None), ("batch", "dp"), ("seq", "sp"))


@hookimpl
def shard_rules(spec):
    return LTX_SHARD_RULES


@hookimpl
def offload_block_groups(spec, model):
    return ["blocks"]


@hookimpl
def convert_checkpoint(spec, component, tensors, abstract):
    if component != "transformer":
        return None
    from vidax_core.io.convert import convert

    from .convert_dit import DIT_RULES

    return convert(tensors, DIT_RULES, abstract, component="LTX-Video DiT (transformer)")


@hookimpl
def guidance(spec, ckpt, run):
    """Classifier-free guidance with rescale (LTXPipeline); with ``options.guidance_timesteps`` the dev recipe's
    per-step guidance + spatio-temporal guidance lists (:mod:`vidax_ltx.stg`)."""
    from vidax_core.guidance import ClassifierFree, NoGuidance

    o = run.options
    if o.get("guidance_timesteps") is not None:
        from .stg import PerStepSTG

        return PerStepSTG(tuple(float(v) for v in o["guidance_timesteps"]),
                          tuple(float(v) for v in o["guidance_scales"]), tuple(float(v) for v in o["stg_scales"]),
                          tuple(float(v) for v in o["guidance_rescales"]),
                          tuple(tuple(int(b) for b in blocks) for blocks in o["stg_skip_blocks"]),
                          _dit_config(ckpt).num_layers)
    g = float(run.sampling.guidance_scale)
    if g <= 1.0:
        return NoGuidance()
    return ClassifierFree(scale=g, rescale_phi=float(run.options.get("guidance_rescale") or 0.0))


@hookimpl
def sampling_plan(spec, ckpt, run, sampler, latent_shape):
    """LTXPipeline: sigmas ``linspace(1, 1/N, N)`` and ``mu`` from the video token count. LTXConditionPipeline:
    timesteps ``linear_quadratic_schedule(N) * 1000`` and no ``mu``, entered at ``options.denoise_strength``. Either
    with ``options.timesteps``: those timesteps (``FlowMatchEulerDiscreteScheduler.set_timesteps(timesteps=...)``)."""
    from vidax_core.errors import UserError
    from vidax_core.schedulers.base import calculate_shift

    kwargs: dict[str, Any] = {}
    timesteps = run.options.get("timesteps")
    n = int(run.sampling.num_steps)
    flow = getattr(sampler, "name", "") == "flow_euler"
    if _condition(run):
        if getattr(sampler, "use_dynamic_shifting", False):
            raise UserError("the scheduler asks for a resolution-dependent shift (use_dynamic_shifting), which "
                            "LTXConditionPipeline does not apply (the 0.9.7 / 0.9.8 diffusers repositories set it "
                            "false): set options.pipeline=ltx options.multiscale=false for LTXPipeline, or "
                            "sampling.scheduler={name: flow_euler}")
        if timesteps:
            kwargs["timesteps"] = [float(t) for t in timesteps]
        elif flow:
            from .condition import linear_quadratic_timesteps

            kwargs["timesteps"] = linear_quadratic_timesteps(n)
        strength = float(run.options.get("denoise_strength", 1.0))
        if strength < 1.0:
            kwargs["denoise_strength"] = strength
        return kwargs
    if getattr(sampler, "use_dynamic_shifting", False):
        f, h, w = latent_shape
        kwargs["mu"] = calculate_shift(f * h * w, sampler.base_image_seq_len, sampler.max_image_seq_len,
                                       sampler.base_shift, sampler.max_shift)
    if timesteps:
        kwargs["timesteps"] = [float(t) for t in timesteps]
        return kwargs
    if flow:
        kwargs["sigmas"] = np.linspace(1.0, 1.0 / n, n)
    return kwargs


@hookimpl
def sampling_passes(spec, ckpt, run):
    """``options.multiscale``: the official recipe's two passes around the latent upscaler."""
    if not run.options.get("multiscale"):
        return None
    from .multiscale import passes

    return passes(ckpt, run)


@hookimpl
def check_run(spec, run):
    s = run.sampling
    problems = []
    if (s.num_frames - 1) % 8:
        k = max(round((s.num_frames - 1) / 8), 0)
        problems.append(f"sampling.num_frames must be 8k+1 for LTX-Video (the VAE compresses time by 8), got "
                        f"{s.num_frames}: use {8 * k + 1}")
    o = run.options
    problems += _check_recipe(run)
    for key in ("height", "width") if not o.get("multiscale") else ():
        v = getattr(s, key)
        if v % 32:
            problems.append(f"sampling.{key} must be a multiple of 32 for LTX-Video (the VAE compresses space by 32), "
                            f"got {v}: use {max(32, v // 32 * 32)}")
    if o.get("frame_rate") is not None and not float(o["frame_rate"]) > 0:
        problems.append(f"options.frame_rate must be positive, got {o['frame_rate']}")
    ts = o.get("timesteps")
    if ts is not None:
        if not ts or any(not 0.0 <= float(t) <= 1000.0 for t in ts) or any(a <= b for a, b in zip(ts, ts[1:])):
            problems.append("options.timesteps must be a non-empty, strictly decreasing list of model timesteps in "
                            "[0, 1000], e.g. [1000, 993, 987, 981, 975, 909, 725, 0.03]")
    if o.get("decode_noise_scale") is not None and not 0.0 <= float(o["decode_noise_scale"]) <= 1.0:
        problems.append(f"options.decode_noise_scale must be in [0, 1], got {o['decode_noise_scale']}")
    if run.video is not None and not _condition(run):
        problems.append("video: conditioning belongs to LTXConditionPipeline: set options.pipeline=condition")
    if run.video is not None and run.image is not None:
        problems.append("set only one of image: and video: (LTX-Video conditions on one item)")
    given = [k for k in presets.PER_STEP_KEYS if o.get(k) is not None]
    if given and len(given) < len(presets.PER_STEP_KEYS):
        missing = [k for k in presets.PER_STEP_KEYS if k not in given]
        problems.append(f"per-step guidance needs all of options.{', options.'.join(presets.PER_STEP_KEYS)}: "
                        f"set {', '.join('options.' + k for k in missing)}")
    elif given:
        n = {len(o[k]) for k in presets.PER_STEP_KEYS}
        if len(n) != 1 or 0 in n:
            problems.append("options.guidance_timesteps, guidance_scales, stg_scales, guidance_rescales and "
                            f"stg_skip_blocks must be non-empty lists of one length, got lengths "
                            f"{[len(o[k]) for k in presets.PER_STEP_KEYS]}")
    return problems


def _check_recipe(run) -> list[str]:
    """The LTXConditionPipeline and multi-scale options."""
    o, s = run.options, run.sampling
    problems = []
    cond = _condition(run)
    strength = float(o.get("denoise_strength", 1.0))
    if not 0.0 < strength <= 1.0:
        problems.append(f"options.denoise_strength must be in (0, 1], got {strength}")
    if not 0.0 <= float(o.get("strength", 1.0)) <= 1.0:
        problems.append(f"options.strength must be in [0, 1], got {o.get('strength')}")
    if not 0.0 <= float(o.get("image_cond_noise_scale") or 0.0) <= 10.0:
        problems.append(f"options.image_cond_noise_scale must be in [0, 10], got {o.get('image_cond_noise_scale')}")
    problems += _check_keyframe(run) + _check_conditions(run)
    if not cond:
        changed = [k for k in ("denoise_strength", "strength") if float(o.get(k, 1.0)) != 1.0]
        changed += [k for k in ("frame_index", "image_cond_noise_scale") if float(o.get(k) or 0)]
        changed += ["conditions"] if o.get("conditions") else []
        if changed or o.get("multiscale"):
            what = ", ".join(f"options.{k}" for k in changed) or "options.multiscale"
            problems.append(f"{what} belongs to LTXConditionPipeline: set options.pipeline=condition, or drop it "
                            "for options.pipeline=ltx")
    elif s.initial_noise is not None and strength >= 1.0:
        problems.append("with options.pipeline=condition, sampling.initial_noise holds the latents= to re-noise "
                        "(unpacked, (1, C, F, H, W)) and is used only with options.denoise_strength < 1, as "
                        "LTXConditionPipeline ignores it otherwise: set options.denoise_strength, or drop "
                        "sampling.initial_noise")
    if o.get("multiscale"):
        from .multiscale import pass_sizes

        factor = float(o.get("downscale_factor") or 0.0)
        if not 0.0 < factor <= 1.0:
            problems.append(f"options.downscale_factor must be in (0, 1], got {o.get('downscale_factor')}")
        elif min(pass_sizes(s.height, s.width, factor)[0]) < 32:
            problems.append(f"options.multiscale: the first pass at {factor:.3g} of {s.width}x{s.height} is "
                            f"{int(s.width * factor)}x{int(s.height * factor)}, below the VAE's 32 pixels once "
                            "rounded: raise sampling.height/width or options.downscale_factor")
        second = float(o.get("second_pass_denoise_strength", 1.0))
        if not 0.0 < second <= 1.0:
            problems.append(f"options.second_pass_denoise_strength must be in (0, 1], got {second}")
        ts = o.get("second_pass_timesteps")
        if ts is not None and (not ts or any(not 0.0 <= float(t) <= 1000.0 for t in ts)
                               or any(a <= b for a, b in zip(ts, ts[1:]))):
            problems.append("options.second_pass_timesteps must be a non-empty, strictly decreasing list of model "
                            "timesteps in [0, 1000], e.g. [1000, 909, 725, 421, 0]")
        if o.get("second_pass_steps") is not None and int(o["second_pass_steps"]) < 1:
            problems.append(f"options.second_pass_steps must be at least 1, got {o['second_pass_steps']}")
    return problems


def _check_conditions(run) -> list[str]:
    """``options.conditions``: a list of {image: PATH} / {video: PATH} items, each with an existing file, an optional
    frame_index inside the video and a strength in [0, 1]."""
    import os

    items = run.options.get("conditions")
    if not items:
        return []
    n = run.sampling.num_frames
    for k, c in enumerate(items):
        where = f"options.conditions[{k}]"
        keys = set(c) if isinstance(c, dict) else set()
        media = keys & {"image", "video"}
        if not isinstance(c, dict) or len(media) != 1 or keys - {"image", "video", "frame_index", "strength"}:
            return [f"{where} must be {{image: PATH}} or {{video: PATH}}, optionally with frame_index and strength, "
                    f"got {c!r}"[:300]]
        path = c[media.pop()]
        if not isinstance(path, str) or not os.path.isfile(path):
            return [f"{where}: {path!r} is not a file"]
        fi, st = c.get("frame_index", 0), c.get("strength", 1.0)
        if isinstance(fi, bool) or not isinstance(fi, int) or not 0 <= fi < n:
            return [f"{where}.frame_index must be an integer in [0, {n - 1}], got {fi!r}"]
        if isinstance(st, bool) or not isinstance(st, (int, float)) or not 0.0 <= float(st) <= 1.0:
            return [f"{where}.strength must be in [0, 1], got {st!r}"]
    return []


def _check_keyframe(run) -> list[str]:
    """``options.frame_index``: needs ``image:``, lies inside the video, and its extra tokens keep every pass's
    sequence divisible by ``parallel.sp``."""
    o, s = run.options, run.sampling
    k = int(o.get("frame_index") or 0)
    if not k:
        return []
    if k < 0 or k >= s.num_frames:
        return [f"options.frame_index must be in [0, {s.num_frames - 1}] (a frame of the {s.num_frames}-frame video), "
                f"got {k}"]
    if run.image is None and run.video is None:
        return ["options.frame_index places the image: or video: given, and the run has none: set image=... or "
                "drop options.frame_index"]
    if run.image is None:  # a clip's token count depends on its length: checked when it is read
        return []
    sizes = [(s.height, s.width)]
    if o.get("multiscale") and 0.0 < float(o.get("downscale_factor") or 0.0) <= 1.0:
        from .multiscale import pass_sizes

        sizes = list(pass_sizes(s.height, s.width, float(o["downscale_factor"])))
    sp = int(getattr(getattr(run, "parallel", None), "sp", 1) or 1)
    frames = (s.num_frames - 1) // 8 + 1
    for h, w in sizes:
        tokens = (frames + 1) * (h // 32) * (w // 32)
        if tokens % sp:
            return [f"options.frame_index adds the keyframe's {(h // 32) * (w // 32)} tokens to the video's: "
                    f"{tokens} tokens at {w}x{h} do not split over parallel.sp={sp}; change parallel.sp or the size"]
    return []


@dataclass
class LTXTextEncoder:
    tokenizer: Any
    encoder: Any


@hookimpl
def build_text_encoder(spec, ckpt, run, mesh):
    """T5 v1.1 XXL in fp32, tensor-parallel over the run's ``tp`` axis when tp > 1."""
    from vidax_core.encoders.t5 import T5Config, load_t5
    from vidax_core.encoders.tokenizer import TextTokenizer

    tok = TextTokenizer.from_dir(ckpt.require("tokenizer"))
    cfg = T5Config.from_config(ckpt.config("text_encoder"))
    return LTXTextEncoder(tok, load_t5(cfg, ckpt.tensors("text_encoder"), mesh=mesh))


@hookimpl
def encode_prompt(spec, encoder, prompts, run):
    """As ``LTXPipeline._get_t5_prompt_embeds``: padded to ``max_sequence_length``, encoded WITHOUT the mask; the
    mask goes to the DiT's cross-attention."""
    from vidax_core.encoders.t5 import call_encoder

    ids, mask = encoder.tokenizer(list(prompts), int(run.sampling.max_sequence_length))
    hidden = call_encoder(encoder.encoder, ids)
    return {"hidden": np.asarray(hidden, np.float32), "mask": mask.astype(bool)}


def _vae_factors(config: dict) -> tuple[int, int]:
    """(temporal, spatial) compression of an ``AutoencoderKLLTXVideo`` config, as the VAE module resolves them."""
    from .vae import LTXVAEConfig

    cfg = LTXVAEConfig.from_config(config)
    return int(cfg.temporal_compression_ratio), int(cfg.spatial_compression_ratio)


@hookimpl
def vae_latent_shape(spec, ckpt, run):
    if not ckpt.has("vae"):
        return None
    from .autoencoder import latent_grid

    t, sp = _vae_factors(ckpt.config("vae"))
    s = run.sampling
    height, width = s.height, s.width
    if run.options.get("multiscale"):  # the larger, second pass
        from .multiscale import pass_sizes

        height, width = pass_sizes(s.height, s.width, float(run.options["downscale_factor"]), sp)[1]
    return latent_grid(s.num_frames, height, width, t, sp)


@hookimpl
def build_vae(spec, ckpt, run):
    from . import vae as vae_lib
    from .autoencoder import DecodeSettings, LTXVideoAutoencoder, latent_grid

    raw = ckpt.config("vae")
    cfg = vae_lib.LTXVAEConfig.from_config(raw)
    with_encoder = (run.image is not None or run.video is not None or bool(run.options.get("conditions"))) and (
        _condition(run) or run.sampling.initial_noise is None)
    model = vae_lib.load_vae(cfg, ckpt.tensors("vae"), with_encoder=with_encoder)
    t, sp = _vae_factors(raw)
    s = run.sampling
    o = run.options
    decode = DecodeSettings(float(o.get("decode_timestep") or 0.0), o.get("decode_noise_scale"), int(s.seed))
    return LTXVideoAutoencoder(model, cfg, latent_grid(s.num_frames, s.height, s.width, t, sp), decode)


@hookimpl
def prepare_conditioning(spec, ckpt, run, vae, latent_shape):
    from . import condition, conditioning

    prepare = condition.prepare if _condition(run) else conditioning.prepare
    return prepare(run, vae, latent_shape, _dit_config(ckpt), _vae_factors(ckpt.config("vae")))


@hookimpl
def open_checkpoint(spec, path):
    """A folder with an original LTX-Video release file (DiT + VAE, config in its metadata) and the T5 folders."""
    from .original_format import open_original

    return open_original(spec, path)


@hookimpl
def builtin_checkpoint(spec, name):
    from vidax_core.io.builtin import packaged_checkpoint

    return packaged_checkpoint(__file__, name)


@hookimpl
def bench_reference(spec, engine, ckpt_dir, run):
    """``vidax bench --reference diffusers``: the same text-to-video run with diffusers' LTXPipeline."""
    if engine != "diffusers":
        return None
    from .bench_reference import LTXDiffusersReference

    return LTXDiffusersReference(ckpt_dir, run)


@hookimpl
def check_checkpoint(spec, ckpt, run):
    """The DiT config must fit LTX-Video and the VAE's latent channels; read from config files only."""
    problems: list[str] = []
    try:
        dit = _dit_config(ckpt)
    except Exception as exc:  # noqa: BLE001 - a config value the config class could not take
        return [f"transformer/config.json: unusable ({' '.join(str(exc).split())[:160]})"]
    blocks = run.options.get("stg_skip_blocks") or []
    bad = sorted({b for entry in blocks for b in entry if not 0 <= int(b) < dit.num_layers})
    if bad:
        problems.append(f"options.stg_skip_blocks names blocks {bad}, but transformer/config.json has num_layers="
                        f"{dit.num_layers}: use indices 0..{dit.num_layers - 1}")
    if run.options.get("multiscale"):
        from .multiscale import check_upsampler

        problems += check_upsampler(ckpt, dict(run.options))
    if ckpt.has("vae"):
        vae = ckpt.config("vae")
        c = vae.get("latent_channels", 128)
        if dit.in_channels != c * dit.patch_size_t * dit.patch_size**2:
            problems.append(f"transformer/config.json: in_channels={dit.in_channels} does not match latent_channels={c} "
                            "of vae/config.json")
    return problems
