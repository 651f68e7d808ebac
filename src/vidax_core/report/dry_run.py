"""``vidax run --dry-run``: validate the config and describe what a run would do, without loading weights.

Only the checkpoint's small JSON files are read (for a hub repo only those are fetched); each denoiser (one, or
several experts switched by timestep) is built shape-only with ``nnx.eval_shape``, which gives exact parameter
bytes without allocating them. The parallel and offload rules are checked by the real run's own planning
function, with the video tokens from the VAE's latent grid (hook ``vae_latent_shape``) and the DiT's patch size.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, replace
from typing import Any, Mapping

import jax
import numpy as np

from vidax_core.config import RunConfig, to_yaml
from vidax_core.errors import UserError
from vidax_core.io.run_checkpoint import checkpoint_for_run
from vidax_core.nn.state import abstract_model
from vidax_core.parallel.mesh import chunk_size_of
from vidax_core.plugins import Plugins
from vidax_core.report import phase_time
from vidax_core.placement.memory_plan import fmt_bytes as _fmt_bytes
from vidax_core.runner.preflight import needs_image, needs_video, placeholder_clip, placeholder_image, preflight

# the `files:` line lists these first, in this order, then the other parts model_index.json names
_COMMON_PARTS = ("transformer", "transformer_2", "vae", "text_encoder", "tokenizer", "scheduler", "latent_upsampler")


_LORA_MODE = {"fused": "            (lora_mode fused: into the weights at load, no cost per step)",
              "unfused": "            (lora_mode unfused: factors applied in each step, swappable per call of a loaded "
                         "pipe)"}

@dataclass(frozen=True)
class Sizing:
    """Parameter bytes of one denoiser: in total and per stacked group ({name: (blocks, bytes)})."""

    total: int
    groups: dict[str, tuple[int, int]]

    @property
    def blocks(self) -> int:
        return sum(n for n, _ in self.groups.values())

    @property
    def block_bytes(self) -> int:
        return sum(b for _, b in self.groups.values())

    def resident(self, streamed: tuple[str, ...], chunk: int | Mapping[str, int]) -> int:
        """Device bytes with ``streamed`` groups offloaded: everything else + 2 chunks (the running one and the
        prefetched next) of each streamed group, never more than the whole group. ``chunk``: blocks per chunk,
        one integer or {group: integer} (``offload.chunk_size``)."""
        out = self.total
        for g in streamed:
            if g in self.groups:
                n, b = self.groups[g]
                out += -b + min(2 * chunk_size_of(chunk, g), n) * (b / n if n else 0)
        return int(out)


def size_denoiser(flat: dict, block_counts: dict[str, int] | None) -> Sizing:
    """Sizing of an abstract parameter tree (flat path -> ShapeDtypeStruct); the stacked groups and their block
    counts are the ones the plugin declares in ``DitBuild.block_counts``."""
    counts = dict(block_counts or {})
    total, per_group = 0, {g: 0 for g in counts}
    for path, leaf in flat.items():
        n = int(np.prod(leaf.shape)) * np.dtype(leaf.dtype).itemsize
        total += n
        head = str(path[0]) if path else ""
        if head in per_group:
            per_group[head] += n
    return Sizing(total, {g: (counts[g], per_group[g]) for g in counts})


def describe_8bit(flat: dict, groups: Any = ()) -> str | None:
    """The ``8-bit:`` line of a denoiser whose block Linear kernels (and the family's layers outside the stacked
    ``groups``) are 8-bit (:mod:`vidax_core.quant`): their bytes, their fp32 scales' and what stays in full
    precision; None when no weight is 8-bit."""
    eight = {p: leaf for p, leaf in flat.items() if np.dtype(leaf.dtype).itemsize == 1}
    if not eight:
        return None
    nbytes = lambda leaves: sum(int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize for v in leaves)  # noqa: E731
    scales = [v for p, v in flat.items() if p and p[-1] == "kernel_scale"]
    rest = nbytes(flat.values()) - nbytes(eight.values()) - nbytes(scales)
    dtypes = sorted({np.dtype(v.dtype).name for v in eight.values()})
    outside = sum(1 for p in eight if p and str(p[0]) not in groups)
    where = f" ({outside} outside the blocks)" if outside else ""
    return (f"{_fmt_bytes(nbytes(eight.values()))} of {'/'.join(dtypes)} weights in {len(eight)} Linear "
            f"kernels{where} + {_fmt_bytes(nbytes(scales))} of fp32 scales; {_fmt_bytes(rest)} stays in full "
            "precision (norms, modulation, patch embedding, heads, biases, the embedders the family keeps); "
            "weight-only: matmuls run in the compute dtype")


def _guidance_text(cfg: RunConfig) -> str:
    """``sampling.guidance_scale``, or where it comes from when the model fills it in (its guider config)."""
    g = cfg.sampling.guidance_scale
    return "the checkpoint's" if g is None else str(g)


def _describe_size(s: Sizing) -> str:
    if not s.groups:
        return f"{_fmt_bytes(s.total)} of parameters (no stacked blocks)"
    parts = " + ".join(f"{g} {n}" for g, (n, _) in s.groups.items())
    detail = f": {parts}" if len(s.groups) > 1 else ""
    return (f"{_fmt_bytes(s.total)} of parameters ({s.blocks} stacked blocks{detail}, "
            f"{_fmt_bytes(s.block_bytes)} in blocks)")


def _chunk_text(chunk: Any) -> str:
    if isinstance(chunk, Mapping):
        return "{" + ", ".join(f"{g}: {n}" for g, n in chunk.items()) + "}"
    return str(chunk)


def _activations(cfg: RunConfig, build: Any, abstract_state: Any, mesh_plan: Any, batch: int,
                 tokens: int | None) -> tuple[str, int]:
    """The ``activations:`` line and its bytes: one block's live intermediates per device (:mod:`.activations`)."""
    from vidax_core.placement.activations import estimate

    if tokens is None:
        return "not estimated (no video token count without the latent grid and patch size)", 0
    text = int(cfg.sampling.max_sequence_length or 0)
    widths, n = estimate(build, abstract_state, batch=batch, tokens=tokens, text_tokens=text, dp=mesh_plan.dp,
                         tp=mesh_plan.tp, sp=mesh_plan.sp)
    if widths is None:
        return "not estimated (the denoiser's parameters name no embed axis)", 0
    return (f"~{_fmt_bytes(n)} per device inside one block (estimate: batch {batch} over dp={mesh_plan.dp}, "
            f"{tokens} video + {text} text tokens, width {widths.model}, attention {widths.attention}, "
            f"MLP {widths.mlp}; fp32 residual in and out + the larger of Ulysses q/k/v/out and the MLP hidden)"), n


