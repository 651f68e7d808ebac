"""Guidance strategies: how the model passes of one denoising step combine into the prediction the sampler uses.

A strategy names its *branches* (one model pass each: which prompt it reads and which extra model inputs it gets),
computes its per-step scales on the host once per run (so a scale may change with the step, as CogVideoX's dynamic
cosine guidance and Wan2.2's per-expert scales do), and combines the branch predictions inside the one jitted step.
Predictions may be pytrees (video and audio latents): the linear formulas apply leaf by leaf.

A strategy may carry state from step to step (adaptive projected guidance's momentum): it sets ``carries_state``,
gives the first step's state in :meth:`Guidance.init_state` and returns the next one from
:meth:`Guidance.combine_state`; the step keeps it beside the sampler's.

The family plugin picks the strategy (hook ``guidance``); the run config tunes it through ``sampling.guidance_scale``
and the family's ``options``. Without a hook answer the core uses :func:`default_guidance`. A checkpoint's diffusers
guider config (``guider/guider_config.json``) becomes a strategy through :mod:`vidax_core.guiders`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

PROMPT = "prompt"
NEGATIVE = "negative"


@dataclass(frozen=True)
class Branch:
    """One model pass per step: ``name``, the prompt it reads (``"prompt"`` or ``"negative"``) and extra keyword
    inputs of the denoiser that only this branch gets (e.g. the layers a spatio-temporal-guidance pass skips)."""

    name: str
    prompt: str = PROMPT
    model_kwargs: Mapping[str, Any] = field(default_factory=dict)


class Guidance:
    """Base class. Subclasses set ``branches`` and implement :meth:`combine`."""

    branches: tuple[Branch, ...] = (Branch("cond"),)
    carries_state: bool = False  # True: init_state / combine_state carry a pytree of arrays from step to step

    def scales(self, timesteps: np.ndarray) -> dict[str, np.ndarray]:
        """Per-step scale tables ``{name: (N,) float32}`` computed on the host from the plan's model timesteps."""
        return {}

    def model_inputs(self, scales: Mapping[str, jax.Array], batch: int) -> dict[str, jax.Array]:
        """Denoiser keyword inputs every branch gets at this step (embedded guidance feeds its scale here)."""
        return {}

    def shares_call(self, names: Sequence[str]) -> bool:
        """Whether the branches ``names`` may run as one model call, stacked on the batch axis (their contexts
        alike). By default only branches without their own ``model_kwargs`` do; a strategy whose denoiser takes
        those inputs per batch entry says so here and in :meth:`call_inputs`."""
        by_name = {b.name: b for b in self.branches}
        return len(names) == 1 or not any(by_name[n].model_kwargs for n in names)

    def call_inputs(self, names: Sequence[str], scales: Mapping[str, jax.Array], sizes: Sequence[int]
                    ) -> tuple[dict[str, Any], list[dict[str, jax.Array]]]:
        """The keyword inputs of one model call of the branches ``names`` (``sizes[k]`` batch entries each): the
        call's static ones and each branch's arrays (stacked by the step in the branches' order). By default the
        first branch's ``model_kwargs`` and :meth:`model_inputs` for each."""
        statics = dict(next(b for b in self.branches if b.name == names[0]).model_kwargs)
        return statics, [self.model_inputs(scales, n) for n in sizes]

    def combine(self, preds: Mapping[str, Any], scales: Mapping[str, jax.Array]) -> Any:
        """The guided prediction from ``{branch name: prediction}`` (traced)."""
        return preds[self.branches[0].name]

    def combine_at(self, preds: Mapping[str, Any], scales: Mapping[str, jax.Array], latents: Any,
                   sigma: jax.Array) -> Any:
        """:meth:`combine` for strategies that also need the step's latents and noise level ``sigma`` (LTX-2.x
        guides in the clean-sample space ``x - sigma * v``, where its rescale is not linear); the step calls this."""
        return self.combine(preds, scales)

    def init_state(self, latents: Any) -> Any:
        """The state the first step's :meth:`combine_state` gets (``carries_state`` strategies): a pytree of
        arrays shaped from the pass's latents (batch 1)."""
        return None

    def combine_state(self, preds: Mapping[str, Any], scales: Mapping[str, jax.Array], latents: Any,
                      sigma: jax.Array, state: Any) -> tuple[Any, Any]:
        """The guided prediction and the state the next step gets; the step calls this (stateless strategies:
        :meth:`combine_at`, the state passed through)."""
        return self.combine_at(preds, scales, latents, sigma), state

    @property
    def prompts(self) -> tuple[str, ...]:
        """The prompts the branches read, in first-use order (what ``encode_prompt`` is asked for)."""
        seen: list[str] = []
        for b in self.branches:
            if b.prompt not in seen:
                seen.append(b.prompt)
        return tuple(seen)

    def describe(self) -> str:
        return type(self).__name__


