"""Sampler protocol, host-side plans and the sampler registry.

A sampler is split in two halves:

* ``plan(num_steps, **dynamic)`` runs on the host (numpy) once per generation. It computes the
  timestep / sigma schedule and every per-step scalar coefficient (solver order ramp, corrector
  weights, ...) and returns a :class:`SamplerPlan` of numpy arrays.
* ``step(plan_arrays, state, i, model_output, sample, noise=None)`` runs on the device. ``i`` is a
  traced int32 scalar: all per-step quantities are gathered from ``plan_arrays`` with jnp indexing
  and all branching is done with ``jnp.where``, so a whole denoising loop compiles exactly once.

Samplers are frozen (hashable) dataclasses holding their options, so they can be closed over or
passed as static arguments to ``jax.jit``.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Mapping

import jax.numpy as jnp
import numpy as np

__all__ = [
    "SamplerPlan",
    "Sampler",
    "register_sampler",
    "get_sampler",
    "available_samplers",
    "register_scheduler_class",
    "sampler_from_scheduler_config",
    "supported_scheduler_classes",
    "SchedulerConfigError",
]


@dataclass(frozen=True, eq=False)
class SamplerPlan:
    """Host-side (numpy) schedule of one sampling run.

    Attributes:
        timesteps: ``(N,)`` float32, the value handed to the model at step ``i``.
        sigmas: ``(N+1,)`` float32 noise levels (for flow samplers ``x_t = (1-s) x0 + s eps``); the
            last entry is the level the final step lands on (0 unless configured otherwise).
        num_steps: ``N``.
        extras: sampler-specific per-step tables (coefficients, flags), numpy arrays whose leading
            axis is the step index.
    """

    timesteps: np.ndarray
    sigmas: np.ndarray
    num_steps: int
    extras: Mapping[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self):
        if self.timesteps.shape != (self.num_steps,):
            raise ValueError(f"timesteps shape {self.timesteps.shape} != ({self.num_steps},)")
        if self.timesteps.dtype != np.float32:
            raise ValueError(f"timesteps must be float32, got {self.timesteps.dtype}")

    def tail(self, start: int) -> "SamplerPlan":
        """The plan from step ``start`` on (an image/video-to-video run entered part way). Only for plans without
        per-step tables: a multistep sampler's coefficients depend on the steps before."""
        if not 0 <= start < self.num_steps:
            raise ValueError(f"cannot start a {self.num_steps}-step plan at step {start}")
        if self.extras:
            raise ValueError("a plan with per-step coefficient tables cannot start part way: use flow_euler")
        return SamplerPlan(timesteps=self.timesteps[start:], sigmas=self.sigmas[start:],
                           num_steps=self.num_steps - start)

    def arrays(self) -> dict[str, jnp.ndarray]:
        """The plan as a pytree of jnp arrays: what ``Sampler.step`` takes as ``plan_arrays``."""
        out = {"timesteps": jnp.asarray(self.timesteps), "sigmas": jnp.asarray(self.sigmas)}
        for k, v in self.extras.items():
            out[k] = jnp.asarray(v)
        return out


def plan_values_ok(arrays: Mapping[str, Any]) -> bool:
    """Every value of a plan's arrays is finite, except ``+inf`` in ``sigmas``: the noise level of a timestep at
    zero terminal SNR (CogVideoX's rescaled schedules start from pure noise, ``abar = 0``)."""
    for name, a in arrays.items():
        a = np.asarray(a, dtype=np.float64)
        ok = np.isfinite(a) | (np.isposinf(a) if name == "sigmas" else False)
        if not ok.all():
            return False
    return True


class Sampler:
    """Base class of all vidax samplers (subclasses are frozen dataclasses).

    Subclasses set ``name`` and implement ``plan``, ``init_state`` and ``step``.
    """

    name: ClassVar[str] = "?"
    #: options ``step``/``init_state``/``scale_model_input`` read; everything else only shapes the
    #: plan. ``None`` means all options (conservative).
    step_fields: ClassVar[tuple[str, ...] | None] = None

    @property
    def needs_noise(self) -> bool:
        """True when ``step`` consumes a fresh standard-normal ``noise`` array (same shape as sample)."""
        return False

    @property
    def init_noise_sigma(self) -> float:
        """Scale of the initial latent noise (``latents = noise * init_noise_sigma``)."""
        return 1.0

    def plan(self, num_steps: int, **kw) -> SamplerPlan:  # pragma: no cover - abstract
        raise NotImplementedError

    def init_state(self, plan: SamplerPlan, sample) -> Any:
        """Initial multistep state (a pytree of jnp arrays). Stateless samplers return ``{}``."""
        return {}

    def step(self, plan_arrays, state, i, model_output, sample, noise=None):  # pragma: no cover
        raise NotImplementedError

    def scale_model_input(self, plan_arrays, i, sample):
        """What the model is fed at step ``i`` (identity for flow / VP-space samplers)."""
        return sample

    def model_timesteps(self, plan_arrays, i):
        """The denoiser's timestep at step ``i``: the plan's scalar ``timesteps[i]`` (a per-frame sampler gives one
        per frame, (1, F))."""
        return plan_arrays["timesteps"][i]

    def step_key(self) -> tuple:
        """Hashable key of what the traced step depends on: two samplers with equal keys trace the same
        ``step`` for the same plan shapes, so a jit cache keyed on it can be shared (e.g. across shifts)."""
        fields = self.step_fields if self.step_fields is not None else tuple(self.options())
        return (type(self), tuple((f, getattr(self, f)) for f in fields))

    def options(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]