def _dequantised_block_bytes(flat: dict, groups: Any, compute_dtype: Any) -> int:
    """Bytes of the largest block's 8-bit kernels in ``compute_dtype`` (one layer of each stacked group)."""
    per_group: dict[str, int] = {}
    for path, leaf in flat.items():
        if path and str(path[0]) in groups and np.dtype(leaf.dtype).itemsize == 1 and len(leaf.shape) > 1:
            per_group[str(path[0])] = per_group.get(str(path[0]), 0) + int(np.prod(leaf.shape[1:]))
    return max(per_group.values(), default=0) * np.dtype(compute_dtype).itemsize


#: what a process driving an accelerator holds beside the run's parts: Python, JAX, the compiled programs and
#: XLA's compiles (1.1 GiB while sampling, 3 GiB while the decode compiled, Wan2.1-14B on the v5e, docs/memory.md)
PROCESS_FLOOR = 2 << 30


def process_bytes(cpu: bool, runtime_bytes: int | None) -> int:
    """What this process holds before the run's parts, the device runtime's share left out: a dry run on the
    accelerator's own host has started the runtime, whose ~13 GiB (v5e) are in this process's resident memory
    (gVisor reports no RssAnon, so the resident figure is what there is) and counted once, as the runtime's row."""
    from jax._src import xla_bridge

    from vidax_core.report import memory

    here = (memory.anon_mb() or memory.rss_mb() or 0) * 2**20
    if not cpu and xla_bridge.backends_are_initialized() and jax.default_backend() != "cpu":
        measured = memory.runtime_mb()
        here -= measured * 2**20 if measured is not None else (runtime_bytes or 0)
    return int(max(here, 0 if cpu else PROCESS_FLOOR))