def _lin(fn: Callable[..., jax.Array], *trees: Any) -> Any:
    return jax.tree.map(lambda *xs: fn(*[x.astype(jnp.float32) for x in xs]), *trees)


def _per_step(value: float | Callable[[float], float], timesteps: np.ndarray) -> np.ndarray:
    if callable(value):
        return np.asarray([value(float(t)) for t in timesteps], np.float32)
    return np.full((len(timesteps),), value, np.float32)


def rescale(guided: Any, cond: Any, phi: jax.Array) -> Any:
    """Guidance rescale (Lin et al. 2023, as diffusers' ``rescale_noise_cfg``): match the guided prediction's std
    to the conditional one's, per sample over all other axes (unbiased std, as torch), then mix by ``phi``."""

    def one(g, c):
        axes = tuple(range(1, g.ndim))
        n = int(np.prod([g.shape[a] for a in axes]))

        def std(x):
            return jnp.sqrt(jnp.sum((x - x.mean(axes, keepdims=True)) ** 2, axes, keepdims=True) / (n - 1))

        return phi * (g * (std(c) / std(g))) + (1.0 - phi) * g

    return jax.tree.map(lambda g, c: one(g.astype(jnp.float32), c.astype(jnp.float32)), guided, cond)


class NoGuidance(Guidance):
    """A single conditional pass (guidance scale <= 1, or a guidance-distilled model)."""

    branches = (Branch("cond"),)


class _CondUncond(Guidance):
    """Two passes, the prompt's and the negative prompt's; ``formula`` names the prediction the update is added to
    (``"uncond"`` or ``"cond"``)."""

    formula: str = "uncond"

    def __post_init__(self) -> None:
        if self.formula not in ("uncond", "cond"):
            raise ValueError(f"formula must be 'uncond' or 'cond', got {self.formula!r}")

    @property
    def branches(self) -> tuple[Branch, ...]:  # type: ignore[override]
        return (Branch("cond"), Branch("uncond", NEGATIVE))


@dataclass(frozen=True)
class ClassifierFree(_CondUncond):
    """Two passes, conditional and negative prompt.

    ``formula="uncond"``: ``uncond + g * (cond - uncond)`` (Wan, CogVideoX, LTX, HunyuanVideo true CFG);
    ``formula="cond"``: ``cond + g * (cond - uncond)`` (Cosmos-Predict2.5). ``scale`` is a number or a function of
    the model timestep (per-step scales: Wan2.2's experts, CogVideoX's dynamic cosine schedule). ``rescale_phi`` > 0
    applies guidance rescale.
    """

    scale: float | Callable[[float], float] = 5.0
    formula: str = "uncond"
    rescale_phi: float = 0.0

    def scales(self, timesteps):
        return {"g": _per_step(self.scale, timesteps)}

    def combine(self, preds, scales):
        g = scales["g"]
        base = "uncond" if self.formula == "uncond" else "cond"
        out = _lin(lambda c, u, b: b + g * (c - u), preds["cond"], preds["uncond"], preds[base])
        if self.rescale_phi > 0:
            out = rescale(out, preds["cond"], jnp.float32(self.rescale_phi))
        return out


