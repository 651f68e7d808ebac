"""Run configuration: core defaults < model preset < user YAML < ``key=value`` arguments.

YAML and command-line overrides are read with OmegaConf, merged in that order, then validated field by field into
the frozen dataclasses below before any heavy work starts. Every problem is a :class:`UserError` with one line
that names the key and says what to do (unknown keys come with a close-match suggestion).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from omegaconf import OmegaConf

from vidax_core.config import cache as cache_key
from vidax_core.config import parse
from vidax_core.config.checks import check_paths, check_scheduler_options
from vidax_core.config.parse import short_repr
from vidax_core.errors import UserError


@dataclass(frozen=True)
class ModelConfig:
    id: str = "???"
    checkpoint: str | None = None  # a folder (diffusers, original release, ComfyUI models) or a hub repo id
    revision: str | None = None
    # single files per component: {transformer: F, text_encoder: F, vae: F, ...} (vidax_core.io.component_files)
    files: Any = None
    dtype: str | None = None  # null = the model's precision policy
    weight_dtype: str | None = None  # null = the checkpoint's own storage; float8_e4m3fn | int8 (vidax_core.quant)
    # with weight_dtype set: also the family's named Linear layers outside the blocks (Wan: its embedders and time
    # projection) 8-bit; a checkpoint's own 8-bit layers stay 8-bit whatever this says
    quantize_outside_blocks: bool = False


@dataclass(frozen=True)
class SamplingConfig:
    """Keys mean the family's diffusers pipeline call argument of the same name (``num_steps`` =
    ``num_inference_steps``). Sizes, frames, steps, guidance and text length have no core default: each model's
    preset sets them (the reference recipe)."""

    num_steps: int | None = None
    guidance_scale: float | None = None
    guidance_scale_2: float | None = None
    height: int | None = None
    width: int | None = None
    num_frames: int | None = None
    seed: int = 0
    max_sequence_length: int | None = None
    initial_noise: str | None = None
    scheduler: Any = None  # null | "name" | {name: ..., <options>}
    boundary_step_index: int | None = None  # two experts: the first step of the second (null: by timestep)


@dataclass(frozen=True)
class ParallelConfig:
    dp: int | None = None
    tp: int = 1
    sp: int = 1


@dataclass(frozen=True)
class AttentionConfig:
    backend: str = "auto"


@dataclass(frozen=True)
class OffloadConfig:
    enabled: bool = False
    chunk_size: Any = 1  # blocks per transfer: one integer for every group, or {group name: integer}
    storage: str = "host"  # host: the streamed blocks held once in (pinned) host memory; disk: read from a file cache


@dataclass(frozen=True)
class OutputConfig:
    path: str | None = "out/video.mp4"  # null: write no mp4 (the Python API returns the frames)
    fps: int | None = None  # null = the model preset's frame rate
    overwrite: bool = False
    save_latents: str | None = None
    save_frames: str | None = None
    save_audio: str | None = None  # models with sound: .wav (16-bit PCM) or .npy (float32 (B, samples, channels))
    metrics: str | None = None


@dataclass(frozen=True)
class VaeConfig:
    """``tiling``: false (the reference's default), true (diffusers' ``enable_tiling`` defaults) or a mapping of
    diffusers' tile knobs (``tile_sample_min_height``, ``tile_sample_stride_width`` ...) for the decode."""

    tiling: Any = False


