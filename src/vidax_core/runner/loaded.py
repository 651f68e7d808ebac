"""A model loaded once and called many times: the one place that orders a run.

:class:`LoadedModel` is the run split in two. Construction checks the base config, opens the checkpoint, builds
the denoisers shape-only and plans the base call (:mod:`.plan`); with ``load_weights`` it places their weights.
:meth:`LoadedModel.generate` runs one call, every kind of call (one pass, a multi-pass recipe, a chunked run made
window by window) in the one order its ``_generate`` spells out: plan, VAE, weights, prompts, sampling
(:mod:`.sampling`), decode, metrics, outputs (:mod:`.outputs`). ``vidax run``, the Python API
(:mod:`vidax_core.api`), batches and ``vidax serve`` all go through it; a call planned earlier (a served request,
planned when it is posted) is run as planned. Plans hold no state of a call: whatever a call makes (its prompt
contexts, conditioning, a chunked run's windowed sampling) is made by that call and dropped with it.

What stays between calls: the placed DiT weights (or their host pools when offloaded), the compiled step of each
distinct call structure (a new shape compiles once), the VAE per :func:`vae_key` (frame count, size, options,
``vae`` settings and kinds of media: not the seed, noise, prompts, media content or step recipe), the prompt
encoder and the encoders hooks build per call (an image encoder) as ``runtime.text_encoder`` says
(:mod:`.text_encoders`), a cache of prompt embeddings, and the
checkpoint's parsed JSON configs and open tensor sources (a rebuilt VAE reads no file again).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import threading
import time
from typing import Any, Callable

import jax
import numpy as np
from flax import nnx

from vidax_core import attention, lora, precision, stop_signals
from vidax_core.config import RunConfig, to_dict
from vidax_core.errors import Cancelled, UserError
from vidax_core.guidance import PROMPT
from vidax_core.io import video
from vidax_core.io.run_checkpoint import checkpoint_for_run
from vidax_core.io.draws import Draws
from vidax_core.model_api import Decoded, SamplingPass, dit_weight_dtype
from vidax_core.parallel import distributed
from vidax_core.parallel import offload as offloadlib
from vidax_core.parallel import sharding
from vidax_core.parallel.disk_chunks import check_streamable
from vidax_core.parallel.host_chunks import pin_groups
from vidax_core.parallel.mesh import chunk_size_of
from vidax_core.plugins import Plugins
from vidax_core.placement import memory_plan
from vidax_core.report import compile_watch, memory
from vidax_core.runner import device_oom, finite, windowed
from vidax_core.runner.denoiser import Expert, build_dit, load_dit
from vidax_core.report.metrics import run_metrics
from vidax_core.runner.outputs import RunResult, write_call_outputs
from vidax_core.runner.plan import CallPlan, Planner, check_vae_grids, plan_lines
from vidax_core.runner.preflight import preflight
from vidax_core.report.progress import Reporter, TileBar, Timer, follow_chunks, tile_progress
from vidax_core.runner.prompts import encode_prompts
from vidax_core.runner.compilation_cache import setup_runtime
from vidax_core.runner.sampling import PassResult, initial_latents, sample_pass
from vidax_core.runner.stages import StageChain
from vidax_core.runner.encoders import KeptModels, TextEncoders, encoder_dtypes
from vidax_core.encoders.policy import EncoderPolicy, encoder_policy
from vidax_core.windows import CONTINUE, SEPARATE, WindowedSampling


def structure_key(cfg: RunConfig, *extra: Any) -> str:
    """What decides a compiled step's program: the call's settings without its prompts, seed, noise file,
    outputs and the contents of its media (those arrive as arrays)."""
    d = to_dict(cfg)
    for k in ("prompt", "negative_prompt", "output", "lora"):  # unfused adapters are arrays of the step
        d.pop(k, None)
    d["image"], d["video"] = d["image"] is not None, d["video"] is not None
    d["sampling"] = {k: v for k, v in d["sampling"].items() if k not in ("seed", "initial_noise")}
    return repr((d, extra))


def vae_key(cfg: RunConfig) -> str:
    """What decides a VAE build (docs/python-api.md): the call's frame count and size, its ``options`` and ``vae``
    settings, and which kinds of media it gives (an image, a clip, an initial-noise file), never their content.
    The prompts, seed, noise values, media content and step recipe change no VAE program or weight; a VAE that
    reads some of them while decoding takes them through ``for_call``
    (:class:`vidax_core.model_api.VideoAutoencoder`)."""
    s = cfg.sampling
    options = sorted(dict(cfg.options or {}).items(), key=lambda kv: kv[0])
    return repr((s.num_frames, s.height, s.width, options, to_dict(cfg)["vae"], cfg.image is not None,
                 cfg.video is not None, s.initial_noise is not None))


def _media_stamp(path: str | None) -> Any:
    if not path:
        return None
    try:
        st = os.stat(path)
        return (path, st.st_size, st.st_mtime_ns)
    except OSError:
        return path


def prompt_key(cfg: RunConfig, text: Any) -> str:
    """A prompt embedding depends on the text and the encoder's settings (text length, options, and for image
    encoders the image and size), not on the seed, steps or guidance."""
    d = to_dict(cfg)
    for k in ("prompt", "negative_prompt", "output", "lora"):
        d.pop(k, None)
    d["image"], d["video"] = _media_stamp(cfg.image), _media_stamp(cfg.video)
    d["sampling"] = {k: v for k, v in d["sampling"].items()
                     if k not in ("seed", "initial_noise", "num_steps", "guidance_scale", "guidance_scale_2",
                                  "scheduler")}
    return repr((text, d))


class LoadedModel:
    """One model, loaded for many calls. ``load_weights=False`` stops after every check that reads no weight
    (a batch validates its lines, then calls :meth:`load_weights`; otherwise the first call places them).
    ``single``: a load for one call (``vidax run``): that call encodes its prompts and conditions its first pass
    before it places the denoiser, and frees the encoders when done."""

    def __init__(self, cfg: RunConfig, plugins: Plugins, reporter: Reporter | None = None, *,
                 single: bool = False, load_weights: bool = True, stage: bool = False) -> None:
        self.reporter = reporter or Reporter()
        self.plugins = plugins
        self.base = cfg
        self.single = single
        self.closed = False
        self._lock = threading.Lock()
        t0 = time.perf_counter()
        compiles0 = compile_watch.snapshot()
        self.startup_s: float | None = None  # the process's start-up before this load (vidax run sets it)
        memory.start()
        self.spec = spec = plugins.registry.get(cfg.model.id)
        distributed.initialize(cfg)  # before any device is touched: the mesh spans every process
        memory.start_backend()  # the runtime's own host memory, measured before anything (a sampler check) starts it
        preflight(cfg, spec, plugins, check_outputs=not stage, check_media=not stage)
        setup_runtime(cfg)
        self.backend = attention.resolve_backend(cfg.attention.backend)  # this pipe's: every call traces in its scope
        self.attention_calls: dict[str, dict] = {}  # the backend each attention call site of this pipe ran
        self.ckpt = ckpt = checkpoint_for_run(cfg, spec, plugins)
        ckpt.progress = self.reporter.byte_progress
        ckpt.keep_open = True
        self.reporter.log(f"model {spec.id} ({spec.family}) from {ckpt.source}; attention backend {self.backend}")
        self.builds = build_dit(spec, ckpt, cfg, plugins)
        self._heads = _TensorHeads(ckpt) if cfg.lora_mode == "unfused" else ckpt  # re-checked per call
        self.adapters = lora.prepare(cfg, spec, self._heads, self.builds, plugins)  # before any weight is read
        if cfg.lora_mode == "unfused":  # the builds then carry factor parameters beside their kernels
            from vidax_core.lora import unfused

            self.builds = unfused.plan(cfg, spec, self.builds, self.adapters, plugins)
        self._lora_now = tuple(cfg.lora or ())
        for s in self.adapters.summaries:
            self.reporter.log(s.line() + (" (fused at load)" if cfg.lora_mode == "fused" else
                                          " (unfused: its factors are step inputs, swappable per call)"))
        self.planner = Planner(spec, ckpt, plugins, self.builds)
        self.tracker = offloadlib.ResidentTracker()
        self.experts: list[Expert] = []
        self._vaes: dict[str, Any] = {}
        placement = getattr(cfg.runtime, "text_encoder", "host")
        self.encoders = TextEncoders(self._build_encoder, placement)
        if not single:  # the encoders hooks build per call (an image encoder) are kept as the prompt encoder is
            ckpt.kept_models = KeptModels(placement)
        ckpt.encoder_policy = EncoderPolicy(dtype=dit_weight_dtype(cfg))  # image encoders: the run's dtype
        self.encoder_dtypes: dict[str, str] = {}  # what the prompt encoder's towers hold, once built
        self._vae_weight_bytes: int | None = None
        self.memory_phases: dict[str, memory.Window] = {}  # anonymous memory of the last load / call, per phase
        self.encode_on: memory_plan.EncoderPlacement | None = None
        self.videos = 0  # calls begun: the first one's times include the load
        self.session: Any = None  # the kept state of a causal call, for a continuation (keep_cache)
        self.first_plan = self.planner.plan(cfg)  # the base call's plan: the load places its weights by it
        self.host_plan = check_host_memory(cfg, spec, ckpt, self.builds, self.first_plan,  # before any weight
                                           single=single)
        self.stages = StageChain(self, cfg, lambda scfg: LoadedModel(  # frame stages: checked now, no weights
            scfg, plugins, self.reporter, single=single, load_weights=False, stage=True))
        self.load_s = time.perf_counter() - t0
        if load_weights:
            self.load_weights()
        self.load_compiles = compile_watch.since(compiles0)  # what the load compiled (counted as loading)

    # -- loading ---------------------------------------------------------------------------------------------

    def load_weights(self) -> None:
        """Place every expert's weights with the base call's placement (already checked)."""
        if self.experts:
            return
        with memory.window() as w, self._attention():
            self._load_weights()
        self.memory_phases["load"] = w

    def _load_weights(self) -> None:
        t0 = time.perf_counter()
        cfg, plan = self.base, self.first_plan
        placements = plan.placements[0]
        if len(self.builds) > 1:
            self.reporter.log(f"{len(self.builds)} experts switched by timestep")
        with memory.window() as self.memory_phases["weights"]:  # reading and placing the denoisers alone
            for build, placement in zip(self.builds, placements):
                files = ()
                if placement.offload_groups and cfg.offload.storage == "disk":  # refused before any weight is read
                    files = tuple(check_streamable(self.ckpt.tensors(build.component),
                                                   f"{self.ckpt.source} ({build.component})"))
                build, model = load_dit(self.spec, self.ckpt, cfg, self.plugins, self.reporter, build=build,
                                        put=placement.put, adapters=self.adapters)
                if placement.offload_groups:
                    host = pin_groups(model, placement.offload_groups,
                                      lambda g: chunk_size_of(cfg.offload.chunk_size, g),
                                      placement.specs, placement.mesh, storage=cfg.offload.storage, files=files,
                                      extra={"component": build.component, "lora": repr(cfg.lora),
                                             "mode": cfg.lora_mode},
                                      log=self.reporter.log)
                    self.experts.append(Expert(build, placement, model, host=host))
                else:
                    graphdef, params = nnx.split(model)
                    self.experts.append(Expert(build, placement, None, graphdef, params))
                    self.tracker.base += sharding.per_device_bytes(params)
                del model
                self.ckpt.forget(build.component)  # placed: the file is unmapped (a disk cache is its own file)
            gc.collect()  # the conversion's lazy leaves and staging buffers, some held in reference cycles
        self.load_s += time.perf_counter() - t0

    def use_adapters(self, cfg: RunConfig) -> None:
        """Unfused mode: put the call's adapters into the factor parameters (same shapes: the compiled steps
        stay valid). A call's ``lora`` other than the load's is refused in fused mode before it gets here."""
        entries = tuple(cfg.lora or ())
        if entries == self._lora_now:
            return
        if self.adapters.unfused is None:
            raise UserError("lora cannot change between calls of a pipe loaded with lora_mode=fused (the adapters "
                            "are in its weights): load with lora_mode=unfused to swap adapters or scales per call")
        prepared = lora.prepare(cfg, self.spec, self._heads, self.builds, self.plugins)
        new = self.adapters.unfused.swap(prepared)
        for e in self.experts:
            values = new.get(e.build.component)
            if not values:
                continue
            flat = []
            for path, var in nnx.to_flat_state(e.params):
                path = tuple(path)
                if path in values:
                    old = var.get_value()
                    var = var.replace(jax.device_put(values[path].astype(old.dtype), old.sharding))
                flat.append((path, var))
            e.params = nnx.from_flat_state(flat)
        self.adapters.summaries = prepared.summaries
        for s in prepared.summaries:
            self.reporter.log(s.line() + " (unfused, swapped in)")
        self._lora_now = entries

    def _encoder_scope(self):
        """Where the prompt encoders build and run (``runtime.encode_on``, :mod:`.memory_plan`), decided once per
        pipe: ``vidax run`` encodes before the denoiser is placed, a loaded pipe beside its device weights."""
        if self.encode_on is None:
            if self.single and not self.experts:  # built before the prompts encode, the denoiser after them
                beside = memory_plan.vae_bytes(self.ckpt, self.base) or 0
            else:
                beside = int(max(self.tracker.base, self.tracker.peak))
            self.encode_on = memory_plan.encoder_placement(self.base, self.ckpt, beside, spec=self.spec)
            where = {"cpu": "the host CPU", "stream": "the devices, its layers streamed from the checkpoint"}
            if self.encode_on.where == "none":
                self.reporter.log(f"text encoder: none ({self.encode_on.reason})")
            else:
                self.reporter.log(f"text encoder on {where.get(self.encode_on.where, 'the devices')} at "
                                  f"{self.encode_on.weights or memory_plan.encoder_dtype(self.spec, self.base)} "
                                  f"({self.encode_on.reason})")
        return memory_plan.cpu_scope() if self.encode_on.where == "cpu" else contextlib.nullcontext()

    def _encoder_policy(self) -> EncoderPolicy:
        """The dtype every encoder of this pipe computes in, and how many layers a streamed one reads per chunk."""
        from vidax_core.model_api import dit_weight_dtype

        on = self.encode_on
        layers = on.layers_per_chunk if on is not None and on.where == "stream" else 0
        return EncoderPolicy(dtype=dit_weight_dtype(self.base), stream_layers=layers)

    def _build_encoder(self) -> Any:
        mesh = None if self.encode_on is not None and self.encode_on.where == "cpu" else self.mesh
        with encoder_policy(self._encoder_policy()):
            encoder = self.plugins.call("build_text_encoder", self.spec, ckpt=self.ckpt, run=self.base, mesh=mesh)
        if encoder is None:
            raise UserError(f"the plugin of {self.spec.id} provides no text encoder")
        self.encoder_dtypes = encoder_dtypes(encoder)
        return encoder

    @property
    def mesh(self):
        """The mesh of the base call's placement (the weights live on it)."""
        return self.first_plan.placements[0][0].mesh

    def vae(self, run: RunConfig) -> Any:
        """The VAE for ``run``: built by the plugin once per :func:`vae_key`, then given the call's own values
        (``for_call``) where the VAE takes them."""
        key = vae_key(run)
        if key not in self._vaes:
            vae = self.plugins.call("build_vae", self.spec, ckpt=self.ckpt, run=run)
            if vae is None:
                raise UserError(f"the plugin of {self.spec.id} provides no VAE")
            if len(self._vaes) >= 4:
                self._vaes.pop(next(iter(self._vaes)))
            self._vaes[key] = vae
        vae = self._vaes[key]
        for_call = getattr(vae, "for_call", None)
        return for_call(run) if callable(for_call) else vae

    # -- checking a call -------------------------------------------------------------------------------------

    def call_config(self, **changes: Any) -> RunConfig:
        """The base config with a call's changes (already validated values), checked as a run checks it."""
        from vidax_core import config as config_mod

        data = to_dict(self.base)
        if "cache" in changes:  # a call's cache config replaces the load's whole (its fields depend on the method)
            data["cache"] = None
        data = config_mod.merge(data, changes)
        cfg = config_mod.validate(data)
        return cfg

    def plan_call(self, cfg: RunConfig, vae: Any = None) -> CallPlan:
        """Every check a call of ``cfg`` makes before sampling, and the plan it runs (:class:`.plan.Planner`):
        a call config other than the base is checked as a run checks its config first."""
        if cfg is not self.base:
            preflight(cfg, self.spec, self.plugins)
            check_load_bound(self.spec, self.base, cfg)
        return self.planner.plan(cfg, vae)

    # -- one call --------------------------------------------------------------------------------------------

    def _encode_call(self, plan: CallPlan) -> dict[str, Any]:
        """The contexts of every prompt kind the call's guidance reads, from the embedding cache or the encoder.
        All kinds are encoded together, as a run encodes them, so the cache holds them together too."""
        kinds = list(dict.fromkeys(k for g in plan.guides for k in g.prompts))
        cfg = plan.cfg
        key = prompt_key(cfg, tuple((k, cfg.prompt if k == PROMPT else cfg.negative_prompt) for k in kinds))
        found = self.encoders.lookup(key)
        if found is None:
            with self._encoder_scope():
                encoder = self.encoders.acquire()
                try:
                    found = encode_prompts(self.spec, encoder, cfg, self.plugins, kinds,
                                           None if self.encode_on.where == "cpu" else self.mesh)
                finally:
                    self.encoders.release(final=self.single)
            self.encoders.store(key, found)
        return found

    def generate(self, cfg: RunConfig | None = None, *, plan: CallPlan | None = None,
                 on_progress: Callable[[int, int], None] | None = None, cancel: Any = None,
                 write_outputs: bool = True, on_chunk: Callable[[np.ndarray, int, int], None] | None = None,
                 on_decode: Callable[[int, int], None] | None = None, keep_cache: bool = False,
                 extend: Any = None) -> RunResult:
        """One video from ``cfg`` (a call config of this model; default: the base config), or from ``plan``
        (:meth:`plan_call`'s, made earlier: it is run as planned). ``on_chunk(frames, k, n)`` receives the frames
        as they are made: window ``k`` of ``n`` of a chunked model, else all at once; ``on_decode(done, total)``
        the VAE's chunks as the final decode runs them (a chunked model decodes window by window instead).

        A causal model (:mod:`vidax_core.causal`): ``keep_cache`` keeps the call's state for a continuation (the
        result's ``session``, also :attr:`session`); ``extend`` (such a session) continues its video by the frames
        ``cfg`` asks for instead of starting one (:mod:`vidax_core.causal.session`)."""
        if self.closed:
            raise UserError("this pipe is closed: load the model again (vidax.load) to generate")
        if plan is not None:
            cfg = plan.cfg
        cfg = cfg or self.base
        if plan is None and cfg is self.base:
            plan = self.first_plan
        with self._lock, precision.scope(cfg), self._attention(), memory.window() as self.memory_phases["call"]:
            return self._generate(cfg, plan, on_progress, cancel, write_outputs, on_chunk, on_decode,
                                  keep_cache, extend)

    def _attention(self):
        """This pipe's attention backend and call record, whatever another pipe in the process uses."""
        return attention.scope(self.base.attention.backend, self.backend, self.attention_calls)

    def _generate(self, cfg: RunConfig, plan: CallPlan | None, on_progress, cancel, write_outputs: bool,
                  on_chunk=None, on_decode=None, keep_cache: bool = False, extend: Any = None) -> RunResult:
        """One call, in the order every kind of call runs (docs/architecture.md). What it makes (prompt contexts,
        conditioning, a chunked run's windowed sampling) are locals of this call."""
        timer = Timer()
        if self.videos == 0:  # the first video's times include the load that preceded it (and the process's start-up)
            timer.add("load_s", self.load_s)
            timer.start -= self.load_s
            if self.startup_s:
                timer.add("startup_s", self.startup_s)
                timer.start -= self.startup_s
            timer.compiles["load"] = dict(self.load_compiles)
        self.videos += 1
        contexts = predicted = None
        if cfg.sampling.num_frames is None:  # the model predicts the frame count from the encoded prompts
            contexts = self._encode(plan or self.plan_call(cfg), timer)
            cfg, predicted = self._predict_frames(cfg, contexts)
            plan = None  # planned with the count
        t0 = time.perf_counter()
        with timer.compiling("load"):
            if plan is None and extend is not None:  # planned as a fresh video's grids; its windows come below
                plan = self.plan_call(dataclasses.replace(cfg, sampling=dataclasses.replace(cfg.sampling,
                                                                                            initial_noise=None)))
                plan = dataclasses.replace(plan, cfg=cfg)
            plan = plan or self.plan_call(cfg)
            vae = self.vae(plan.passes[-1].run)  # before the weights: a broken VAE config is refused in a second
            if not plan.complete:  # a family whose latent grid only its built VAE gives
                plan = self.planner.plan(cfg, vae)
            check_vae_grids(self.spec, plan, vae)
        timer.add("load_s", time.perf_counter() - t0)

        made: dict[int, Any] = {}  # pass index -> its conditioning, made before the denoiser was placed
        if self.single and not self.experts:  # vidax run: the encoders (an image encoder among them, Wan2.1 I2V's
            # 2.5 GB CLIP) and the VAE's encode never sit beside the denoiser's weights
            contexts = contexts if contexts is not None else self._encode(plan, timer)
            if plan.windows is None:  # a chunked run conditions window by window
                with device_oom.phase("encode"), timer.compiling("encode"):
                    made[0] = self._conditioning(plan.passes[0].run, vae, plan.grids[0], timer, "encode_s")
        t0 = time.perf_counter()
        with timer.compiling("load"):
            self.load_weights()
            self.use_adapters(cfg)
        timer.add("load_s", time.perf_counter() - t0)
        for line in plan_lines(plan) + self.stages.describe():
            self.reporter.log(line)
        if contexts is None:
            contexts = self._encode(plan, timer)

        writer = write_outputs and distributed.is_writer()  # under jax.distributed only process 0 writes
        ws = session = None
        if plan.windows is not None:  # a chunked call's own windowed sampling (a continuation's: its session's)
            if extend is not None:
                ws = extend.continued(cfg, plan.guides[0])
                plan = dataclasses.replace(plan, windows=tuple(ws.windows))
            else:
                ws = windowed.for_call(self.spec, self.ckpt, cfg, self.plugins, plan.windows)
        elif extend is not None or keep_cache:
            raise UserError(f"{self.spec.id} makes its video in one pass: there is no cache to keep or continue")
        progress = _Progress(plan.total_steps, on_progress, cancel)
        if plan.windows is None:
            self._warn_decode(plan)
            results = self._sample_passes(plan, vae, contexts, timer, progress, made)
            final = results[-1].final
            if self.single:  # vidax run: the denoiser is done, so the decode has the devices and the host without it
                self._drop_denoisers()
            frames, decoded = self._decode(plan, vae, final, timer, on_decode)
            metrics = self.metrics(cfg, plan, results, timer, decoded)
            if self.stages:  # after the metrics: a single run frees its denoiser before a stage's weights arrive
                t0 = time.perf_counter()
                frames, metrics["stages"] = self.stages.run(cfg, frames)
                metrics["stages_s"] = time.perf_counter() - t0
                metrics["total_s"] = timer.total()
            if on_chunk is not None:
                on_chunk(frames, 0, 1)
        else:  # window by window, each window's new frames decoded and streamed as it completes
            stream = windowed.FrameStream(cfg.output.path if writer else None, cfg.output.fps, len(plan.windows),
                                          ws.num_frames, on_chunk)
            if stream.video is not None:
                self.reporter.log(f"the video plays while it is made: {stream.video.growing} (renamed to "
                                  f"{cfg.output.path} when the run completes)")
            progress.device = device = windowed.DeviceMemory()
            try:
                with timer.compiling("windows"):
                    results, final, rows, kv_bytes, session = self._sample_windows(
                        plan, ws, vae, contexts, timer, progress, stream, extend=extend, keep=keep_cache)
                stop_signals.raise_pending()
                stream.commit()
            except BaseException:
                stream.abort()
                raise
            frames = stream.joined()
            decoded = Decoded(frames)
            metrics = windowed.add_window_metrics(self.metrics(cfg, windowed.as_passes(plan, results), results, timer,
                                                               decoded),
                                                  plan, results, rows, device, self.experts, kv_bytes)
        if predicted:
            metrics["predicted"] = predicted
        stop_signals.raise_pending()
        if writer:  # a chunked run streamed its mp4 above
            write_call_outputs(cfg, final, frames, decoded, metrics, self.reporter, mp4=plan.windows is None)
        return RunResult(final, frames, metrics, decoded.audio, decoded.sample_rate, session)

    def _encode(self, plan: CallPlan, timer: Timer) -> dict[str, Any]:
        t0 = time.perf_counter()
        with device_oom.phase("encode"), timer.compiling("encode"):
            found = self._encode_call(plan)
        timer.add("encode_s", time.perf_counter() - t0)
        return found


    def _predict_frames(self, cfg: RunConfig, contexts: dict[str, Any]) -> tuple[RunConfig, dict]:
        """The call's config with the frame count the plugin predicts from the prompt's encoding (hook
        ``predict_num_frames``), and what it said."""
        answer = self.plugins.call("predict_num_frames", self.spec, ckpt=self.ckpt, run=cfg, context=contexts[PROMPT])
        if answer is None:
            raise UserError(f"sampling.num_frames is not set and the plugin of {self.spec.id} predicts no frame "
                            "count for this checkpoint: set sampling.num_frames=...")
        frames, info = answer
        new = dataclasses.replace(cfg, sampling=dataclasses.replace(cfg.sampling, num_frames=int(frames)))
        info = {"num_frames": int(frames), **dict(info or {})}
        self.reporter.log("predicted: " + ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                                                    for k, v in info.items()))
        return new, info

    def _conditioning(self, run: RunConfig, vae: Any, grid: Any, timer: Timer, phase: str) -> Any:
        """A pass's conditioning (hook ``prepare_conditioning``), its time counted in ``phase``."""
        t0 = time.perf_counter()
        cond = self.plugins.call("prepare_conditioning", self.spec, ckpt=self.ckpt, run=run, vae=vae,
                                 latent_shape=grid)
        timer.add(phase, time.perf_counter() - t0)
        return cond

    def _sample_passes(self, plan: CallPlan, vae: Any, contexts: dict, timer: Timer, progress: "_Progress",
                       made: dict[int, Any]) -> list[PassResult]:
        """Every pass of ``plan`` in order, each from the seeded noise, the given latents or the previous pass's
        output through its carry; ``made``: conditioning made earlier, by pass index."""
        cfg, passes, results = plan.cfg, plan.passes, []
        t_sampling, load_before = time.perf_counter(), timer.phases.get("load_s", 0.0)
        with memory.window() as self.memory_phases["sampling"], device_oom.phase("sampling"), \
                timer.compiling("sampling"):
            for k, (p, sampler, guide, grid, splan) in enumerate(zip(passes, plan.samplers, plan.guides, plan.grids,
                                                                   plan.splans)):
                given = None
                if k == 0 and cfg.sampling.initial_noise:
                    given = initial_latents(cfg, self.experts[0].build.latent_shape(1, grid))
                elif p.carry is not None and results:
                    self.reporter.log(f"{p.name}: carrying the latents over")
                    given = p.carry(results[-1].final, vae)
                cond = made[k] if k in made else self._conditioning(p.run, vae, grid, timer, "load_s")
                results.append(sample_pass(
                    self.spec, self.ckpt, p, self.plugins, self.reporter, timer, self.experts, self.tracker, vae,
                    sampler, guide, grid, [contexts[kind] for kind in guide.prompts], given, cond=cond,
                    label=p.name if len(passes) > 1 else "sampling", splan=splan, progress=progress,
                    step_key=structure_key(p.run, k, p.name)))
        # what the passes spent besides their steps and their step's build (counted as loading): conditioning,
        # start latents, noise, the inputs' placement, the host copy of the result
        timer.add("sampling_setup_s", max(time.perf_counter() - t_sampling - (timer.phases["load_s"] - load_before)
                                          - sum(t for r in results for t in r.step_times), 0.0))
        return results

    def _decode(self, plan: CallPlan, vae: Any, final: Any, timer: Timer, on_decode=None
                ) -> tuple[np.ndarray, Decoded]:
        """The frames (and audio) of the final latents, resized to the requested size when the last pass ran at
        another; tiled where the untiled decode would not fit the device (:func:`.memory_plan.decode_tiling`)."""
        cfg, run = plan.cfg, plan.passes[-1].run
        t0 = time.perf_counter()
        dbar = self.reporter.bar(None, "decoding", unit="chunk")
        tiling, why = memory_plan.decode_tiling(self.spec, self.ckpt, run, self._decode_beside())
        if why:
            self.reporter.log(why)
        tiles = TileBar(self.reporter)
        with memory.window() as self.memory_phases["decode"], device_oom.phase("decode"), \
                timer.compiling("decode"), tile_progress(tiles):
            decoded = vae.decode_video(final, on_chunk=follow_chunks(dbar, on_decode), tiling=tiling)
        tiles.close()
        dbar.close()
        if not isinstance(decoded, Decoded):
            decoded = Decoded(np.asarray(decoded))
        frames = decoded.frames
        finite.check_output(frames, decoded.audio)
        if frames.shape[2:4] != (cfg.sampling.height, cfg.sampling.width):
            self.reporter.log(f"resizing the frames from {frames.shape[3]}x{frames.shape[2]} to "
                              f"{cfg.sampling.width}x{cfg.sampling.height}")
            frames = video.resize_frames(frames, cfg.sampling.height, cfg.sampling.width,
                                       mode=plan.resize)
        timer.add("decode_s", time.perf_counter() - t0)
        return frames, decoded

    def _sample_windows(self, plan: CallPlan, ws: WindowedSampling, vae: Any, contexts: dict, timer: Timer,
                        progress: "_Progress", stream: windowed.FrameStream, *, extend: Any = None,
                        keep: bool = False) -> tuple[list, np.ndarray, list, int | None, Any]:
        """Every window of a chunked call in order: an ordinary pass (:func:`.sampling.sample_pass`) from the
        family's start (:meth:`WindowedSampling.start`: latents, sampler plan, conditioning, guidance), its final
        latents handed back (``finish``), its new frames decoded (one causal stream across windows, or each window
        alone) into ``stream``; a causal family's KV cache (:mod:`vidax_core.causal`) read by the steps and written
        after each window. Returns the passes, the joined latents (what ``output.save_latents`` writes), each window's
        figures, the KV cache's bytes (None without one) and the kept session (``keep``; None otherwise).
        ``extend``: the kept session this call continues (its cache, its decode stream)."""
        cfg, n = plan.cfg, len(plan.windows)
        draws = Draws(cfg.sampling.seed, cfg.sampling.initial_noise or None)
        stream_decoder = getattr(vae, "decode_stream", None) if ws.decode == CONTINUE else None
        texts = [contexts[kind] for kind in plan.guides[0].prompts]
        causal = None
        if extend is not None:  # the kept cache and decode stream, the last window the kept call left unwritten
            causal, decoder = extend.cache, extend.decoder
            causal.use(plan.guides[0], texts)
            pending = extend.ws.pending_fill()
            if pending is not None:
                causal.fill(pending)
        else:
            decoder = stream_decoder(tiling=cfg.vae.tiling) if stream_decoder is not None else None
        if ws.cache is not None and causal is None:  # a causal run: its KV cache, read by every window's steps
            from vidax_core.causal.run import CausalCache

            causal = CausalCache(ws.cache, plan.guides[0], texts, self.experts, self.tracker)
            self.reporter.log(f"KV cache: {causal.bytes / 2**20:.1f} MiB for {len(plan.guides[0].branches)} "
                              "guidance branch(es), bounded by the model's attention window")
        if keep and causal is None:
            raise UserError(f"{self.spec.id} keeps no cache between windows: there is nothing to keep")
        with device_oom.phase("encode"):
            ws.prepare(vae)
        results, kept, rows, decode_s = [], [], [], 0.0
        for k, w in enumerate(plan.windows):
            t0 = time.perf_counter()
            start = ws.start(k, draws, plan.samplers[0])
            if w.num_steps == 0:  # a given chunk (a conditioning clip's): its latents are its result
                final, steps, sampling_s = np.array(start.latents, np.float32, copy=True), 0, 0.0
            else:
                extra = {"kv_cache": causal.read(start.cache_view)} if causal is not None else None
                with device_oom.phase("sampling"):
                    res = sample_pass(
                        self.spec, self.ckpt, SamplingPass(cfg), self.plugins, self.reporter, timer, self.experts,
                        self.tracker, vae, start.sampler, start.guide or plan.guides[0], tuple(w.grid), texts,
                        start.latents, cond=start.conditioning, label=f"window {k + 1}/{n}", splan=start.plan,
                        progress=progress, step_key=(structure_key(cfg), "window", tuple(w.grid), w.key),
                        step_noise=start.step_noise, device_arrays=extra)
                # an owned host copy: on the CPU backend the pass's result is a view of its device buffer
                final = np.array(res.final, np.float32, copy=True)
                results.append(dataclasses.replace(res, final=None, window=k))
                steps, sampling_s = int(res.splan.num_steps), float(sum(res.step_times))
            done = ws.finish(k, final)
            if done.output is not None:
                kept.append(np.asarray(done.output))
            fill_s = 0.0
            if done.cache_fill is not None:
                tf = time.perf_counter()
                with device_oom.phase("sampling"):
                    causal.fill(done.cache_fill)
                    jax.block_until_ready(causal.cache.arrays)
                fill_s = time.perf_counter() - tf
            t1 = time.perf_counter()
            with device_oom.phase("decode"):  # beside the resident denoiser
                if done.decode is None:
                    pass
                elif decoder is not None:
                    stream.emit(decoder.push(done.decode), k)
                elif ws.decode == SEPARATE:
                    stream.emit(vae.decode_video(done.decode, tiling=cfg.vae.tiling), k)
            t2 = time.perf_counter()
            decode_s += t2 - t1
            rows.append({"window": k, "latent_frames": int(w.grid[0]), "steps": steps, "frames": stream.count(),
                         "sampling_s": sampling_s, "decode_s": t2 - t1, "total_s": t2 - t0,
                         **({"cache_fill_s": fill_s} if causal is not None else {})})
            self.reporter.log(f"window {k + 1}/{n}: {steps} steps, {rows[-1]['total_s']:.1f}s")
        latents = np.concatenate(kept, axis=ws.output_axis) if len(kept) > 1 else kept[0]
        if ws.decode == CONTINUE and decoder is None:  # a VAE without a stream decoder: the joined latents once
            t1 = time.perf_counter()
            with device_oom.phase("decode"):
                stream.emit(vae.decode_video(latents, tiling=cfg.vae.tiling), n - 1)
            decode_s += time.perf_counter() - t1
        timer.add("decode_s", decode_s)
        kv_bytes, session = None, None
        if causal is not None:
            kv_bytes = causal.bytes
            made = (extend.frames if extend is not None else 0) + stream.count()
            if extend is not None:  # its state moved on with this call: a continuation takes it over or ends it
                extend.cache = extend.decoder = None
                extend.close()
            if keep:
                from vidax_core.causal.session import CausalSession

                session = CausalSession(ws, causal, decoder, tuple(b.name for b in plan.guides[0].branches), made)
                self.keep_session(session)
            else:
                causal.close()
                if self.session is extend:
                    self.session = None
        return results, latents, rows, kv_bytes, session

    def _warn_decode(self, plan: CallPlan) -> None:
        """Before sampling, one line when the decode as it will run (tiled where the untiled one does not fit) is
        estimated past the device's memory beside the placed weights: HunyuanVideo-1.5 at 480p with the reference's
        256-pixel tiles needs ~22.7 GiB, learned otherwise only after minutes of sampling."""
        budget = memory_plan.device_budget()  # None on the CPU backend: no device memory of its own
        run = plan.passes[-1].run
        if budget is None:
            return
        held = self._decode_beside()
        tiling, _ = memory_plan.decode_tiling(self.spec, self.ckpt, run, held)
        need = memory_plan.decode_bytes(self.spec, self.ckpt, run, tiling=tiling)
        if need is None or need + held <= budget:
            return
        tiled = memory_plan.tiling_options(tiling).enabled
        fix = memory_plan.smaller_tiles(self.ckpt) if tiled else "vae.tiling=true"
        size = memory_plan.fmt_bytes
        self.reporter.log(f"warning: the decode is estimated at ~{size(need)} beside {size(held)} of weights on the "
                          f"device's {size(budget)} and may run out of memory after sampling: set {fix} (vidax run "
                          "--dry-run shows the placement)")

    def _decode_beside(self) -> int:
        """Device bytes of weights placed while the VAE decodes: the VAE's (its file headers read once per pipe)
        and the denoiser's, which stays placed unless this is a single run (:meth:`_drop_denoisers`)."""
        if self._vae_weight_bytes is None:
            self._vae_weight_bytes = memory_plan.vae_bytes(self.ckpt, self.base) or 0
        if self.single:
            return self._vae_weight_bytes
        return int(max(self.tracker.base, self.tracker.peak)) + self._vae_weight_bytes

    def _drop_denoisers(self) -> None:
        """Free the denoisers' weights on the devices and in host storage (a single run, before its one decode):
        the 720p Wan2.1-14B decode then runs beside the VAE alone, not beside 13 GiB of pinned blocks."""
        for e in self.experts:
            e.drop_weights()

    def metrics(self, cfg: RunConfig, plan: CallPlan, results: list, timer: Timer, decoded: Decoded) -> dict:
        """The metrics record of one call of this model (:func:`.metrics.run_metrics`)."""
        return run_metrics(self.spec, cfg, plan, results, timer, decoded, experts=self.experts, tracker=self.tracker,
                           backend=self.backend, memory_phases=self.memory_phases,
                           prompt_cache_hits=self.encoders.hits,
                           text_encoder_on=_EncodedOn(self.encode_on, self.encoder_dtypes, self.base, self.spec),
                           attention_calls=self.attention_calls)

    def keep_session(self, session: Any) -> None:
        """Keep ``session`` (a causal call's state, :mod:`vidax_core.causal.session`) for a continuation; the one
        kept before is released (its cache is device memory)."""
        old, self.session = self.session, session
        if old is not None and old is not session:
            old.close()

    def release_weights(self) -> None:
        """Free the denoisers' device memory and the kept VAEs (a single run, before its frame stages load)."""
        for e in self.experts:
            e.close()
        self.experts = []
        self._vaes.clear()
        gc.collect()

    def close(self) -> None:
        """Free the device memory this model holds; later calls are refused."""
        if self.closed:
            return
        with self._lock:
            self.closed = True
            self.keep_session(None)
            self.stages.close()
            for e in self.experts:
                e.close()
            self.experts = []
            self._vaes.clear()
            self.encoders.close()
            if hasattr(self.ckpt, "close"):  # its tensor sources and kept models
                self.ckpt.close()
            gc.collect()