@dataclass(frozen=True)
class CFGZeroStar(Guidance):
    """Two passes combined as CFG-Zero* (Fan et al. 2025, as diffusers' Helios pyramid pipeline with
    ``is_cfg_zero_star``): ``uncond * a + g * (cond - uncond * a)`` with the per-sample projection
    ``a = <cond, uncond> / (|uncond|^2 + 1e-8)`` over all other axes; the first ``zero_steps + 1`` steps
    (``zero_steps`` < 0: none) predict zero (the zero-init)."""

    scale: float = 5.0
    zero_steps: int = -1

    @property
    def branches(self) -> tuple[Branch, ...]:  # type: ignore[override]
        return (Branch("cond"), Branch("uncond", NEGATIVE))

    def scales(self, timesteps):
        n = len(timesteps)
        return {"g": _per_step(self.scale, timesteps), "zero": (np.arange(n) <= self.zero_steps).astype(np.float32)}

    def combine(self, preds, scales):
        g, zero = scales["g"], scales["zero"]

        def one(c, u):
            axes = tuple(range(1, c.ndim))
            a = jnp.sum(c * u, axes, keepdims=True) / (jnp.sum(u * u, axes, keepdims=True) + 1e-8)
            return jnp.where(zero > 0, 0.0 * c, u * a + g * (c - u * a))

        return _lin(one, preds["cond"], preds["uncond"])


@dataclass(frozen=True)
class SpatioTemporal(Guidance):
    """Three passes: conditional, negative and a perturbed conditional pass (spatio-temporal guidance, as the LTX
    recipes use): ``uncond + g * (cond - uncond) + s * (cond - perturbed)``, then optional guidance rescale.
    ``perturb`` are the denoiser inputs of the perturbed pass (e.g. ``{"skip_block_indices": ...}``)."""

    scale: float | Callable[[float], float] = 3.0
    stg_scale: float | Callable[[float], float] = 1.0
    perturb: Mapping[str, Any] = field(default_factory=dict)
    rescale_phi: float = 0.0

    @property
    def branches(self) -> tuple[Branch, ...]:  # type: ignore[override]
        return (Branch("cond"), Branch("uncond", NEGATIVE), Branch("perturbed", PROMPT, dict(self.perturb)))

    def scales(self, timesteps):
        return {"g": _per_step(self.scale, timesteps), "s": _per_step(self.stg_scale, timesteps)}

    def combine(self, preds, scales):
        g, s = scales["g"], scales["s"]
        out = _lin(lambda c, u, p: u + g * (c - u) + s * (c - p), preds["cond"], preds["uncond"], preds["perturbed"])
        if self.rescale_phi > 0:
            out = rescale(out, preds["cond"], jnp.float32(self.rescale_phi))
        return out


@dataclass(frozen=True)
class Embedded(Guidance):
    """Guidance distilled into the model: the scale is a model input (``input_name``, times ``multiplier``), one
    pass per step (HunyuanVideo 1.0). With ``true_cfg_scale`` > 1 a negative pass is added on top and combined as
    ``uncond + true_cfg * (cond - uncond)``; both passes get the embedded scale."""

    scale: float = 6.0
    input_name: str = "guidance"
    multiplier: float = 1.0
    true_cfg_scale: float = 1.0

    @property
    def branches(self) -> tuple[Branch, ...]:  # type: ignore[override]
        if self.true_cfg_scale > 1.0:
            return (Branch("cond"), Branch("uncond", NEGATIVE))
        return (Branch("cond"),)

    def scales(self, timesteps):
        return {"embedded": _per_step(self.scale * self.multiplier, timesteps),
                "g": _per_step(self.true_cfg_scale, timesteps)}

    def model_inputs(self, scales, batch):
        return {self.input_name: jnp.broadcast_to(scales["embedded"].astype(jnp.float32), (batch,))}

    def combine(self, preds, scales):
        if len(self.branches) == 1:
            return preds["cond"]
        g = scales["g"]
        return _lin(lambda c, u: u + g * (c - u), preds["cond"], preds["uncond"])


def _window(n: int, first: int, last: int | None) -> np.ndarray:
    """(N,) float32: 1 at steps ``first <= i < last`` (``last`` None: to the end), else 0."""
    steps = np.arange(n)
    return ((steps >= first) & (steps < (n if last is None else last))).astype(np.float32)