def _unset(cfg: RunConfig, key: str, value: Any) -> bool:
    """``key=value`` is advice worth giving: the run does not set it already."""
    node: Any = cfg
    for part in key.split("."):
        node = getattr(node, part, None)
    return node != value


def placement_table(cfg: RunConfig, spec: Any, ckpt: Any, sizes: list, streamed: tuple, resident: float, tp: int,
                    activation_bytes: int, peak: Any, flat: dict, compute_dtype: Any,
                    host_memory_gib: float | None = None, kv_cache_bytes: int | None = None, batch: int = 1,
                    frees_denoiser: bool = False) -> Any:
    """The placement (:class:`vidax_core.placement.memory_plan.Placement`) of a run: where the text encoder, the
    denoiser and the VAE live per phase, against the device's memory and the host's (``host_memory_gib``: a host
    the user names; else what this machine has available), each part with the key that shrinks it.
    ``frees_denoiser``: the denoiser's weights are freed before the decode (``vidax run``'s one call)."""
    import psutil

    from vidax_core.placement import memory_plan as mp

    plan = mp.Placement(budget=mp.device_budget(peak))
    cpu = jax.default_backend() == "cpu" and peak is None  # the devices are this host's memory
    enc, run_dtype = mp.encoder_bytes(ckpt, spec, cfg, cpu=cpu), mp.encoder_dtype(spec, cfg)
    where = mp.encoder_placement(cfg, ckpt, mp.vae_bytes(ckpt, cfg) or 0, peak, spec)  # `vidax run`: VAE first
    plan.encoder_where = where.where
    enc_dtype = where.weights or run_dtype  # "float8_e4m3fn weights, bfloat16 compute" for a file kept 8-bit
    if cpu and run_dtype != "float32":
        enc_dtype += (" + the float32 copy XLA:CPU makes of its weights" if enc_dtype == run_dtype else
                      " + the float32 copy XLA:CPU makes of its other weights")
    stream_key = "runtime.encode_on=stream" if _unset(cfg, "runtime.encode_on", "stream") else None
    if where.where == "none":
        plan.add("text encoder", "none", note=where.reason, phases="encode")
    elif enc is None:
        plan.add("text encoder", "not sized", note="its weights are not at hand", phases="encode")
    elif where.where == "cpu":
        plan.add("text encoder", "host CPU, then freed", host=enc, note=f"at {enc_dtype}; runtime.encode_on: "
                 f"{where.reason}", phases="encode", host_key=stream_key)
    elif where.where == "stream":
        plan.add("text encoder", "device, layers streamed", where.device_bytes,
                 note=f"at {enc_dtype}, {_fmt_bytes(enc)} whole; read from the checkpoint "
                      f"{where.layers_per_chunk} layer(s) per chunk before the denoiser is placed; runtime.encode_on: "
                      f"{where.reason}", phases="encode")
    else:
        plan.add("text encoder", "device, then freed", enc, note=f"at {enc_dtype}, before the denoiser is placed",
                 phases="encode", device_key=stream_key,
                 host_key="offload.storage=disk (the encoder streams too)" if cpu and _unset(
                     cfg, "offload.storage", "disk") else stream_key)
    streamed_bytes = sum(s.groups[g][1] for s in sizes for g in streamed if g in s.groups)
    dev = int(resident / tp)
    if cpu and streamed and cfg.offload.storage != "disk":  # the CPU uses host chunks in place: none in flight
        dev = int((sum(s.total for s in sizes) - streamed_bytes) / tp)  # (disk: two chunks read, in flight)
    chunk = cfg.offload.chunk_size
    device_key = ("offload.enabled=true" if not cfg.offload.enabled else
                  "offload.chunk_size=1" if not isinstance(chunk, dict) and chunk > 1 else
                  "model.weight_dtype=float8_e4m3fn" if _unset(cfg, "model.weight_dtype", "float8_e4m3fn") else
                  f"parallel.tp={2 * tp} over {2 * tp} devices")
    held = ("denoise",) if frees_denoiser else ("denoise", "decode")
    freed = "; freed before the decode" if frees_denoiser else ""
    if cfg.offload.enabled and streamed:
        if cfg.offload.storage == "disk":
            from vidax_core.parallel.disk_chunks import cache_root

            plan.add("denoiser", "device + disk cache", dev, phases=held, device_key=device_key,
                     note=f"{_fmt_bytes(streamed_bytes)} of blocks read through the page cache from {cache_root()}"
                          + freed)
        else:
            plan.add("denoiser", "device + pinned host", dev, streamed_bytes, phases=held,
                     note="the streamed blocks once in host memory" + freed, device_key=device_key,
                     host_key="offload.storage=disk")
    else:
        plan.add("denoiser", "device", dev, device_key=device_key, phases=held, note=freed.removeprefix("; "),
                 host_key="offload.enabled=true offload.storage=disk" if cpu else None)
    sp = cfg.parallel.sp
    if kv_cache_bytes:
        plan.add("kv cache", "device", kv_cache_bytes, phases="denoise",
                 note="a causal run's keys and values, fixed by the attention window (heads over tp and sp)",
                 device_key=f"parallel.sp={2 * sp} over {2 * sp} devices, or a shorter options.cache_window")
    split = ("runtime.batch_branches=false (one model call per guidance branch: the activations of one), "
             if batch > 1 and cfg.runtime.batch_branches else "")
    plan.add("activations", "device", activation_bytes, note="one block, estimate", phases="denoise",
             device_key=f"{split}parallel.sp={2 * sp} over {2 * sp} devices, or a lower sampling.height / width / "
                        "num_frames")
    if cpu and (dequant := _dequantised_block_bytes(flat, sizes[0].groups, compute_dtype)):
        plan.add("8-bit kernels", "device", dequant, note="one block's, converted to the compute dtype for its matmuls "
                 "(XLA:CPU materialises a dot's operands; an accelerator fuses the conversion)", phases="denoise")
    vae = mp.vae_bytes(ckpt, cfg)
    if vae:
        plan.add("vae", "device", vae, note="at float32, built before the prompts encode", phases="all")
    decode = mp.decode_bytes(spec, ckpt, cfg)
    tiling = False  # as the run will decode
    if decode:
        tiling = cfg.vae.tiling
        tiled = mp.tiling_options(tiling).enabled
        auto, why = mp.decode_tiling(spec, ckpt, cfg, plan._phase_sum("device", "decode"), peak)
        if why and not tiled:  # the run tiles it itself: sized tiled, said so
            decode, tiled, tiling = mp.decode_bytes(spec, ckpt, cfg, tiling=auto), True, auto
        itself = ("; the run tiles it: the untiled decode does not fit" if auto is True else
                  "; the run tiles it in 128-pixel tiles: neither the untiled decode nor the reference's tiles fit")
        plan.add("vae decode", "device", decode, phases="decode",
                 note=("one tile's temporaries, estimate" + (itself if why else "")) if tiled else
                 "one decode program's temporaries, estimate",
                 device_key=mp.smaller_tiles(ckpt) if tiled else "vae.tiling=true")
    if cpu:
        for r in plan.rows:
            r.where, r.host, r.host_key = r.where.replace("device", "cpu device"), r.host + r.device, \
                r.host_key or r.device_key
    s = cfg.sampling
    frames = int(s.num_frames or 1) * int(s.height) * int(s.width) * 3
    plan.add("decoded video", "host", host=frames * (4 + 4 + 1), phases="decode",
             note="float32 frames, their resized / joined copy and the uint8 frames the mp4 is written from")
    overlap = mp.tile_overlap(tiling, int(s.height), int(s.width))
    if overlap > 1.0:
        plan.add("decoded tiles", "host", host=int(frames * 4 * overlap), phases="decode",
                 note=f"every tile's float32 output until the last tile is in (tiles overlap x{overlap:.2f})")
    if decode and peak is not None and peak.decode_host_gib:
        plan.add("decode extra", "host", host=int(peak.decode_host_gib * 2**30), phases="decode", compiling=True,
                 note=f"what a decode held beyond its frames on the {peak.name} while its programs compiled, "
                      "measured; not held when the compilation cache has them")
    plan.runtime_bytes = (int(peak.runtime_host_gib * 2**30) if peak is not None and peak.runtime_host_gib is not None
                          else 0 if cpu or peak is None else None)
    plan.process_bytes = process_bytes(cpu, plan.runtime_bytes)
    if host_memory_gib is not None:
        plan.host_budget, plan.host_label = int(host_memory_gib * 2**30), "named (--host-memory)"
    elif peak is None:
        plan.host_budget, plan.host_label = int(psutil.virtual_memory().available), "available"
    return plan


