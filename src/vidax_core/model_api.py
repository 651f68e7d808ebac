"""The small contracts between the generic pipeline and a family plugin's components."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np


@dataclass(frozen=True)
class GridLimit:
    """The token grid (latent grid / patch) a denoiser can take, per axis (frames, height, width): at most
    ``most`` tokens (None: any number), or exactly that many with ``exact`` (a learned table of one size).
    ``what`` names the limit and where it is set, for the one-line refusal
    (:mod:`vidax_core.runner.grid_check`), e.g. ``"rope_max_seq_len=32 in transformer/config.json (the DiT's
    RoPE table)"``."""

    most: tuple[int | None, int | None, int | None]
    what: str
    exact: bool = False


@dataclass(frozen=True)
class DitBuild:
    """How to build a family's denoiser.

    ``ctor()`` constructs the NNX module (called under ``nnx.eval_shape`` for the abstract tree); ``component`` is
    the checkpoint folder its weights come from; ``config`` is the family's frozen architecture config;
    ``in_channels`` the latent channels the sampler works on. For the parallel checks made before weights load:
    ``heads`` (attention heads, split by tp then sp), ``patch_size`` ((pt, ph, pw): video tokens =
    latent F*H*W / (pt*ph*pw)) and ``block_counts`` ({stacked group name: blocks}: the groups ``offload.enabled``
    streams from host memory, split by offload.chunk_size).

    ``latent_shapes(batch, (f, h, w))`` gives the shape of the latents the sampler works on, in the layout of the
    family's diffusers pipeline (what it takes as ``latents=``): a tuple, or a dict of tuples for several latent
    streams (e.g. ``{"video": ..., "audio": ...}``). None means ``(batch, in_channels, f, h, w)``.

    ``flops(batch, grid, text_tokens, blocks=None)``: FLOPs of one model call (multiply-add = 2) at latent grid
    ``(f, h, w)`` (before patching) and prompt length ``text_tokens``; ``blocks`` ({group: n}) counts only n blocks
    of a stacked group (``vidax bench --random-dit --blocks``). From the family's shapes (:mod:`vidax_core.flops`); it
    feeds the FLOPs per step and MFU of the run metrics, ``vidax bench`` and ``vidax run --dry-run``. None = not
    stated (those figures are then left out).

    ``example_inputs(batch, grid, text_tokens)``: ``(latents, context, kwargs)`` of one model call at latent grid
    ``(f, h, w)``, as pytrees whose leaves are ``(shape, dtype)`` pairs (drawn at random) or arrays (used as given):
    the latents as the DiT takes them (None: ``latent_shape``), the text context ``encode_prompt`` gives and the
    extra keyword inputs (HunyuanVideo's ``guidance``, LTX-Video's RoPE coordinates); ``vidax bench --random-dit``
    uses them. None = ``latent_shape`` latents, one context array ``(batch, text_tokens, width)`` of the config's
    ``text_dim`` / ``context_dim`` / ``text_embed_dim`` and no keyword inputs.

    ``grid_limit``: the largest (or the one) token grid the denoiser's position embedding covers
    (:class:`GridLimit`); every entry point refuses a size past it before any weight loads, naming the key to change.
    None = no limit. The latent grid must also be a multiple of ``patch_size``, unless ``pads_to_patch`` (the
    denoiser pads it, as Cosmos3's does).

    ``attention_kinds``: the kinds of attention the denoiser's sequence-split layers run
    (:mod:`vidax_core.attention.kinds`: ``softmax``, ``linear``, ``cross``). The heads of a tensor-parallel shard
    must split over ``sp`` only when one of them exchanges heads (softmax's Ulysses all-to-all); the tokens always.

    A mixture of experts over time (Wan2.2 A14B) is a list of builds; each handles model timesteps
    ``t_min <= t < t_max``.
    """

    ctor: Callable[[], Any]
    config: Any
    in_channels: int
    component: str = "transformer"
    param_dtype: Any = np.float32
    heads: int | None = None
    patch_size: tuple[int, int, int] | None = None
    block_counts: dict[str, int] | None = None
    latent_shapes: Callable[[int, tuple[int, int, int]], Any] | None = None
    flops: Callable[..., float] | None = None
    example_inputs: Callable[[int, tuple[int, int, int], int], tuple[Any, Any, dict]] | None = None
    t_min: float = float("-inf")
    t_max: float = float("inf")
    weight_storage: str | None = None  # "int8" / "float8_e4m3fn": the block weights are 8-bit (vidax_core.quant)
    grid_limit: GridLimit | None = None
    pads_to_patch: bool = False
    attention_kinds: tuple[str, ...] = ("softmax",)

    @classmethod
    def of(cls, module: Callable[..., Any], config: Any, **fields: Any) -> "DitBuild":
        """The build of ``module(config, rngs=nnx.Rngs(0))`` (flax imported only when it is constructed), with
        ``param_dtype`` taken from ``config.dtype`` unless given."""

        def ctor():
            from flax import nnx

            return module(config, rngs=nnx.Rngs(0))

        fields.setdefault("param_dtype", getattr(config, "dtype", np.float32))
        return cls(ctor=ctor, config=config, **fields)

    def active(self, t: float) -> bool:
        return self.t_min <= t < self.t_max

    def latent_shape(self, batch: int, grid: tuple[int, int, int]) -> Any:
        if self.latent_shapes is not None:
            return self.latent_shapes(batch, grid)
        return (batch, self.in_channels) + tuple(grid)


