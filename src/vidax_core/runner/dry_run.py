"""``vidax run --dry-run``: validate the config and describe what a run would do, without loading weights.

Only the checkpoint's small JSON files are read (for a hub repo only those are fetched); each denoiser (one, or
several experts switched by timestep) is built shape-only with ``nnx.eval_shape``, which gives exact parameter
bytes without allocating them. The parallel and offload rules are checked by the real run's own planning
function, with the video tokens from the VAE's latent grid (hook ``vae_latent_shape``) and the DiT's patch size.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any, Mapping

import jax
import numpy as np

from vidax_core.config import RunConfig, to_yaml
from vidax_core.errors import UserError
from vidax_core.io.checkpoint import checkpoint_for_run
from vidax_core.nn.state import abstract_model
from vidax_core.parallel.mesh import chunk_size_of
from vidax_core.plugins import Plugins
from vidax_core.runner.preflight import preflight


_LORA_MODE = {"fused": "            (lora_mode fused: into the weights at load, no cost per step)",
              "unfused": "            (lora_mode unfused: factors applied in each step, swappable per call of a loaded "
                         "pipe)"}

def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024.0
    return f"{n:.1f} TiB"


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
            "precision (norms, modulation, patch embedding, heads, biases, the embedders the family keeps); weight-only: "
            "matmuls run in the compute dtype")


def _describe_size(s: Sizing) -> str:
    if not s.groups:
        return f"{_fmt_bytes(s.total)} of parameters (no stacked blocks)"
    parts = " + ".join(f"{g} {n}" for g, (n, _) in s.groups.items())
    detail = f": {parts}" if len(s.groups) > 1 else ""
    return f"{_fmt_bytes(s.total)} of parameters ({s.blocks} stacked blocks{detail}, {_fmt_bytes(s.block_bytes)} in blocks)"


def _chunk_text(chunk: Any) -> str:
    if isinstance(chunk, Mapping):
        return "{" + ", ".join(f"{g}: {n}" for g, n in chunk.items()) + "}"
    return str(chunk)


def _activations(cfg: RunConfig, build: Any, abstract_state: Any, mesh_plan: Any, batch: int,
                 tokens: int | None) -> tuple[str, int]:
    """The ``activations:`` line and its bytes: one block's live intermediates per device (:mod:`.activations`)."""
    from vidax_core.runner.activations import block_activation_bytes, block_widths

    if tokens is None:
        return "not estimated (no video token count without the latent grid and patch size)", 0
    widths = block_widths(abstract_state, (build.block_counts or {}).keys())
    if widths is None:
        return "not estimated (the denoiser's parameters name no embed axis)", 0
    text = int(cfg.sampling.max_sequence_length or 0)
    n = block_activation_bytes(widths, batch=batch, tokens=tokens, text_tokens=text, dp=mesh_plan.dp,
                               tp=mesh_plan.tp, sp=mesh_plan.sp, compute_bytes=np.dtype(build.param_dtype).itemsize)
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