def target_device(cfg: RunConfig, device: str | None) -> tuple[RunConfig, Any, str]:
    """(the run as it would be on the target device, its peak-table entry or None, a label).

    ``device`` names an entry of :data:`vidax_core.report.throughput.PEAKS` (``--device h200``); None = the
    device this process would run on. Weights are then sized at that device's dtype policy (bf16 on GPU/TPU)
    unless ``model.dtype`` is set: a dry run on a CPU laptop for an H200 sizes what the H200 would hold."""
    from vidax_core.report import throughput

    if device is None:
        peak = throughput.local_peak()
        label = peak.name if peak is not None else f"this {jax.default_backend()} device (no peak known)"
        return cfg, peak, label
    peak = throughput.named(device)
    if cfg.model.dtype is None:
        cfg = replace(cfg, model=replace(cfg.model, dtype=peak.policy))
    return cfg, peak, peak.name


def _compute_line(cfg: RunConfig, builds: list, plugins: Plugins, spec: Any, ckpt: Any, latent: Any, peak: Any,
                  label: str, devices: int) -> str:
    """The ``compute:`` line: FLOPs of one denoising step (every guidance branch) and its ideal time."""
    from vidax_core.flops import human, step_flops
    from vidax_core.report import throughput
    from vidax_core.runner.plan import select_guidance

    if latent is None or builds[0].flops is None:
        return "not estimated (no latent grid or the denoiser states no FLOP count)"
    guide = select_guidance(spec, ckpt, cfg, plugins)
    batches = [tuple(b.name for b in guide.branches)]  # the branches of one step, as one batch
    text = int(cfg.sampling.max_sequence_length or 0)
    flops = step_flops(builds[0], batches, latent, text)
    line = (f"{human(flops)} per denoising step ({len(guide.branches)} guidance branch"
            f"{'es' if len(guide.branches) != 1 else ''}, {text} text tokens)")
    if peak is None:
        return line + f"; ideal step time not known on {label} (name one: --device h200)"
    dtype = builds[0].param_dtype  # 8-bit weights are weight-only: the matmuls still run in the compute dtype
    ideal = throughput.ideal_step_s(flops, peak, dtype, devices)
    return line + (f"; ideal {ideal:.3g} s/step on {devices} x {label} at 100% of its "
                   f"{throughput.peak_flops(peak, dtype)[0] / 1e12:.0f} TFLOP/s peak "
                   f"({ideal * cfg.sampling.num_steps:.3g} s for {cfg.sampling.num_steps} steps)")