@dataclass(frozen=True)
class RuntimeConfig:
    """``text_encoder``: where a loaded pipe keeps its prompt encoder between calls (``host``: parked in host
    memory, ``device``: kept on the devices, ``reload``: rebuilt from the checkpoint when needed); a single
    ``vidax run`` frees it after its one use whatever the setting."""

    compilation_cache: bool = True
    compilation_cache_dir: str = "~/.cache/vidax/jax"
    text_encoder: str = "host"
    # auto: highest where the compute dtype is float32 (TPU and TF32 GPUs round float32 matmul inputs otherwise),
    # the backend's default for bf16/fp16
    matmul_precision: str = "auto"
    # where the prompt encoders compute: auto (the device when they fit beside what is placed, else the device with
    # their layers streamed from the checkpoint, else the host's CPU), device, stream, cpu (vidax_core.runner.
    # memory_plan)
    encode_on: str = "auto"
    # guidance branches with like inputs share one model call (batch 2 for classifier-free guidance); false: one
    # call per branch, as the original Wan code and diffusers' Wan pipelines run them (half the activations: Wan
    # 14B at 720p fits one 16 GiB chip only so)
    batch_branches: bool = True


@dataclass(frozen=True)
class DistributedConfig:
    """Many hosts (``jax.distributed``): null = take it from JAX_COORDINATOR_ADDRESS / JAX_NUM_PROCESSES /
    JAX_PROCESS_ID (or the cluster's own environment); no coordinator anywhere = a single process."""

    coordinator_address: str | None = None
    num_processes: int | None = None
    process_id: int | None = None


@dataclass(frozen=True)
class LoraEntry:
    """One adapter fused into the denoiser at load (:mod:`vidax_core.lora`): a ``.safetensors`` file, a folder
    (``weight_name`` picks its file) or a hub repo id; ``scale`` as diffusers' ``set_adapters`` weight; ``expert``
    names the denoiser of a model with several (Wan2.2 A14B: ``high_noise`` / ``low_noise``)."""

    path: str = "???"
    weight_name: str | None = None
    scale: float = 1.0
    expert: str | None = None


# Who may set a top-level key (``dataclasses.field`` metadata, read by :mod:`vidax_core.config.scope`): the load
# (fixed for a loaded pipe's life), each call, or ``vidax run`` alone (a batch of prompts).
LOAD, CALL, RUN = {"scope": "load"}, {"scope": "call"}, {"scope": "run"}


@dataclass(frozen=True)
class RunConfig:
    model: ModelConfig = field(default_factory=ModelConfig, metadata=LOAD)
    prompt: str = field(default="", metadata=CALL)
    negative_prompt: str = field(default="", metadata=CALL)
    image: str | None = field(default=None, metadata=CALL)
    video: str | None = field(default=None, metadata=CALL)
    sampling: SamplingConfig = field(default_factory=SamplingConfig, metadata=CALL)
    parallel: ParallelConfig = field(default_factory=ParallelConfig, metadata=LOAD)
    attention: AttentionConfig = field(default_factory=AttentionConfig, metadata=LOAD)
    offload: OffloadConfig = field(default_factory=OffloadConfig, metadata=LOAD)
    vae: VaeConfig = field(default_factory=VaeConfig, metadata=CALL)
    output: OutputConfig = field(default_factory=OutputConfig, metadata=CALL)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig, metadata=LOAD)
    distributed: DistributedConfig = field(default_factory=DistributedConfig, metadata=LOAD)
    # family knobs the model's plugin declares (ModelSpec.options); an Option with load_bound is fixed at load
    options: Any = field(default_factory=dict, metadata=CALL)
    # [LoraEntry] after validation (see check_lora); per call only with lora_mode unfused
    lora: Any = field(default_factory=list, metadata=LOAD)
    # fused: into the weights at load; unfused: factors applied in the step (docs/lora.md)
    lora_mode: str = field(default="fused", metadata=LOAD)
    # a batch: a list of prompts or {prompt: ..., seed: ..., output: ...} (vidax run only)
    prompts: Any = field(default=None, metadata=RUN)
    # step caching: null | {method: mag | first_block | teacache, ...} (vidax_core.config.cache)
    cache: Any = field(default=None, metadata=CALL)


DTYPES = ("float32", "bfloat16", "float16")
WEIGHT_DTYPES = ("float8_e4m3fn", "int8")  # 8-bit weight-only storage of the DiT's block weights
MATMUL_PRECISIONS = ("auto", "default", "high", "highest")
OFFLOAD_STORAGE = ("host", "disk")