@dataclass(frozen=True)
class Conditioning:
    """What the denoiser needs beyond the prompt (an image, a video, first-frame latents), from
    ``prepare_conditioning``; every function is traced inside the jitted step.

    * ``arrays``: host arrays with batch 1 handed to the step (every guidance branch reads the same ones).
    * ``model_kwargs``: names in ``arrays`` passed to the denoiser as keyword arguments (to ``__call__`` and, under
      offload, to ``pre``, whose aux may carry them to ``post``). A change the reference makes to the model's
      prediction belongs in the denoiser so: Cosmos-Predict2.5's DiT takes the velocity of its conditioning frames
      as ``condition_velocity`` and puts it in its output.
    * ``prepare(x, t, arrays) -> (x, t)``: the sampler's latents and scalar model timestep -> the denoiser's input
      and timesteps (``(B,)``, per token ``(B, S)`` or any shape the denoiser takes). None = identity. ``arrays``
      also holds ``"sigma"``, the sampler's noise level at this step (its plan's ``sigmas[i]``), for denoisers fed
      the noise level rather than the model timestep (Cosmos-Predict2.5).
    * ``finalize(latents, arrays) -> latents``: once after the last step.
    * ``per_token_update``: hand ``prepare``'s per-token timesteps to the sampler update too
      (``sampler.step(..., per_token_timesteps=t)``), as LTX's conditioned pipelines do: True for the whole
      latents, or the key of the one latent stream they apply to (``"video"``).
    * ``latents(noise) -> latents``: the initial latents from the drawn or given noise (e.g. HunyuanVideo I2V's
      ``0.999 * noise + 0.001 * image_latents``); host numpy. None = the noise as it is. It is called before
      ``arrays`` go to the devices, so it may add noise-dependent entries to an ``arrays`` dict it holds (Cosmos'
      velocity of the clean conditioning frames, ``noise - condition``).
    * ``start(noise, given, sigma) -> latents``: for pipelines whose ``latents=`` is a clean input to re-noise rather
      than the noise (LTXConditionPipeline's ``denoise_strength``); takes precedence over ``latents``. ``noise`` is
      the seeded draw, ``given`` the run's ``sampling.initial_noise`` or the latents a previous pass hands on
      (:class:`SamplingPass`), None without either; ``sigma`` the plan's first noise level. The result may use
      another layout than ``noise`` (packed tokens, extra conditioning tokens) when ``finalize`` maps it back.
    * ``select_update(new, old, t, arrays) -> latents``: the latents after this step from the sampler's output
      ``new`` and the step's input ``old`` (``t`` the step's scalar model timestep): which entries take the update
      (LTXConditionPipeline holds a partly-strong conditioning token until ``t`` falls below its strength's level),
      or what is put back after it (HunyuanVideo I2V's clean first frame).
    * ``step_noise_shape``: with it set, ``arrays["step_noise"]`` holds fresh standard normal noise of that shape
      each step, ``jax.random.normal(fold_in(fold_in(key(seed), 5), i), shape)``, for ``prepare`` and
      ``select_update`` (LTXConditionPipeline's ``image_cond_noise_scale`` re-noises its conditioning tokens before
      each step: ``prepare`` gives the model the re-noised tokens and ``select_update`` keeps them).
    * ``step_kwargs(values) -> dict``: keyword inputs of every model call that change from step to step, from
      ``values`` = ``{"sigma", "timestep", "next_timestep"}`` of this step (scalars; ``next_timestep`` is the plan's
      next model timestep, 0 at the last step); scalar results are broadcast to the call's batch. HunyuanVideo-1.5's
      step-distilled (meanflow) DiT takes the next timestep as ``timestep_r`` so.
    """

    arrays: Mapping[str, np.ndarray] = field(default_factory=dict)
    model_kwargs: tuple[str, ...] = ()
    prepare: Callable[..., tuple[Any, Any]] | None = None
    finalize: Callable[..., Any] | None = None
    per_token_update: bool | str = False
    latents: Callable[[Any], Any] | None = None
    start: Callable[[Any, Any, float], Any] | None = None
    select_update: Callable[..., Any] | None = None
    step_noise_shape: tuple[int, ...] | None = None
    step_kwargs: Callable[[Mapping[str, Any]], dict] | None = None