@dataclass
class RunSizing:
    """What a run's plan holds where: the largest pass's latent grid, each denoiser's sizing, the streamed groups,
    the device weights and activations, and the placement table (:func:`placement_table`)."""

    latent: Any
    mesh_plan: Any
    streamed: tuple
    abstracts: list
    sizes: list
    chunk: Any
    tp: int
    resident: float
    how: str
    activations: str
    placement: Any


def size_run(cfg: RunConfig, spec: Any, ckpt: Any, builds: list, plan: Any, peak: Any = None,
             host_memory_gib: float | None = None, single: bool = True) -> RunSizing:
    """The sizing of a planned run (the dry run prints it; a run checks its host memory with it before reading a
    weight), from shapes and file headers only. ``single``: ``vidax run``'s one call, which frees the denoiser
    before an unwindowed decode; a loaded pipe keeps it."""
    from vidax_core.runner.plan import expected_batch, video_tokens

    sized = max(range(len(plan.passes)), key=lambda k: np.prod(plan.grids[k]) if plan.grids[k] else 0)
    latent, placements = plan.grids[sized], plan.placements[sized]  # the largest pass is sized
    batch = expected_batch(plan.guides[sized], cfg.runtime.batch_branches)
    mesh_plan, streamed = placements[0].plan, placements[0].offload_groups
    abstracts = [abstract_model(b.ctor) for b in builds]
    sizes = [size_denoiser(a[2], b.block_counts) for a, b in zip(abstracts, builds)]
    activations, activation_bytes = _activations(cfg, builds[0], abstracts[0][1], mesh_plan, batch,
                                                 video_tokens(builds[0], latent) if latent is not None else None)
    tp, chunk = cfg.parallel.tp, cfg.offload.chunk_size
    if cfg.offload.enabled and streamed:
        resident = sum(s.resident(streamed, chunk) for s in sizes)
        how = f"offload: non-block params + 2 chunks of {_chunk_text(chunk)} block(s) of each streamed group"
    else:
        resident = sum(s.total for s in sizes)
        how = "all weights resident"
    if len(builds) > 1:
        how += f"; all {len(builds)} experts stay loaded"
    kv = None
    if getattr(plan, "kv_cache", None) is not None:
        mp = mesh_plan
        kv = plan.kv_cache.per_device_bytes(batch, mp.dp, mp.tp, mp.sp)
    table = placement_table(cfg, spec, ckpt, sizes, streamed if cfg.offload.enabled else (), resident, tp,
                            activation_bytes, peak, abstracts[0][2], builds[0].param_dtype, host_memory_gib,
                            kv_cache_bytes=kv, batch=batch, frees_denoiser=single and plan.windows is None)
    return RunSizing(latent, mesh_plan, streamed, abstracts, sizes, chunk, tp, resident, how, activations, table)


