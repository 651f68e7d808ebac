"""The planner: every decision and check a call makes before it samples, made once per call, without weights.

:class:`Planner` holds one load's denoiser builds; :meth:`Planner.plan` turns a call config into a
:class:`CallPlan`: the denoising passes (the family's multi-pass recipe or one pass), each pass's sampler, guidance,
latent grid, sampling plan and placement (the mesh and per-parameter shardings, checked against every parallel and
offload rule), the expert switch step and the initial-noise file's shapes. A loaded model executes the plan it is
given (``vidax serve`` plans a request when it is posted and the worker runs that plan); ``vidax run --dry-run``
prints the very same plan (:func:`plan_lines`) from the same function, with no weight read.

The latent grid comes from the family's ``vae_latent_shape`` hook; a family that cannot give it without its VAE
is planned without the grid-dependent checks, and the call completes the plan once the VAE is built.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import jax
import numpy as np
from flax import nnx

from vidax_core.attention.kinds import exchanges_heads
from vidax_core.config import RunConfig
from vidax_core.errors import PluginError, UserError
from vidax_core.guidance import Guidance, default_guidance
from vidax_core.io import noise
from vidax_core.model_api import DitBuild, SamplingPass
from vidax_core.parallel import mesh as meshlib
from vidax_core.parallel import sharding
from vidax_core.plugins import Plugins
from vidax_core.registry import ModelSpec
from vidax_core.runner.experts import check_switch_step
from vidax_core.runner import windowed
from vidax_core.runner.grid_check import check_grid
from vidax_core.schedulers import base as sched_base


# -- the pieces of a plan ----------------------------------------------------------------------------------------

def binned(spec: ModelSpec, ckpt: Any, cfg: RunConfig, plugins: Plugins) -> tuple[RunConfig, Any]:
    """``cfg`` at the aspect-ratio bin the family's ``resolution_binning`` picks for its size, and the bins (None:
    no binning, ``cfg`` itself)."""
    bins = plugins.call("resolution_binning", spec, ckpt=ckpt, run=cfg)
    if bins is None:
        return cfg, None
    h, w = bins.closest(cfg.sampling.height, cfg.sampling.width)
    return dataclasses.replace(cfg, sampling=dataclasses.replace(cfg.sampling, height=h, width=w)), bins


def sampling_passes(spec: ModelSpec, ckpt: Any, cfg: RunConfig, plugins: Plugins) -> list[SamplingPass]:
    """The run's denoising passes: the plugin's multi-pass recipe, or one pass of ``cfg``; both at the family's
    resolution bin when it bins (:func:`binned`)."""
    run, _ = binned(spec, ckpt, cfg, plugins)
    passes = plugins.call("sampling_passes", spec, ckpt=ckpt, run=run)
    return list(passes) if passes else [SamplingPass(run)]


def select_sampler(spec: ModelSpec, ckpt: Any, cfg: RunConfig, plugins: Plugins) -> sched_base.Sampler:
    """``sampling.scheduler`` if set, else the plugin's choice, else the checkpoint's scheduler_config.json."""
    choice = cfg.sampling.scheduler
    try:
        if choice is not None:
            if isinstance(choice, str):
                return sched_base.get_sampler(choice)
            opts, _ = sched_base.split_plan_lists(choice)  # the lists go to the plan (sampling_plan)
            name = opts.pop("name", None)
            if not name:
                raise UserError("sampling.scheduler needs a name, e.g. {name: unipc, flow_shift: 3.0}")
            return sched_base.get_sampler(name, **opts)
        picked = plugins.call("scheduler", spec, ckpt=ckpt, run=cfg)
        if picked is not None:
            return picked
        return sched_base.sampler_from_scheduler_config(ckpt.config("scheduler"))
    except (ValueError, TypeError, PluginError) as exc:
        cause = exc.__cause__ if isinstance(exc, PluginError) else exc  # a family's sampler of a bad config too
        if not isinstance(cause, (ValueError, TypeError)):
            raise
        where = "sampling.scheduler" if choice is not None else f"{ckpt.source}/scheduler/scheduler_config.json"
        raise UserError(f"{where}: {str(cause).splitlines()[0]}") from exc


def select_guidance(spec: ModelSpec, ckpt: Any, cfg: RunConfig, plugins: Plugins) -> Guidance:
    picked = plugins.call("guidance", spec, ckpt=ckpt, run=cfg)
    return picked if picked is not None else default_guidance(cfg)


def sampling_plan(spec, ckpt, cfg: RunConfig, plugins: Plugins, sampler, latent_shape) -> sched_base.SamplerPlan:
    """``sampler.plan`` with the plugin's extra arguments (sigma lists, dynamic shift)."""
    kwargs = dict(plugins.call("sampling_plan", spec, ckpt=ckpt, run=cfg, sampler=sampler,
                               latent_shape=latent_shape) or {})
    strength = float(kwargs.pop("denoise_strength", 1.0))
    choice = cfg.sampling.scheduler
    lists = sched_base.split_plan_lists(choice)[1] if isinstance(choice, Mapping) else {}
    steps = None if ("sigmas" in kwargs or "timesteps" in kwargs) and not lists else cfg.sampling.num_steps
    try:
        if lists:  # the user's explicit lists replace the plugin's
            kwargs = {k: v for k, v in kwargs.items() if k not in sched_base.PLAN_LISTS}
        plan = sched_base.plan_with_lists(sampler, steps, lists, **kwargs)
        if strength < 1.0:  # diffusers' get_timesteps: the last int(N * strength) steps
            kept = min(int(plan.num_steps * strength), plan.num_steps)
            if kept < 1:
                raise ValueError(f"denoise strength {strength} keeps none of the {plan.num_steps} steps")
            plan = plan.tail(plan.num_steps - kept)
        return plan
    except (ValueError, TypeError) as exc:
        raise UserError(f"sampler {getattr(sampler, 'name', type(sampler).__name__)} cannot plan this run: "
                        f"{str(exc).splitlines()[0]}") from exc