def _placement(cfg: RunConfig, spec: Any, ckpt: Any, sizes: list, streamed: tuple, resident: float, tp: int,
               activation_bytes: int, peak: Any, flat: dict, compute_dtype: Any) -> list[str]:
    """The ``placement:`` block (:mod:`vidax_core.runner.memory_plan`): where the text encoder, the denoiser and
    the VAE live, the per-device peak against the device's memory, and the host memory the run holds."""
    from vidax_core.runner import memory_plan as mp

    plan = mp.Placement(budget=mp.device_budget(peak))
    cpu = jax.default_backend() == "cpu" and peak is None  # the devices are this host's memory
    enc, enc_dtype = mp.encoder_bytes(ckpt, spec, cfg, cpu=cpu), mp.encoder_dtype(spec, cfg)
    if cpu and enc_dtype != "float32":
        enc_dtype += " + the float32 copy XLA:CPU makes of its weights"
    where = mp.encoder_placement(cfg, ckpt, mp.vae_bytes(ckpt, cfg) or 0, peak, spec)  # `vidax run`: VAE first
    if enc is None:
        plan.add("text encoder", "not sized", note="its weights are not at hand", phase="encode")
    elif where.where == "cpu":
        plan.add("text encoder", "host CPU, then freed", host=enc,
                 note=f"at {enc_dtype}; runtime.encode_on: {where.reason}", phase="encode")
    else:
        plan.add("text encoder", "device, then freed", enc, note=f"at {enc_dtype}, before the denoiser is placed",
                 phase="encode")
    streamed_bytes = sum(s.groups[g][1] for s in sizes for g in streamed if g in s.groups)
    dev = int(resident / tp)
    if cpu and streamed:  # the CPU uses its chunks in place (host) or memory-mapped (disk): no copies in flight
        dev = int((sum(s.total for s in sizes) - streamed_bytes) / tp)
    if cfg.offload.enabled and streamed:
        if cfg.offload.storage == "disk":
            from vidax_core.parallel.disk_chunks import cache_root

            plan.add("denoiser", "device + disk cache", dev, note=f"{_fmt_bytes(streamed_bytes)} of blocks read through "
                     f"the page cache from {cache_root()}")
        else:
            plan.add("denoiser", "device + pinned host", dev, streamed_bytes,
                     note="the streamed blocks once in host memory")
    else:
        plan.add("denoiser", "device", dev)
    plan.add("activations", "device", activation_bytes, note="one block, estimate")
    if cpu and (dequant := _dequantised_block_bytes(flat, sizes[0].groups, compute_dtype)):
        plan.add("8-bit kernels", "device", dequant, note="one block's, converted to the compute dtype for its matmuls "
                 "(XLA:CPU materialises a dot's operands; an accelerator fuses the conversion)")
    vae = mp.vae_bytes(ckpt, cfg)
    if vae:
        plan.add("vae", "device", vae, note="at float32, built before the prompts encode", phase="both")
    if cpu:
        plan.rows = [(p, w.replace("device", "cpu device"), d, h + d, n, ph) for p, w, d, h, n, ph in plan.rows]
    return plan.lines(_fmt_bytes)


def target_device(cfg: RunConfig, device: str | None) -> tuple[RunConfig, Any, str]:
    """(the run as it would be on the target device, its peak-table entry or None, a label).

    ``device`` names an entry of :data:`vidax_core.runner.throughput.PEAKS` (``--device h200``); None = the
    device this process would run on. Weights are then sized at that device's dtype policy (bf16 on GPU/TPU)
    unless ``model.dtype`` is set: a dry run on a CPU laptop for an H200 sizes what the H200 would hold."""
    from vidax_core.runner import throughput

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
    from vidax_core.runner import throughput
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