def _uses_published(cfg: RunConfig, spec: Any, plugins: Plugins) -> bool:
    """Whether the dry run sizes ``cfg`` from the id's published layout (:func:`dry_run_checkpoint`)."""
    from vidax_core.io.checkpoint import local_snapshot
    from vidax_core.io.published import has_layout

    value = cfg.model.checkpoint
    default = not value or (value == spec.hub_repo and cfg.model.revision == spec.hub_revision)
    return default and has_layout(spec.id, plugins) and not (value and local_snapshot(value, cfg.model.revision))


def dry_run_checkpoint(cfg: RunConfig, spec: Any, plugins: Plugins) -> tuple[Any, str | None]:
    """The checkpoint a dry run sizes, and a line saying where its sizes come from when not from its files.

    The id's own hub repo (``model.checkpoint`` left at its preset, or no checkpoint at all) that is not fully in
    the local Hugging Face cache is sized from the published layout its plugin ships (configs and tensor shapes
    of every component, text encoders included): no download, no network. Any other checkpoint is read as a run
    reads it (only its JSON files for a hub repo)."""
    from vidax_core.io.run_checkpoint import checked
    from vidax_core.io.published import PublishedCheckpoint

    value = cfg.model.checkpoint
    if _uses_published(cfg, spec, plugins):
        ckpt = checked(PublishedCheckpoint(spec.id, plugins, repo=value or spec.original_repo), cfg, spec, plugins)
        family = plugins.family_object(spec) if hasattr(plugins, "family_object") else None
        shipped = spec.plugin or type(family).__module__.split(".")[0]
        why = ("its weights are not in the local Hugging Face cache" if value else
               "no checkpoint is set and no diffusers-layout repo is published for it")
        return ckpt, (f"from {spec.id}'s published layout shipped with {shipped} ({why}): every component at "
                      "its real size, no weights read, nothing downloaded")
    return checkpoint_for_run(cfg, spec, plugins, configs_only=True), None