HOST_CHECK_ENV = "VIDAX_NO_HOST_CHECK"  # set: a run does not refuse on its host memory estimate


def check_host_memory(cfg: RunConfig, spec: Any, ckpt: Any, builds: list, plan: CallPlan, *,
                      single: bool = False) -> Any:
    """The run's placement (what ``--dry-run`` prints) against the memory this machine has available: a run that
    would not fit stops here, before reading a weight, with one line naming the part and the key that shrinks it
    (``VIDAX_NO_HOST_CHECK=1`` skips the refusal). Returns the placement (its rows and host estimate)."""
    from vidax_core.report.dry_run import size_run

    placement = size_run(cfg, spec, ckpt, builds, plan, single=single).placement
    if placement.host_fits() is False and not os.environ.get(HOST_CHECK_ENV):
        raise UserError(placement.refusal() + f"; {HOST_CHECK_ENV}=1 runs anyway")
    return placement


def check_load_bound(spec: Any, base: RunConfig, cfg: RunConfig) -> None:
    """A call may not change an option its model fixes at load (``Option.load_bound``)."""
    for name, opt in spec.options.items():
        was, now = dict(base.options or {}).get(name), dict(cfg.options or {}).get(name)
        if opt.load_bound and was != now:
            raise UserError(f"options.{name} is fixed when {spec.id} loads ({was!r} here; this call asks {now!r}): "
                            f"load the model again with options.{name}={now}")


