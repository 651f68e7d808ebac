"""``vidax run --dry-run``: validate the config and describe what a run would do, without loading weights.

Only the checkpoint's small JSON files are read (for a hub repo only those are fetched); the denoiser is built
shape-only with ``nnx.eval_shape``, which gives exact parameter bytes without allocating them.
"""

from __future__ import annotations

import os

import jax
import numpy as np

from vidax_core.io.checkpoint import checkpoint_for_run
from vidax_core.config import RunConfig, to_yaml
from vidax_core.parallel.mesh import plan_mesh
from vidax_core.nn.state import abstract_model
from vidax_core.plugins import Plugins
from vidax_core.runner.preflight import preflight


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024.0
    return f"{n:.1f} TiB"


def param_bytes(flat: dict) -> tuple[int, int, int]:
    """(total, in stacked block groups, number of stacked layers) of an abstract parameter tree."""
    total = block = 0
    layers = 0
    for path, leaf in flat.items():
        n = int(np.prod(leaf.shape)) * np.dtype(leaf.dtype).itemsize
        total += n
        if str(path[0]).endswith("blocks"):
            block += n
            layers = max(layers, int(leaf.shape[0]) if leaf.shape else 0)
    return total, block, layers


def describe_plan(cfg: RunConfig, plugins: Plugins) -> str:
    spec = plugins.registry.get(cfg.model.id)
    preflight(cfg, spec, plugins, check_outputs=False)
    ckpt = checkpoint_for_run(cfg, spec, plugins, configs_only=True)
    build = plugins.call("build_dit", spec, ckpt=ckpt, run=cfg)
    _, _, flat = abstract_model(build.ctor)
    groups = plugins.call("offload_block_groups", spec, model=None) or ()
    counts = {g: n for g, n in (build.block_counts or {}).items() if g in groups}
    mesh_plan = plan_mesh(cfg.parallel, n_devices=jax.device_count(), heads=build.heads, video_tokens=None,
                          batch=2 if cfg.sampling.guidance_scale > 1.0 else 1, block_groups=counts,
                          offload=cfg.offload)
    total, block, layers = param_bytes(flat)
    p = cfg.parallel
    tp = p.tp
    if cfg.offload.enabled and layers:
        per_layer = block / layers
        resident = (total - block) + 2 * cfg.offload.chunk_size * per_layer
        how = f"offload: non-block params + 2 chunks of {cfg.offload.chunk_size} block(s)"
    else:
        resident = total
        how = "all weights resident"
    files = []
    for comp in ("transformer", "vae", "text_encoder", "tokenizer", "scheduler"):
        if ckpt.has(comp):
            files.append(comp + "/")
    lines = [
        f"model:      {spec.id} ({spec.family}, plugin {spec.plugin} {spec.version})",
        f"checkpoint: {ckpt.source} -> {ckpt.root}",
        f"files:      {', '.join(files) or 'none found'}",
        f"video:      {cfg.sampling.num_frames} frames at {cfg.sampling.width}x{cfg.sampling.height}, "
        f"{cfg.sampling.num_steps} steps, guidance {cfg.sampling.guidance_scale}",
        f"mesh:       dp={mesh_plan.dp} tp={mesh_plan.tp} sp={mesh_plan.sp} over {jax.device_count()} "
        f"{jax.default_backend()} device(s); attention {cfg.attention.backend}",
        f"offload:    {'on, chunk ' + str(cfg.offload.chunk_size) if cfg.offload.enabled else 'off'}",
        f"denoiser:   {_fmt_bytes(total)} of parameters ({layers} stacked blocks, {_fmt_bytes(block)} in blocks)",
        f"per device: ~{_fmt_bytes(resident / tp)} of DiT weights ({how}; tensor parallel divides by tp={tp})",
        f"output:     {os.path.abspath(cfg.output.path) if cfg.output.path else 'none'}",
        "",
        "resolved config:",
        to_yaml(cfg),
    ]
    return "\n".join(lines)