def describe_plan(cfg: RunConfig, plugins: Plugins, device: str | None = None,
                  host_memory_gib: float | None = None) -> str:
    """What ``vidax run`` would do with ``cfg``: the call's plan from the planner a real call runs
    (:mod:`.plan`, the same lines it logs), then the sizing of its weights, activations and compute. Nothing is
    written (a built-in checkpoint a plugin generates on first use goes to a temporary folder)."""
    from vidax_core.io.builtin import no_cache_writes

    cfg, peak, label = target_device(cfg, device)
    spec = plugins.registry.get(cfg.model.id)
    with no_cache_writes(), tempfile.TemporaryDirectory(prefix="vidax-dry-run-") as tmp:
        shown = cfg
        cfg, assumed = stand_ins(cfg, spec, plugins, tmp)
        preflight(cfg, spec, plugins, check_outputs=False)
        ckpt, sized_from = dry_run_checkpoint(cfg, spec, plugins)
        return _describe(cfg, shown, spec, plugins, ckpt, sized_from, assumed, peak, label, device, host_memory_gib)


def stand_ins(cfg: RunConfig, spec: Any, plugins: Plugins, tmp: str) -> tuple[RunConfig, list[str]]:
    """The run as the dry run sizes it, and a line per input it had to assume: an image-to-video model given no
    image gets a grey placeholder at the video's size in ``tmp`` (only its size matters to the plan), a
    video-to-video model given no clip a sparse one of the run's frames and size; a model
    that predicts its frame count from the encoded prompt gets 121 frames when its weights are not at hand."""
    notes = []
    if cfg.image is None and needs_image(spec):
        cfg = replace(cfg, image=placeholder_image(tmp, cfg.sampling.width, cfg.sampling.height))
        notes.append(f"image: none given; sized with a {cfg.sampling.width}x{cfg.sampling.height} placeholder (a run "
                     "needs image=path/to/frame.png)")
    if cfg.video is None and needs_video(spec):
        s = cfg.sampling
        cfg = replace(cfg, video=placeholder_clip(tmp, s.num_frames, s.width, s.height))
        notes.append(f"video: none given; sized with a {s.num_frames}-frame {s.width}x{s.height} placeholder clip (a "
                     "run needs video=path/to/clip.mp4)")
    if cfg.sampling.num_frames is None and "num_frames" in spec.predicts and _uses_published(cfg, spec, plugins):
        cfg = replace(cfg, sampling=replace(cfg.sampling, num_frames=121))
        notes.append("sampling.num_frames: unset (the checkpoint's duration head predicts it from the prompt, which "
                     "a dry run does not encode); sized at 121 frames (set sampling.num_frames to size another)")
    return cfg, notes