class _EncodedOn:
    """What the metrics say of the prompt encoders: where they computed, in which dtypes."""

    def __init__(self, on: Any, dtypes: dict[str, str], cfg: RunConfig, spec: Any) -> None:
        self.on, self.dtypes, self.cfg, self.spec = on, dtypes, cfg, spec
        self.where = getattr(on, "where", None)

    def describe(self) -> dict[str, Any] | None:
        if self.on is None:  # every prompt came from the embedding cache
            return None
        return {"where": self.on.where, "reason": self.on.reason, "dtypes": dict(self.dtypes),
                "run_dtype": memory_plan.encoder_dtype(self.spec, self.cfg),
                "layers_per_chunk": self.on.layers_per_chunk or None,
                "device_bytes": int(self.on.device_bytes) or None}


class _TensorHeads:
    """A checkpoint's tensor sources by component, opened once: the unfused mode checks each call's adapters
    against their keys and shapes without opening the weight files again."""

    def __init__(self, ckpt: Any) -> None:
        self.ckpt, self.sources = ckpt, {}

    def read_tensors(self, component: str) -> Any:
        if component not in self.sources:
            self.sources[component] = self.ckpt.read_tensors(component)
        return self.sources[component]


class _Progress:
    """Step progress over every pass of a call, and the cancel check between steps; a chunked run's
    :class:`.windowed.DeviceMemory` (``device``) samples the live device arrays after every step."""

    def __init__(self, total: int, on_progress, cancel) -> None:
        self.total, self.done = total, 0
        self.on_progress, self.cancel = on_progress, cancel
        self.device: windowed.DeviceMemory | None = None

    def check(self) -> None:
        stop_signals.raise_pending()  # a SIGTERM / Ctrl-C whose own raise was dropped (a gc callback's)
        c = self.cancel
        if c is not None and (c.is_set() if hasattr(c, "is_set") else c()):
            raise Cancelled("the generation was cancelled")

    def step(self) -> None:
        if self.device is not None:
            self.device.sample()
        self.done += 1
        if self.on_progress is not None:
            self.on_progress(self.done, self.total)


def run(cfg: RunConfig, plugins: Any, reporter: Any = None, startup_s: float | None = None) -> RunResult:
    """Generate one video as configured; returns latents, frames and metrics (outputs are written too): a load
    for one call (``vidax run``). ``startup_s``: the process's seconds before this call (imports, JAX), which the
    metrics count as its start-up."""
    model = LoadedModel(cfg, plugins, reporter, single=True, load_weights=False)  # the call places the weights
    model.startup_s = startup_s
    try:
        return model.generate(cfg)
    finally:
        model.close()