@dataclass
class Placement:
    """Where the DiT's weights live: the mesh, the logical rules, per-param PartitionSpecs, offloaded groups."""

    mesh: Any
    plan: meshlib.MeshPlan
    rules: dict[str, Any]
    specs: dict[tuple, Any]
    offload_groups: tuple[str, ...] = ()

    def sharding(self, path: tuple):
        from jax.sharding import NamedSharding

        return NamedSharding(self.mesh, self.specs.get(path, jax.sharding.PartitionSpec()))

    def put(self, path: tuple, array: np.ndarray) -> Any:
        if path and path[0] in self.offload_groups:
            return array  # read into its host chunks (or disk cache) by the offload executor
        return sharding.put(array, self.sharding(path))

    def replicated(self):
        from jax.sharding import NamedSharding, PartitionSpec

        return NamedSharding(self.mesh, PartitionSpec())


def stacked_groups(abstract_state: Any) -> set[str]:
    """Top-level attributes of a model holding stacked blocks (parameters whose first logical axis is ``layers``)."""
    from vidax_core.nn.layers import LAYERS

    return {str(path[0]) for path, names in sharding.param_names(abstract_state).items()
            if names and names[0] == LAYERS and len(path) > 1}


def offload_groups(spec: ModelSpec, build: DitBuild, cfg: RunConfig, model: Any = None) -> tuple[str, ...]:
    """The groups to stream from the host (every group of ``DitBuild.block_counts``), checked against the model
    (``model``: its ``nnx.eval_shape``, built here when not given): every stacked group must be one the model runs
    by name (``block_groups``), or offload would silently skip it."""
    model = model if model is not None else nnx.eval_shape(build.ctor)
    names = list(build.block_counts or ())
    if not names:
        raise UserError(f"offload.enabled: the plugin of {spec.id} names no block groups to offload; "
                        "set offload.enabled=false")
    runs = tuple(getattr(model, "block_groups", ()) or ())
    _, abstract_state = nnx.split(model)
    missing = sorted(stacked_groups(abstract_state) - set(runs))
    if missing or not set(names) <= set(runs):
        what = (f"stacked block groups {', '.join(missing)} are" if missing
                else f"groups {', '.join(sorted(set(names) - set(runs)))} are")
        raise UserError(f"offload cannot run {spec.id}: its {what} not in the model's block_groups "
                        f"({', '.join(runs) or 'none'}); set offload.enabled=false (plugin bug: report it)")
    check_chunk_groups(spec, model, cfg.offload.chunk_size)
    return tuple(names)


def check_chunk_groups(spec: ModelSpec, model: Any, chunk: Any) -> None:
    """An ``offload.chunk_size`` map names only block groups the model has (checked with offload on or off: a
    typo in a map is a typo either way)."""
    if not isinstance(chunk, Mapping):
        return
    runs = tuple(getattr(model, "block_groups", ()) or ())
    unknown = sorted(map(str, set(chunk) - set(runs)))
    if unknown:
        raise UserError(f"offload.chunk_size names {', '.join(unknown)}, not a block group of {spec.id} "
                        f"(groups: {', '.join(runs) or 'none'})")