def _check_noise(sampler: Sampler, noise):
    if sampler.needs_noise and noise is None:
        raise ValueError(f"sampler {sampler.name!r} is stochastic: step() needs a `noise` array")


# ----------------------------------------------------------------------------------------------
# registry


_REGISTRY: dict[str, Callable[..., Sampler]] = {}


def register_sampler(name: str, factory: Callable[..., Sampler]) -> None:
    """Register ``factory(**options) -> Sampler`` under ``name`` (a dataclass type works)."""
    if not isinstance(name, str) or not name:
        raise ValueError("sampler name must be a non-empty string")
    _REGISTRY[name] = factory


def available_samplers() -> list[str]:
    return sorted(_REGISTRY)


def _factory_options(factory) -> list[str] | None:
    if dataclasses.is_dataclass(factory):
        return [f.name for f in dataclasses.fields(factory) if f.init]
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind == p.VAR_KEYWORD for p in params):
        return None
    return [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


#: ``sampling.scheduler`` options that are not the sampler's own but its plan's: explicit lists, as diffusers'
#: ``scheduler.set_timesteps(sigmas=..., timesteps=...)`` takes them (few-step distilled recipes).
PLAN_LISTS = ("sigmas", "timesteps")


def split_plan_lists(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the sampler's options, its plan's ``sigmas`` / ``timesteps`` lists) of ``sampling.scheduler``."""
    opts = dict(options)
    lists = {k: [float(v) for v in opts.pop(k)] for k in PLAN_LISTS if opts.get(k) is not None}
    for k in PLAN_LISTS:
        opts.pop(k, None)
    return opts, lists


def plan_with_lists(sampler: Sampler, num_steps: int | None, lists: Mapping[str, Any], **kwargs: Any) -> "SamplerPlan":
    """``sampler.plan`` with explicit lists: each must have ``num_steps`` entries and the sampler must take it."""
    if lists:
        params = inspect.signature(sampler.plan).parameters
        name = getattr(sampler, "name", type(sampler).__name__)
        for k, v in lists.items():
            if k not in params:
                raise ValueError(f"sampler {name} takes no {k} list (flow_euler does, as diffusers' "
                                 "FlowMatchEulerDiscreteScheduler.set_timesteps)")
            if not v:
                raise ValueError(f"sampling.scheduler.{k} is empty")
            if num_steps is not None and len(v) != num_steps:
                raise ValueError(f"sampling.scheduler.{k} has {len(v)} entries but sampling.num_steps={num_steps}: "
                                 f"set sampling.num_steps={len(v)}")
        kwargs = {**kwargs, **lists}
        num_steps = None
    return sampler.plan(num_steps, **kwargs) if kwargs else sampler.plan(num_steps)


def get_sampler(name: str, **options) -> Sampler:
    """Build the sampler registered as ``name`` with ``options``.

    Raises a one-line ``ValueError`` naming the supported samplers (unknown name) or the supported
    options (unknown option).
    """
    _ensure_builtin()
    if name not in _REGISTRY:
        raise ValueError(f"unknown sampler {name!r}; supported samplers: {', '.join(available_samplers())}")
    factory = _REGISTRY[name]
    allowed = _factory_options(factory)
    if allowed is not None:
        bad = sorted(set(options) - set(allowed))
        if bad:
            raise ValueError(
                f"unknown option(s) {', '.join(bad)} for sampler {name!r}; supported options: {', '.join(allowed)}"
            )
    return factory(**options)


# ----------------------------------------------------------------------------------------------
# diffusers scheduler_config.json -> sampler


class SchedulerConfigError(ValueError):
    """A diffusers scheduler config that vidax cannot reproduce faithfully."""


_SCHEDULER_CLASSES: dict[str, Callable[[dict], Sampler]] = {}


def register_scheduler_class(class_name: str, converter: Callable[[dict], Sampler]) -> None:
    """Register ``converter(config_dict) -> Sampler`` for a diffusers ``_class_name``."""
    _SCHEDULER_CLASSES[class_name] = converter


def supported_scheduler_classes() -> list[str]:
    _ensure_builtin()
    return sorted(_SCHEDULER_CLASSES)


def sampler_from_scheduler_config(config: Mapping[str, Any], **overrides) -> Sampler:
    """Map a diffusers ``scheduler_config.json`` dict to the equivalent vidax sampler.

    ``overrides`` are vidax sampler options applied on top (e.g. ``shift=5.0``).
    Unknown classes and numerics-changing fields vidax does not implement raise a one-line
    ``SchedulerConfigError``; cosmetic fields (``_diffusers_version``, ...) are ignored.
    """
    _ensure_builtin()
    cls = config.get("_class_name")
    if cls not in _SCHEDULER_CLASSES:
        raise SchedulerConfigError(
            f"unsupported scheduler class {cls!r}; supported: {', '.join(supported_scheduler_classes())}"
        )
    sampler = _SCHEDULER_CLASSES[cls](dict(config))
    if overrides:
        opts = sampler.options()
        bad = sorted(set(overrides) - set(opts))
        if bad:
            raise ValueError(
                f"unknown option(s) {', '.join(bad)} for sampler {sampler.name!r}; supported options: {', '.join(opts)}"
            )
        sampler = dataclasses.replace(sampler, **overrides)  # type: ignore[type-var]
    return sampler


class ConfigReader:
    """Consumes a diffusers config dict field by field.

    ``take(name, default)`` returns a supported field's value; ``require_default(name, default)``
    accepts a field vidax does not implement only when it holds the diffusers default (or is absent);
    ``finish()`` rejects leftover unknown fields unless they look like "off" values
    (None / False / empty) and ignores ``_``-prefixed and declared cosmetic fields.
    """

    def __init__(self, cls_name: str, config: dict, cosmetic: tuple[str, ...] = ()):
        self.cls_name = cls_name
        self.config = dict(config)
        self.cosmetic = set(cosmetic)
        self.used: set[str] = set()

    def take(self, name: str, default=None):
        """The field's value; a switch (a field whose default is a bool) must hold true or false, as diffusers
        writes it: anything else is a damaged file, refused naming the field."""
        self.used.add(name)
        value = self.config.get(name, default)
        if isinstance(default, bool) and value is not None and not isinstance(value, bool):
            raise SchedulerConfigError(f"{self.cls_name}: {name} must be true or false, got {str(value)[:40]}")
        return value

    def require_default(self, name: str, default, why: str = "not supported by vidax") -> None:
        self.used.add(name)
        if name not in self.config:
            return
        value = self.config[name]
        if _same(value, default):
            return
        raise SchedulerConfigError(
            f"{self.cls_name}: {name}={value!r} is {why} (only the default {default!r} is)"
        )

    def finish(self) -> None:
        for k, v in self.config.items():
            if k.startswith("_") or k in self.used or k in self.cosmetic:
                continue
            if v is None or v is False or (isinstance(v, (list, tuple, dict)) and len(v) == 0):
                continue
            raise SchedulerConfigError(f"{self.cls_name}: unrecognised field {k}={v!r}; "
                                       "vidax cannot tell whether it changes numerics")


def _same(a, b) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return list(a) == list(b)
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    return a == b


# ----------------------------------------------------------------------------------------------
# shared host-side helpers


def f32(x) -> np.float32:
    return np.float32(x)


def gather(plan_arrays, key: str, i):
    """``plan_arrays[key][i]`` with a traced ``i``."""
    return jnp.take(plan_arrays[key], i, axis=0)


def calculate_shift(seq_len: int, base_seq_len: int = 256, max_seq_len: int = 4096,
                    base_shift: float = 0.5, max_shift: float = 1.15) -> float:
    """Resolution-dependent ``mu`` (the linear rule diffusers' Flux/Hunyuan/LTX pipelines use)."""
    m = (max_shift - base_shift) / (max_seq_len - base_seq_len)
    b = base_shift - m * base_seq_len
    return seq_len * m + b


_BUILTIN_LOADED = False


def _ensure_builtin():
    global _BUILTIN_LOADED
    if not _BUILTIN_LOADED:
        _BUILTIN_LOADED = True
        import vidax_core.schedulers  # noqa: F401  (registers the built-in samplers)