# (key, predicate, requirement) range checks applied after type validation.
_RANGES: Sequence[tuple[str, Any, str]] = (
    ("sampling.num_steps", lambda v: v >= 1, "must be at least 1"),
    ("sampling.guidance_scale", lambda v: v >= 0, "must be >= 0 (1 disables guidance)"),
    ("sampling.height", lambda v: v >= 1, "must be a positive number of pixels"),
    ("sampling.width", lambda v: v >= 1, "must be a positive number of pixels"),
    ("sampling.num_frames", lambda v: v >= 1, "must be at least 1"),
    ("sampling.max_sequence_length", lambda v: v >= 1, "must be at least 1"),
    ("sampling.seed", lambda v: v >= 0, "must be >= 0"),
    ("sampling.boundary_step_index", lambda v: v >= 0, "must be >= 0 (the first step of the second expert)"),
    ("parallel.tp", lambda v: v >= 1, "must be at least 1"),
    ("parallel.sp", lambda v: v >= 1, "must be at least 1"),
    ("parallel.dp", lambda v: v is None or v >= 1, "must be null (automatic) or at least 1"),
    ("output.fps", lambda v: v >= 1, "must be at least 1"),
    ("model.dtype", lambda v: v is None or v in DTYPES, f"must be null or one of {', '.join(DTYPES)}"),
    ("model.weight_dtype", lambda v: v is None or v in WEIGHT_DTYPES,
     f"must be null (the checkpoint's storage) or one of {', '.join(WEIGHT_DTYPES)}"),
    ("runtime.text_encoder", lambda v: v in ("host", "device", "reload"), "must be one of host, device, reload"),
    ("runtime.matmul_precision", lambda v: v in MATMUL_PRECISIONS, f"must be one of {', '.join(MATMUL_PRECISIONS)}"),
    ("runtime.batch_branches", lambda v: isinstance(v, bool), "must be true (the guidance branches share one "
     "model call) or false (one call per branch: half the activations)"),
    ("runtime.encode_on", lambda v: v in ("auto", "device", "stream", "cpu"), "must be auto, device (the run's "
     "devices), stream (the run's devices, the encoder's layers streamed from the checkpoint) or cpu (this host's "
     "CPU)"),
    ("offload.storage", lambda v: v in OFFLOAD_STORAGE, "must be host (the streamed blocks in host memory) or disk "
     "(read from a file cache while the previous chunk computes)"),
    ("lora_mode", lambda v: v in ("fused", "unfused"), "must be fused (into the weights at load) or unfused "
     "(factors applied in the step; a loaded pipe may then swap adapters per call)"),
)


# Keys with no core default that every model's preset (or the user) must set; those of PREDICTABLE too, unless the
# model fills them in itself (``ModelSpec.predicts``, checked with the model: :func:`check_required_for`): a frame
# count its duration head predicts (LTX-2.5), a guidance scale its checkpoint's guider config holds (Motif-Video).
REQUIRED = ("sampling.num_steps", "sampling.height", "sampling.width", "sampling.max_sequence_length", "output.fps")
PREDICTABLE = ("sampling.num_frames", "sampling.guidance_scale")


def unset_message(key: str) -> str:
    return f"config key {key} is not set and the model's preset gives no default: set {key}=..."


def check_required_for(cfg: "RunConfig", predicts: Sequence[str] = ()) -> None:
    """The keys of :data:`PREDICTABLE` must be set unless the model predicts them (its ``ModelSpec.predicts``)."""
    for key in PREDICTABLE:
        if _get(cfg, key) is None and key.split(".")[-1] not in predicts:
            raise UserError(unset_message(key))