def video_tokens(build: DitBuild, latent_shape: tuple[int, int, int]) -> int | None:
    """Tokens of the patchified latent video (the sequence SP splits), or None when the build gives no patch."""
    if not build.patch_size:
        return None
    pt, ph, pw = build.patch_size
    f, h, w = latent_shape
    return (f // pt) * (h // ph) * (w // pw)


def plan_placement(spec: ModelSpec, build: DitBuild, cfg: RunConfig, plugins: Plugins, latent_shape, batch: int,
                   n_devices: int | None = None, model: Any = None) -> Placement:
    """Check the parallel config against the model and the run (before any weight is read) and build the mesh.
    ``model``: the build's ``nnx.eval_shape`` when the caller keeps one (built here otherwise)."""
    model = model if model is not None else nnx.eval_shape(build.ctor)
    groups = offload_groups(spec, build, cfg, model) if cfg.offload.enabled else ()
    check_chunk_groups(spec, model, cfg.offload.chunk_size)
    counts = {g: n for g, n in (build.block_counts or {}).items() if g in groups}
    try:
        splits_heads = exchanges_heads(tuple(build.attention_kinds))
    except ValueError as exc:
        raise PluginError(spec.plugin, "build_dit", exc) from exc
    plan = meshlib.plan_mesh(cfg.parallel, n_devices=n_devices or jax.device_count(), heads=build.heads,
                             video_tokens=video_tokens(build, latent_shape), batch=batch, block_groups=counts,
                             offload=cfg.offload, sp_splits_heads=splits_heads)
    mesh = meshlib.make_mesh(plan)
    rules = sharding.make_rules(plugins.call("shard_rules", spec))
    specs = sharding.param_specs(nnx.split(model)[1], rules, mesh)
    return Placement(mesh, plan, rules, specs, groups)


def expected_batch(guide: Guidance, together: bool = True) -> int:
    """Model batch of the largest call, assuming the branches' contexts have equal shapes (checked after encoding);
    1 when every branch is its own call (``runtime.batch_branches=false``)."""
    from vidax_core.runner.step import group_branches

    return max(len(names) for names in group_branches(guide, together))


# -- the plan of a call ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CallPlan:
    """A call's passes with their samplers, guidance, latent grids, sampling plans and placements (one per expert),
    all checked. A grid (and its sampling plan) is None where the family gives no latent grid without its VAE, or
    the frame count is still to be predicted: :attr:`complete` is then False. A plan holds no state of a call: one
    plan may be run many times, each run makes its own (:meth:`vidax_core.runner.loaded.LoadedModel.generate`)."""

    cfg: RunConfig
    passes: list
    samplers: list
    guides: list
    grids: list
    splans: list
    placements: list = field(default_factory=list)  # per pass, per expert
    tokens: list = field(default_factory=list)  # video tokens per pass (None: no grid or no patch size)
    windows: tuple | None = None  # a chunked run's vidax_core.windows.Window tuple (grids: its largest window's)
    bins: Any = None  # the family's vidax_core.binning.ResolutionBins: the frames are resized by cover and crop
    kv_cache: Any = None  # a causal run's vidax_core.causal.kv.CacheSpec (one row per guidance branch)
    made_frames: int | None = None  # a chunked run's frame count (whole windows: maybe more than asked)

    @property
    def resize(self) -> str:
        """How the last pass's frames reach the requested size: ``cover_crop`` after resolution binning, else the
        multi-pass recipes' ``bicubic`` (io/video.py)."""
        return "cover_crop" if self.bins is not None else "bicubic"

    @property
    def complete(self) -> bool:
        return all(g is not None for g in self.grids)

    @property
    def total_steps(self) -> int:
        if self.windows is not None:
            return int(sum(w.num_steps for w in self.windows))
        return int(sum(s.num_steps for s in self.splans))


class Planner:
    """Plans the calls of one load: its model, checkpoint and denoiser builds (each built shape-only once; a
    placement is made once per expert, latent grid, model batch and the settings it reads, and shared by the
    plans that need it). ``calls`` counts the plans made (a served request is planned once). One plan at a time:
    ``vidax serve`` plans a posted request on its handler thread while the worker runs another."""

    def __init__(self, spec: ModelSpec, ckpt: Any, plugins: Plugins, builds: Sequence[DitBuild]) -> None:
        self.spec, self.ckpt, self.plugins, self.builds = spec, ckpt, plugins, list(builds)
        self._shapes: dict[int, Any] = {}
        self._placements: dict[Any, Placement] = {}
        self.calls = 0
        self._lock = threading.Lock()

    def shape(self, k: int) -> Any:
        """Expert ``k``'s module built shape-only (``nnx.eval_shape``), once per load."""
        if k not in self._shapes:
            self._shapes[k] = nnx.eval_shape(self.builds[k].ctor)
        return self._shapes[k]

    def placement(self, k: int, run: RunConfig, grid: tuple[int, int, int] | None, guide: Guidance) -> Placement:
        """Expert ``k``'s placement for a pass of ``run`` at ``grid`` (None: not known yet, the token rule is
        left out), checked against every parallel and offload rule."""
        batch = expected_batch(guide, run.runtime.batch_branches)
        key = (k, grid, batch, repr(run.parallel), repr(run.offload), repr(sorted(dict(run.options or {}).items())))
        if key not in self._placements:
            build = self.builds[k] if grid is not None else dataclasses.replace(self.builds[k], patch_size=None)
            if len(self._placements) >= 64:
                self._placements.pop(next(iter(self._placements)))
            self._placements[key] = plan_placement(self.spec, build, run, self.plugins, grid or (0, 0, 0),
                                                   batch=batch, model=self.shape(k))
        return self._placements[key]

    def grid(self, run: RunConfig, vae: Any = None) -> tuple[int, int, int] | None:
        """The latent (frames, height, width) of ``run``: the family's ``vae_latent_shape`` hook, else the built
        ``vae``'s own, else None."""
        s = run.sampling
        if s.num_frames is None:
            return None
        found = self.plugins.call("vae_latent_shape", self.spec, ckpt=self.ckpt, run=run)
        if found is None and vae is not None:
            found = vae.latent_shape(s.num_frames, s.height, s.width)
        return tuple(int(v) for v in found) if found is not None else None

    def plan(self, cfg: RunConfig, vae: Any = None) -> CallPlan:
        """Every check a call of ``cfg`` makes before sampling, and what it will run. ``vae``: the built VAE, for
        a family whose latent grid comes only from it."""
        with self._lock:
            self.calls += 1
            return self._plan(cfg, vae)

    def _plan(self, cfg: RunConfig, vae: Any) -> CallPlan:
        spec, ckpt, plugins, builds = self.spec, self.ckpt, self.plugins, self.builds
        passes = sampling_passes(spec, ckpt, cfg, plugins)
        samplers = [select_sampler(spec, ckpt, p.run, plugins) for p in passes]
        guides = [select_guidance(spec, ckpt, p.run, plugins) for p in passes]
        windows, made_frames, kv_cache = windowed.plan(spec, ckpt, cfg, plugins)
        if windows is not None:  # every window's grid meets the rules; the largest one places the weights
            if len(passes) > 1:
                raise UserError(f"the plugin of {spec.id} plans both passes and windows (plugin bug: report it)")
            grids = windowed.grids(windows)
            placements = []
            for grid in grids:
                check_grid(spec, ckpt, plugins, builds, cfg, grid)
                placements.append([self.placement(k, cfg, grid, guides[0]) for k in range(len(builds))])
            return CallPlan(cfg, passes, samplers, guides, grids[:1], [None], placements[:1],
                            [video_tokens(builds[0], grids[0])], windows, made_frames=made_frames,
                            kv_cache=kv_cache)
        grids = [self.grid(p.run, vae) for p in passes]
        placements = []
        for p, grid, guide in zip(passes, grids, guides):
            if grid is not None:  # the denoiser's patch and position limits, before the parallel rules
                check_grid(spec, ckpt, plugins, builds, p.run, grid)
            placements.append([self.placement(k, p.run, grid, guide) for k in range(len(builds))])
        splans = [sampling_plan(spec, ckpt, p.run, plugins, s, g) if g is not None else None
                  for p, s, g in zip(passes, samplers, grids)]
        for p, sp in zip(passes, splans):
            check_switch_step(p.run.sampling.boundary_step_index, builds, sp.num_steps if sp else None, spec.id)
        if cfg.sampling.initial_noise and grids[0] is not None:  # what the first pass takes as latents=
            noise.check_noise_shapes(cfg.sampling.initial_noise, builds[0].latent_shape(1, grids[0]))
        if cfg.output.save_latents and grids[-1] is not None:  # what the last pass returns
            check_latents_path(cfg.output.save_latents, builds[0].latent_shape(1, grids[-1]))
        tokens = [video_tokens(builds[0], g) if g is not None else None for g in grids]
        return CallPlan(cfg, passes, samplers, guides, grids, splans, placements, tokens,
                        bins=binned(spec, ckpt, cfg, plugins)[1])


def check_latents_path(path: str, shapes: Any) -> None:
    """``output.save_latents`` of a model whose latents are several arrays (written as a .npz archive) may not be
    named .npy (``lat.npy`` held an archive); one array named .npz is written as an archive
    (:func:`vidax_core.runner.outputs.save_latents`)."""
    if isinstance(shapes, dict) and os.path.splitext(str(path))[1].lower() == ".npy":
        raise UserError(f"output.save_latents {path}: this model's latents are several arrays "
                        f"({', '.join(sorted(shapes))}), written as a .npz archive: give a path ending in .npz")


def check_vae_grids(spec: ModelSpec, plan: CallPlan, vae: Any) -> None:
    """The grids a plan took from ``vae_latent_shape`` are the built VAE's own (a plugin whose hook and VAE
    disagree would sample one size and decode another)."""
    for p, grid in zip(plan.passes, plan.grids):
        s = p.run.sampling
        if grid is None or plan.windows is not None or not hasattr(vae, "latent_shape"):
            continue
        own = tuple(int(v) for v in vae.latent_shape(s.num_frames, s.height, s.width))
        if own != tuple(grid):
            raise PluginError(spec.plugin, "vae_latent_shape", ValueError(
                f"it gives the latent grid {grid} for {s.num_frames} frames at {s.width}x{s.height}, the built VAE "
                f"{own}"))


# -- what a plan says --------------------------------------------------------------------------------------------

def plan_lines(plan: CallPlan) -> list[str]:
    """The plan as ``vidax run --dry-run`` prints it and a call logs it: one line per pass (size, steps, sampler,
    guidance, latent grid and video tokens) and the mesh of the first pass's placement."""
    lines = []
    for k, (p, sampler, guide, grid, splan, tokens) in enumerate(zip(plan.passes, plan.samplers, plan.guides,
                                                                   plan.grids, plan.splans, plan.tokens)):
        s = p.run.sampling
        frames = "frames to predict" if s.num_frames is None else f"{s.num_frames} frames"
        steps = splan.num_steps if splan is not None else s.num_steps
        name = getattr(sampler, "name", type(sampler).__name__)
        branches = len(guide.branches)
        if grid is None:
            latent = "latent grid from the VAE (the plugin gives none without it)" if s.num_frames is not None \
                else "latent grid once the frame count is predicted"
        else:
            latent = f"latent {'x'.join(map(str, grid))}" + (f" ({tokens} video tokens)" if tokens else "")
        head = f"pass {k + 1}/{len(plan.passes)}:" if len(plan.passes) > 1 else "plan:"
        named = f"{p.name}: " if p.name != "sampling" and not p.name.startswith("pass ") else ""
        if plan.windows is not None:
            latent = f"largest window's {latent}"
        lines.append(f"{head:<12}{named}{frames} at {s.width}x{s.height}, {steps} steps of {name}, guidance "
                     f"{guide.describe()} ({branches} branch{'es' if branches != 1 else ''}), {latent}")
    if plan.windows is not None:
        lines.append(f"windows:    {windowed.describe(plan.windows)} (one window at a time on the devices)")
    if plan.kv_cache is not None:
        spec, batch = plan.kv_cache, len(plan.guides[0].branches)
        segments = ", ".join(f"{s.name} {s.tokens} tokens" for s in spec.segments)
        lines.append(f"kv cache:   {spec.bytes(batch) / 2**20:.1f} MiB ({segments}; {spec.layers} layers, {batch} "
                     "branch(es)), fixed by the attention window whatever the video's length")
    if plan.bins is not None:
        s, last = plan.cfg.sampling, plan.passes[-1].run.sampling
        lines.append(f"binning:    {plan.bins.name or 'aspect-ratio'} bins: sampled at {last.width}x{last.height}, "
                     f"frames resized to cover {s.width}x{s.height} and centre-cropped")
    if plan.windows is not None:
        made, asked = plan.made_frames, plan.cfg.sampling.num_frames
        if made is not None and asked is not None and made != asked:  # Helios makes whole chunks
            lines.append(f"frames:     the video has {made} frames, not the {asked} asked: this model makes its "
                         f"video in whole windows (sampling.num_frames={made} asks for exactly that)")
    m = plan.placements[0][0].plan
    groups = plan.placements[0][0].offload_groups
    lines.append(f"mesh:       dp={m.dp} tp={m.tp} sp={m.sp} over {m.size} of {jax.device_count()} "
                 f"{jax.default_backend()} device(s)" + (f", offloading {', '.join(groups)}" if groups else ""))
    return lines
