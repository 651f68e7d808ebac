"""The other side of ``vidax bench --reference ENGINE``: the model's own plugin provides it.

The core knows no reference pipeline: the family that registered the model declares one (``diffusers_reference``
on its :class:`vidax_core.FamilyPlugin`) that builds a callable that runs the same checkpoint, dtype, shapes, steps
and guidance with ENGINE (e.g. diffusers) and returns the same metrics as the vidax side. A family without one is a
one-line user error, before any work.
"""

from __future__ import annotations

from typing import Any, Callable

from vidax_core.errors import UserError


def reference_runner(plugins: Any, spec: Any, engine: str, ckpt_dir: str, run: Any) -> Callable[[], dict[str, Any]]:
    """The plugin's reference run of ``run`` for ``spec``, or a :class:`UserError` saying there is none."""
    from vidax_core.family import diffusers_reference

    runner = diffusers_reference(plugins.family_object(spec), engine, ckpt_dir, run)
    if runner is None:
        who = f" ({spec.plugin})" if getattr(spec, "plugin", "") else ""
        raise UserError(f"--reference {engine}: the plugin of {spec.id}{who} provides no {engine} reference "
                        f"pipeline; run vidax bench without --reference")
    return runner


def run_reference(plugins: Any, spec: Any, engine: str, ckpt_dir: str, run: Any) -> dict[str, Any]:
    """Run the reference once and return its metrics (``engine`` recorded in them)."""
    metrics = dict(reference_runner(plugins, spec, engine, ckpt_dir, run)())
    metrics.setdefault("engine", engine)
    return metrics
