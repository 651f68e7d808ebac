"""``vidax run --dry-run``: validate the config and describe what a run would do, without loading weights."""

from __future__ import annotations

from .config import RunConfig, to_yaml
from .plugins import Plugins
from .preflight import preflight


def describe_plan(cfg: RunConfig, plugins: Plugins) -> str:
    spec = plugins.registry.get(cfg.model.id)
    preflight(cfg, spec, plugins, check_outputs=False)
    lines = [
        f"model:      {spec.id} ({spec.family}, plugin {spec.plugin} {spec.version})",
        f"checkpoint: {cfg.model.checkpoint}",
        f"video:      {cfg.sampling.num_frames} frames at {cfg.sampling.width}x{cfg.sampling.height}, "
        f"{cfg.sampling.num_steps} steps, guidance {cfg.sampling.guidance_scale}",
        f"parallel:   dp={cfg.parallel.dp or 'auto'} tp={cfg.parallel.tp} sp={cfg.parallel.sp}; "
        f"attention {cfg.attention.backend}; offload {'on, chunk ' + str(cfg.offload.chunk_size) if cfg.offload.enabled else 'off'}",
        f"output:     {cfg.output.path}",
        "",
        "resolved config:",
        to_yaml(cfg),
    ]
    return "\n".join(lines)