def check_chunk_size(value: Any) -> None:
    """``offload.chunk_size``: a positive integer, or a mapping of block-group name to a positive integer."""

    def ok(v):
        return isinstance(v, int) and not isinstance(v, bool) and v >= 1

    if isinstance(value, Mapping):
        if not value or any(not ok(v) for v in value.values()):
            raise UserError("config key offload.chunk_size must map block groups to integers >= 1, "
                            f"got {short_repr(dict(value))}")
    elif not ok(value):
        raise UserError("config key offload.chunk_size must be an integer >= 1 or {group: integer}, "
                        f"got {short_repr(value)}")


def check_tiling(value: Any, knobs: Mapping[str, Any] | None = None) -> None:
    """``vae.tiling``: true/false or a mapping of the model's VAE tile knobs (``ModelSpec.tiling``: name -> type;
    None: the core's :class:`~vidax_core.vae.tiling.TilingOptions`, positive sizes, stride <= tile)."""
    from vidax_core.vae.tiling import TilingOptions, knob

    if not isinstance(value, (bool, Mapping)):
        raise UserError(f"config key vae.tiling must be true/false or a mapping of tile sizes, got {short_repr(value)}")
    try:
        if knobs is None:
            TilingOptions.coerce(value).check()
        elif isinstance(value, Mapping):
            unknown = sorted(str(k) for k in value if k not in knobs)
            if unknown:
                raise ValueError(f"vae.tiling.{unknown[0]} is not a tiling knob of this model's VAE; its knobs: "
                                 f"{', '.join(knobs)}")
            for k, v in value.items():
                knob(k, v, knobs[k])
    except (ValueError, TypeError) as exc:
        text = str(exc).splitlines()[0]
        raise UserError(text if text.startswith("vae.tiling") else f"config key vae.tiling: {text}") from None


def check_options(options: Mapping[str, Any], declared: Mapping[str, Any], model_id: str) -> None:
    """Every key of ``options`` must be declared by the model's plugin (``ModelSpec.options``: name -> Option) and
    have the declared type; one line naming the key otherwise."""
    for key, value in options.items():
        if key not in declared:
            names = sorted(declared)
            close = difflib.get_close_matches(str(key), names, n=1, cutoff=0.6)
            hint = (f" — did you mean options.{close[0]}?" if close else
                    f" ({model_id} takes: {', '.join(names)})" if names else f" ({model_id} takes no options)")
            raise UserError(f"unknown config key options.{key} for {model_id}{hint}")
        opt = declared[key]
        _coerce(value, opt.type, f"options.{key}")
        if opt.choices is not None and value not in opt.choices:
            raise UserError(f"config key options.{key} must be one of {', '.join(map(str, opt.choices))}, "
                            f"got {short_repr(value)}")


def check_lora(value: Any) -> tuple[LoraEntry, ...]:
    """``lora``: a list of {path, weight_name, scale, expert} (null or empty: none)."""
    if value is None:
        return ()
    if isinstance(value, Mapping) or not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
        raise UserError("config key lora must be a list of {path: ..., scale: ...} entries, got "
                        f"{short_repr(value)}")
    out = []
    for i, item in enumerate(value):
        if isinstance(item, LoraEntry):
            out.append(item)
            continue
        if not isinstance(item, Mapping):
            raise UserError(f"config key lora[{i}] must be a mapping {{path: ..., scale: ...}}, got {short_repr(item)}")
        entry = _build(LoraEntry, item, f"lora[{i}].")
        if entry.path in ("", "???"):
            raise UserError(f"config key lora[{i}].path is not set: name the adapter's .safetensors file")
        out.append(dataclasses.replace(entry, path=os.path.expanduser(entry.path)))
    return tuple(out)


def check_files(value: Any) -> None:
    """``model.files``: null or a mapping of component name -> path of its file (checked further, with the model,
    when the checkpoint is opened)."""
    if value is None:
        return
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) and v
                                                 for k, v in value.items()):
        raise UserError("config key model.files must map components to file paths, e.g. {transformer: "
                        f"wan2.1_t2v_1.3B_fp16.safetensors, vae: wan_2.1_vae.safetensors}}, got {short_repr(value)}")


def defaults_dict() -> dict[str, Any]:
    return dataclasses.asdict(RunConfig())