@dataclass(frozen=True)
class SamplingPass:
    """One denoising pass of a multi-pass recipe (``sampling_passes`` hook), e.g. LTX-Video's multi-scale recipe:
    a pass at 2/3 of the size, the latent upscaler, a second short pass at twice the first size.

    ``run`` is the run as this pass sees it (its ``sampling.height``/``width``/``num_steps`` and ``options``); the
    prompts are encoded once, the denoiser is loaded once. ``carry(latents, vae) -> latents`` maps the previous
    pass's final latents (host numpy, the layout ``output.save_latents`` writes) to this pass's given latents (what
    :attr:`Conditioning.start` receives as ``given``), with the run's VAE at hand (its latent statistics); None for
    the first pass. ``name`` labels its progress bar.
    """

    run: Any
    name: str = "sampling"
    carry: Callable[[Any, Any], Any] | None = None


@dataclass(frozen=True)
class FrameStage:
    """A second model run over the decoded frames of a run (``frame_stages`` hook), e.g. a video super-resolution
    model after a generator (:mod:`vidax_core.runner.stages`).

    ``model`` is a registered model id that takes a video (task ``v2v``), of any family; ``overrides`` is config
    layered over that id's preset (its ``model.checkpoint``, ``sampling`` sizes, ``options``...) after the parent
    run's ``parallel``, ``attention``, ``offload``, ``runtime``, ``distributed``, ``model.dtype`` and
    ``sampling.seed``; ``name`` labels it. The core gives the stage the frames as its ``video:`` (a float ``.npy``
    clip) and writes no file of the stage's: the run's outputs get the last stage's frames (its ``save_latents``
    stays the first model's, and the audio track the first model's)."""

    model: str
    overrides: Mapping[str, Any] = field(default_factory=dict)
    name: str = ""


class OffloadableDit(Protocol):
    """What the block-offload executor needs from a denoiser module (see WanDiT for an implementation).

    ``block_groups`` names EVERY stacked block group in execution order; the executor runs each of them, streamed
    from the host when offloaded, resident otherwise. The carry between groups may be any pytree.
    """

    block_groups: tuple[str, ...]

    def pre(self, latents: Any, timestep: Any, context: Any, **kwargs: Any) -> tuple[Any, dict]:
        """Everything before the stacked blocks: returns the carry (hidden state) and the per-step aux inputs (a
        pytree: array leaves are traced into the later stages, other leaves such as a Python token grid stay
        static; :mod:`vidax_core.parallel.static_aux`)."""

    @staticmethod
    def run_block_group(name: str, graphdef: Any, state: Any, x: Any, aux: dict) -> Any:
        """Run a slice of the stacked blocks of group ``name`` (``state`` has the leading layer axis)."""

    def between_groups(self, before: str, after: str, x: Any, aux: dict) -> Any:
        """Optional: the transition from group ``before`` to ``after`` (e.g. concatenating text and video)."""

    def post(self, x: Any, aux: dict, latent_shape: Sequence[int]) -> Any:
        """Everything after the blocks: the prediction in the latents' layout."""