def describe_plan(cfg: RunConfig, plugins: Plugins, device: str | None = None) -> str:
    """What ``vidax run`` would do with ``cfg``: the call's plan from the planner a real call runs
    (:mod:`.plan`, the same lines it logs), then the sizing of its weights, activations and compute."""
    cfg, peak, label = target_device(cfg, device)
    from vidax_core.runner.denoiser import build_dit
    from vidax_core.runner.plan import Planner, expected_batch, plan_lines, video_tokens
    from vidax_core.runner.stages import frame_stages

    spec = plugins.registry.get(cfg.model.id)
    preflight(cfg, spec, plugins, check_outputs=False)
    ckpt = checkpoint_for_run(cfg, spec, plugins, configs_only=True)
    if cfg.sampling.num_frames is None:
        raise UserError(f"--dry-run needs sampling.num_frames: {spec.id} predicts the frame count from the encoded "
                        "prompt, which a dry run does not load; set sampling.num_frames=...")
    builds = build_dit(spec, ckpt, cfg, plugins)
    from vidax_core import lora

    adapters = lora.prepare(cfg, spec, ckpt, builds, plugins, weights_optional=True).summaries
    plan = Planner(spec, ckpt, plugins, builds).plan(cfg)
    sized = max(range(len(plan.passes)), key=lambda k: np.prod(plan.grids[k]) if plan.grids[k] else 0)
    latent, placements = plan.grids[sized], plan.placements[sized]  # the largest pass is sized below
    batch = expected_batch(plan.guides[sized])
    if latent is not None:
        n = video_tokens(builds[0], latent)
        pt, ph, pw = builds[0].patch_size or (1, 1, 1)
        tokens = (f"{n} video tokens (latent {'x'.join(map(str, latent))}, patch {pt}x{ph}x{pw})" if n is not None
                  else "not checked (the denoiser declares no patch size)")
    else:  # no latent grid without the VAE's weights: every rule but sp | tokens is still checked, by the same code
        tokens = f"not checked (the plugin of {spec.id} gives no latent shape without loading its VAE)"
    mesh_plan, streamed = placements[0].plan, placements[0].offload_groups
    abstracts = [abstract_model(b.ctor) for b in builds]
    sizes = [size_denoiser(a[2], b.block_counts) for a, b in zip(abstracts, builds)]
    activations, activation_bytes = _activations(cfg, builds[0], abstracts[0][1], mesh_plan, batch,
                                                 video_tokens(builds[0], latent) if latent is not None else None)
    tp = cfg.parallel.tp
    chunk = cfg.offload.chunk_size
    if cfg.offload.enabled and streamed:
        resident = sum(s.resident(streamed, chunk) for s in sizes)
        how = f"offload: non-block params + 2 chunks of {_chunk_text(chunk)} block(s) of each streamed group"
    else:
        resident = sum(s.total for s in sizes)
        how = "all weights resident"
    if len(builds) > 1:
        how += f"; all {len(builds)} experts stay loaded"
    files = [c + "/" for c in ("transformer", "transformer_2", "vae", "text_encoder", "tokenizer", "scheduler",
                                "latent_upsampler")
             if ckpt.has(c)]
    if len(builds) == 1:
        denoiser = [f"denoiser:   {_describe_size(sizes[0])}"]
    else:
        denoiser = [f"denoiser:   {len(builds)} experts switched by timestep, "
                    f"{_fmt_bytes(sum(s.total for s in sizes))} of parameters in all"]
        denoiser += [f"  {b.component}: {_describe_size(s)}" for b, s in zip(builds, sizes)]
    lines = [
        f"model:      {spec.id} ({spec.family}, plugin {spec.plugin} {spec.version})",
        f"checkpoint: {ckpt.source} -> {ckpt.root}",
        f"files:      {', '.join(files) or 'none found'}",
        f"video:      {cfg.sampling.num_frames} frames at {cfg.sampling.width}x{cfg.sampling.height}, "
        f"{cfg.sampling.num_steps} steps, guidance {cfg.sampling.guidance_scale}",
        *plan_lines(plan),
        *[f"then:       {st.name or 'stage'}: {st.model} over the decoded frames (its own --dry-run sizes it)"
          for st in frame_stages(spec, ckpt, cfg, plugins)],
        f"tokens:     {tokens}" + (" (the largest pass)" if len(plan.passes) > 1 else ""),
        f"target:     {label}; weights {np.dtype(builds[0].param_dtype).name}"
        + (" (the device's policy)" if device and cfg.model.dtype == getattr(peak, "policy", None) else ""),
        f"attention:  {cfg.attention.backend}",
        f"offload:    {'on, chunk ' + _chunk_text(chunk) + ' (' + ', '.join(streamed) + ')' if cfg.offload.enabled else 'off'}",
        *denoiser,
        *([f"8-bit:      {q}"] if (q := describe_8bit(abstracts[0][2], sizes[0].groups)) else []),
        *([f"lora:       {s.line()}" for s in adapters] + ([_LORA_MODE[cfg.lora_mode]] if adapters else [])),
        f"per device: ~{_fmt_bytes(resident / tp)} of DiT weights ({how}; tensor parallel divides by tp={tp})",
        f"activations: {activations}",
        *_placement(cfg, spec, ckpt, sizes, streamed if cfg.offload.enabled else (), resident, tp, activation_bytes,
                    peak, abstracts[0][2], builds[0].param_dtype),
        f"compute:    {_compute_line(cfg, builds, plugins, spec, ckpt, latent, peak, label, mesh_plan.size)}",
        f"output:     {os.path.abspath(cfg.output.path) if cfg.output.path else 'none'}",
        "",
        "resolved config:",
        to_yaml(cfg),
    ]
    return "\n".join(lines)