def _type_name(tp: Any) -> str:
    if typing.get_origin(tp) is list or tp is list:
        (item,) = typing.get_args(tp) or (Any,)
        plural = ("lists" if typing.get_origin(item) is list else
                  {int: "integers", float: "numbers", bool: "true/false values", str: "strings"}.get(item, "values"))
        return f"a list of {plural}"
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if args:
        inner = " or ".join(_type_name(a) for a in args)
        return f"{inner} or null" if type(None) in typing.get_args(tp) else inner
    return {int: "an integer", float: "a number", bool: "true/false", str: "a string"}.get(tp, str(tp))


class _BadValue(UserError):
    """The value has the right type but an impossible value (not finite, out of range): no other type is tried."""


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Check ``value`` against the annotation ``tp``; return it (ints widened to floats where a float is due)."""
    if tp is Any:
        return value
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(value, a, key)
            except _BadValue:
                raise
            except UserError:
                continue
        raise UserError(f"config key {key} must be {_type_name(tp)}, got {short_repr(value)}")
    if origin is list or tp is list:  # options may hold lists (per-step scales, sigma lists)
        if not isinstance(value, (list, tuple)):
            raise UserError(f"config key {key} must be a list, got {short_repr(value)}")
        (item,) = typing.get_args(tp) or (Any,)
        return [_coerce(v, item, f"{key}[{n}]") for n, v in enumerate(value)]
    ok = (
        (tp is bool and isinstance(value, bool))
        or (tp is int and isinstance(value, int) and not isinstance(value, bool))
        or (tp is float and isinstance(value, (int, float)) and not isinstance(value, bool))
        or (tp is str and isinstance(value, str))
    )
    if not ok:
        raise UserError(f"config key {key} must be {_type_name(tp)}, got {short_repr(value)}")
    if tp is float:
        try:
            value = float(value)
        except OverflowError:
            raise _BadValue(f"config key {key} must be a finite number, got {short_repr(value)}") from None
        if not math.isfinite(value):
            raise _BadValue(f"config key {key} must be a finite number, got {value!r}")
    elif tp is int and not -(2**63) <= value < 2**63:
        raise _BadValue(f"config key {key} is out of range, got {short_repr(value)}")
    elif tp is str and "\0" in value:
        raise _BadValue(f"config key {key} contains a NUL byte")
    return value


def _build(cls: type, data: Mapping[str, Any], prefix: str) -> Any:
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    for key in data:
        if key not in names:
            full = f"{prefix}{key}" if str(key).isprintable() else f"{prefix}{short_repr(key)}"
            close = difflib.get_close_matches(str(key), names, n=1, cutoff=0.6)
            hint = (f" — did you mean {prefix}{close[0]}?" if close
                    else f" (known keys under {prefix or 'the top level'}: {', '.join(names)})")
            raise UserError(f"unknown config key {full}{hint}")
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        value, tp, key = data[f.name], hints[f.name], f"{prefix}{f.name}"
        if dataclasses.is_dataclass(tp):
            if not isinstance(value, Mapping):
                raise UserError(f"config key {key} must be a mapping of keys, got {short_repr(value)}")
            kwargs[f.name] = _build(tp, value, key + ".")
        else:
            kwargs[f.name] = _coerce(value, tp, key)
    return cls(**kwargs)


def _get(cfg: RunConfig, dotted: str) -> Any:
    obj: Any = cfg
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def unset_required(cfg: RunConfig) -> list[str]:
    """The keys of :data:`REQUIRED` that are still null."""
    return [key for key in REQUIRED if _get(cfg, key) is None]


def check_backend(name: str) -> None:
    """``attention.backend`` names a backend the attention package knows (its list lives there)."""
    from vidax_core.attention.backends import ATTENTION_BACKENDS

    if name not in ATTENTION_BACKENDS:
        raise UserError(f"config key attention.backend must be one of {', '.join(ATTENTION_BACKENDS)}, "
                        f"got {short_repr(name)}")


def validate(data: Mapping[str, Any], *, required: bool = True) -> RunConfig:
    """Validate a merged plain dict into a frozen :class:`RunConfig`; ``required=False`` leaves the keys of
    :data:`REQUIRED` that nothing set as null (``vidax show-config`` prints such a config)."""
    cfg = _build(RunConfig, data, "")
    for key in unset_required(cfg) if required else ():
        raise UserError(unset_message(key))
    for key, ok, requirement in _RANGES:
        value = _get(cfg, key)
        if value is not None and not ok(value):
            raise UserError(f"config key {key} {requirement}, got {short_repr(value)}")
    check_backend(cfg.attention.backend)
    check_chunk_size(cfg.offload.chunk_size)
    if not isinstance(cfg.vae.tiling, (bool, Mapping)):  # its knobs are the model's: checked by the pre-run check
        check_tiling(cfg.vae.tiling)
    if not isinstance(cfg.options, Mapping):
        raise UserError(f"config key options must be a mapping of the model's options, got {short_repr(cfg.options)}")
    check_files(cfg.model.files)
    if cfg.model.id in ("", "???"):
        raise UserError("no model chosen: set model.id (see `vidax list-models`)")
    if cfg.prompts is not None and (not isinstance(cfg.prompts, Sequence) or isinstance(cfg.prompts, (str, bytes))):
        raise UserError("config key prompts must be a list of prompts (strings or {prompt: ..., seed: ...} mappings)")
    sched = cfg.sampling.scheduler
    if sched is not None and not isinstance(sched, (str, Mapping)):
        raise UserError("config key sampling.scheduler must be null, a sampler name, or {name: ..., <options>}")
    check_scheduler_options(sched)
    cfg = dataclasses.replace(cfg, cache=cache_key.as_dict(cache_key.parse_cache(cfg.cache, cfg.sampling.num_steps)))
    cfg = dataclasses.replace(cfg, lora=check_lora(cfg.lora))
    return check_paths(cfg)


def load_yaml(path: str) -> dict[str, Any]:
    """Read a user YAML file into a plain dict (one-line errors for missing files and syntax errors)."""
    return parse.load_yaml_file(path)


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """``key=value`` arguments into a nested dict: string keys verbatim, other values parsed as YAML."""
    return parse.parse_overrides(items, RunConfig)


def merge(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """Merge plain dicts left to right (later wins); a later mapping replaces scalars and merges mappings."""
    return parse.merge(*layers)


def model_id_of(*layers: Mapping[str, Any]) -> str | None:
    """The model id named by the highest layer that names one."""
    found = None
    for layer in layers:
        model = layer.get("model") if isinstance(layer, Mapping) else None
        if isinstance(model, Mapping) and model.get("id") not in (None, "???"):
            found = model["id"]
    return found


def resolve(user_yaml: str | None, overrides: Sequence[str], preset_for: Any) -> RunConfig:
    """Full config resolution: ``preset_for(model_id)`` returns the model's preset dict (or raises UserError)."""
    return resolve_layers(load_yaml(user_yaml) if user_yaml else {}, overrides, preset_for)


def resolve_layers(user: Mapping[str, Any], overrides: Sequence[str], preset_for: Any) -> RunConfig:
    """:func:`resolve` with the user's layer given as a dict (the Python API)."""
    cli = parse_overrides(overrides)
    model_id = model_id_of(user, cli)
    if model_id is None:
        raise UserError("no model chosen: set model.id in the config or pass model.id=... (see `vidax list-models`)")
    preset = preset_for(str(model_id))
    return validate(merge(defaults_dict(), preset, user, cli))


def to_dict(cfg: RunConfig) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def to_yaml(cfg: RunConfig | Mapping[str, Any]) -> str:
    data = to_dict(cfg) if dataclasses.is_dataclass(cfg) else dict(cfg)
    return OmegaConf.to_yaml(OmegaConf.create(data))