class VideoAutoencoder(Protocol):
    """A family's VAE as the pipeline sees it.

    A loaded pipe keeps the VAE ``build_vae`` returned across calls whose frame count, size, ``options``, ``vae``
    settings and kinds of media (an image, a clip, an initial-noise file: given or not) are the same; a call that
    changes only its prompts, seed, noise file, media content or step recipe reuses it. A VAE that reads such
    per-call values at decode time (LTX's decode noise seed) gives them through an optional
    ``for_call(run) -> VideoAutoencoder``: the same weights and programs with ``run``'s values, called before every
    call uses it.
    """

    def latent_shape(self, num_frames: int, height: int, width: int) -> tuple[int, int, int]:
        """(latent_frames, latent_height, latent_width) for a video of this size."""

    def decode_video(
        self, latents: np.ndarray, on_chunk: Callable[[int, int], None] | None = None, **params: Any
    ) -> np.ndarray:
        """Latents in the family's layout (what ``DitBuild.latent_shape`` gives: (B, C, F, H, W) for most families,
        (B, F, C, H, W) for CogVideoX, (B, F, H, W, C) for Kandinsky 5) -> float32 frames in [0, 1], (B, T, H, W, 3).

        ``on_chunk(done, total)`` after each decoded time chunk. ``params`` condition the decoder where the family's
        VAE takes them (e.g. ``timestep=`` for LTX-Video) and carry run knobs (``tiling=``, ``devices=``); a VAE
        ignores the ones it has no use for.
        """

    def decode_stream(self, **params: Any) -> Any:
        """Optional: a decoder for latents that arrive in pieces (a chunked run's windows), an object whose
        ``push(latents, on_chunk=None)`` returns the frames of those latents decoded after the ones pushed
        before (causal caches carried over), so that the pieces' frames together are :meth:`decode_video` of
        the joined latents. Without it a chunked run decodes the joined latents once, at the end."""

    def encode_video(
        self, frames: np.ndarray, on_chunk: Callable[[int, int], None] | None = None, **params: Any
    ) -> np.ndarray:
        """Float32 frames in [0, 1], (B, T, H, W, 3) -> latents in the DiT's (normalised) space and the family's
        layout (as :meth:`decode_video` takes them).

        The inverse direction of :meth:`decode_video`, for conditioning on images or clips; same ``params`` rules.
        """


@dataclass(frozen=True)
class Decoded:
    """What a VAE's ``decode_video`` may return instead of bare frames: frames plus an audio track (LTX-2.x).

    ``frames``: float32 (B, T, H, W, 3) in [0, 1]; ``audio``: float32 (B, samples, channels) in [-1, 1];
    ``sample_rate`` in Hz. ``output.path`` muxes the audio into the mp4 when present."""

    frames: np.ndarray
    audio: np.ndarray | None = None
    sample_rate: int | None = None


def vae_encodes(run: Any) -> bool:
    """Whether ``run`` encodes media with its VAE (an image, a clip or an ``options.conditions`` item): the families
    build their VAE with its encoder only then, and the dry run sizes the VAE so."""
    return (getattr(run, "image", None) is not None or getattr(run, "video", None) is not None
            or bool((getattr(run, "options", None) or {}).get("conditions")))


def dit_weight_dtype(run: Any) -> Any:
    """The denoiser's weight dtype: ``model.dtype`` when set, else the policy every family follows: bf16 weights
    on GPU/TPU (matmuls in bf16; norms, modulation and the residual stream stay fp32 inside the blocks), fp32 on
    CPU. VAEs and prompt encoders choose their own precision."""
    import jax
    import jax.numpy as jnp

    if run.model.dtype is None:
        return jnp.float32 if jax.default_backend() == "cpu" else jnp.bfloat16
    return {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float16": jnp.float16}[run.model.dtype]