@dataclass(frozen=True)
class WindowedClassifierFree(ClassifierFree):
    """Classifier-free guidance at steps ``first <= i < last`` only (``scale`` a number): elsewhere the scale is
    the formula's identity (1 for ``uncond``, 0 for ``cond``), which gives the conditional prediction, as diffusers'
    guiders with ``start`` / ``stop`` do."""

    first: int = 0
    last: int | None = None

    def scales(self, timesteps):
        on = _window(len(timesteps), self.first, self.last)
        off = np.float32(0.0 if self.formula == "cond" else 1.0)
        return {"g": np.where(on > 0, np.float32(self.scale), off).astype(np.float32)}


@dataclass(frozen=True)
class AdaptiveProjected(_CondUncond):
    """Adaptive projected guidance (Sadat et al. 2024, diffusers' ``AdaptiveProjectedGuidance``): two passes; the
    difference ``cond - uncond`` is averaged with momentum over the steps (``running = diff + momentum *
    running``; no momentum: the step's difference), clipped to an L2 norm of ``norm_threshold`` (0: off), split
    into its parts parallel and orthogonal to the conditional prediction, and the parallel part scaled by ``eta``:
    ``base + scale * (orthogonal + eta * parallel)`` with ``base`` the unconditional prediction (``formula="uncond"``)
    or the conditional one (``"cond"``: diffusers' ``use_original_formulation``). Norms and projections run over
    ``norm_dims`` (axes of the prediction, negative from the end; None: all but the batch). Only steps
    ``first <= i < last`` are guided (and update the average); the others take the conditional prediction. Then
    the optional guidance rescale ``rescale_phi``, as :class:`ClassifierFree`."""

    scale: float = 7.5
    momentum: float | None = None
    norm_threshold: float = 15.0
    norm_dims: tuple[int, ...] | None = None
    eta: float = 1.0
    formula: str = "uncond"
    rescale_phi: float = 0.0
    first: int = 0
    last: int | None = None
    carries_state = True

    def scales(self, timesteps):
        return {"g": _per_step(self.scale, timesteps), "on": _window(len(timesteps), self.first, self.last)}

    def init_state(self, latents):
        return jax.tree.map(lambda a: jnp.zeros(jnp.shape(a), jnp.float32), latents)

    def combine_state(self, preds, scales, latents, sigma, state):
        g, on = scales["g"], scales["on"] > 0
        m = np.float32(self.momentum or 0.0)

        def one(c, u, running):
            axes = tuple(range(1, c.ndim)) if self.norm_dims is None else tuple(d % c.ndim for d in self.norm_dims)
            diff = c - u
            running = jnp.where(on, diff + m * running, running) if self.momentum is not None else diff
            d = running
            if self.norm_threshold > 0:
                norm = jnp.sqrt(jnp.sum(d * d, axes, keepdims=True))
                d = d * jnp.minimum(1.0, np.float32(self.norm_threshold) / norm)
            unit = c / jnp.maximum(jnp.sqrt(jnp.sum(c * c, axes, keepdims=True)), 1e-12)
            parallel = jnp.sum(d * unit, axes, keepdims=True) * unit
            guided = (c if self.formula == "cond" else u) + g * ((d - parallel) + np.float32(self.eta) * parallel)
            return jnp.where(on, guided, c), running

        c, u = (jax.tree.map(lambda a: a.astype(jnp.float32), preds[k]) for k in ("cond", "uncond"))
        pairs = jax.tree.map(one, c, u, state)
        is_pair = lambda x: isinstance(x, tuple)  # noqa: E731
        out = jax.tree.map(lambda p: p[0], pairs, is_leaf=is_pair)
        new_state = jax.tree.map(lambda p: p[1], pairs, is_leaf=is_pair)
        if self.rescale_phi > 0:
            out = rescale(out, c, jnp.float32(self.rescale_phi))
        return out, new_state

    def combine(self, preds, scales):
        raise NotImplementedError("AdaptiveProjected carries a momentum state: the step calls combine_state")


def default_guidance(run: Any, **fields: Any) -> Guidance:
    """Classifier-free guidance with ``sampling.guidance_scale`` when it is > 1, else a single pass (the rule of
    most diffusers pipelines); ``fields``: the family's other :class:`ClassifierFree` fields (``rescale_phi``,
    ``formula``, a ``scale`` schedule of the step's timestep)."""
    g = float(run.sampling.guidance_scale)
    return ClassifierFree(**{"scale": g, **fields}) if g > 1.0 else NoGuidance()