def _describe(cfg: RunConfig, shown: RunConfig, spec: Any, plugins: Plugins, ckpt: Any, sized_from: str | None,
              assumed: list[str], peak: Any, label: str, device: str | None,
              host_memory_gib: float | None = None) -> str:
    """The dry run's report of ``cfg`` (``shown``: the config as the user gave it, printed at the end)."""
    from vidax_core.runner.denoiser import build_dit
    from vidax_core.runner.plan import Planner, plan_lines, video_tokens
    from vidax_core.runner.stages import frame_stages

    if cfg.sampling.num_frames is None:
        raise UserError(f"--dry-run needs sampling.num_frames: {spec.id} predicts the frame count from the encoded "
                        "prompt, which a dry run does not load; set sampling.num_frames=...")
    builds = build_dit(spec, ckpt, cfg, plugins)
    from vidax_core.report.encoder_check import check_text_encoder

    check_text_encoder(spec, ckpt, cfg, plugins)  # as the run builds it, nothing read
    from vidax_core import lora

    adapters = lora.prepare(cfg, spec, ckpt, builds, plugins, weights_optional=True).summaries
    plan = Planner(spec, ckpt, plugins, builds).plan(cfg)
    z = size_run(cfg, spec, ckpt, builds, plan, peak, host_memory_gib)
    latent, sizes, abstracts, streamed, chunk, tp = z.latent, z.sizes, z.abstracts, z.streamed, z.chunk, z.tp
    if latent is not None:
        n = video_tokens(builds[0], latent)
        pt, ph, pw = builds[0].patch_size or (1, 1, 1)
        tokens = (f"{n} video tokens (latent {'x'.join(map(str, latent))}, patch {pt}x{ph}x{pw})" if n is not None
                  else "not checked (the denoiser declares no patch size)")
    else:  # no latent grid without the VAE's weights: every rule but sp | tokens is still checked, by the same code
        tokens = f"not checked (the plugin of {spec.id} gives no latent shape without loading its VAE)"
    mesh_plan, resident, how, activations = z.mesh_plan, z.resident, z.how, z.activations
    files = [c + "/" for c in dict.fromkeys([*_COMMON_PARTS, *(k for k in ckpt.model_index if not k.startswith("_"))])
             if ckpt.has(c)]
    if len(builds) == 1:
        denoiser = [f"denoiser:   {_describe_size(sizes[0])}"]
    else:
        denoiser = [f"denoiser:   {len(builds)} experts switched by timestep, "
                    f"{_fmt_bytes(sum(s.total for s in sizes))} of parameters in all"]
        denoiser += [f"  {b.component}: {_describe_size(s)}" for b, s in zip(builds, sizes)]
    lines = [
        f"model:      {spec.id} ({spec.family}, plugin {spec.plugin} {spec.version})",
        f"checkpoint: {ckpt.source}" + ("" if sized_from else f" -> {ckpt.root}"),
        *([f"sized:      {sized_from}"] if sized_from else []),
        *[f"assumed:    {a}" for a in assumed],
        f"files:      {', '.join(files) or 'none found'}",
        f"video:      {cfg.sampling.num_frames} frames at {cfg.sampling.width}x{cfg.sampling.height}, "
        f"{cfg.sampling.num_steps} steps, guidance {_guidance_text(cfg)}",
        *plan_lines(plan),
        *[f"then:       {st.name or 'stage'}: {st.model} over the decoded frames (its own --dry-run sizes it)"
          for st in frame_stages(spec, ckpt, cfg, plugins)],
        f"tokens:     {tokens}" + (" (the largest pass)" if len(plan.passes) > 1 else ""),
        f"target:     {label}; weights {np.dtype(builds[0].param_dtype).name}"
        + (" (the device's policy)" if device and cfg.model.dtype == getattr(peak, "policy", None) else ""),
        f"attention:  {cfg.attention.backend}",
        "offload:    " + (f"on, chunk {_chunk_text(chunk)} ({', '.join(streamed)})" if cfg.offload.enabled else "off"),
        *denoiser,
        *([f"8-bit:      {q}"] if (q := describe_8bit(abstracts[0][2], sizes[0].groups)) else []),
        *([f"lora:       {s.line()}" for s in adapters] + ([_LORA_MODE[cfg.lora_mode]] if adapters else [])),
        f"per device: ~{_fmt_bytes(resident / tp)} of DiT weights ({how}; tensor parallel divides by tp={tp})",
        f"activations: {activations}",
        *z.placement.lines(_fmt_bytes),
        f"compute:    {_compute_line(cfg, builds, plugins, spec, ckpt, latent, peak, label, mesh_plan.size)}",
        *phase_time.lines(cfg, plan, builds, ckpt, spec, peak, label, mesh_plan.size,
                          z.placement.encoder_where),
        f"output:     {os.path.abspath(cfg.output.path) if cfg.output.path else 'none'}",
        "",
        "resolved config:",
        to_yaml(shown),
    ]
    return "\n".join(lines)
