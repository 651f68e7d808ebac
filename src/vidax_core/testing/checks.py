"""Checks every family needs, as plain functions (used by :class:`vidax_core.testing.family.FamilyTests`)."""

from __future__ import annotations

import json
import os
from typing import Any, Sequence

import numpy as np

from vidax_core.testing.parity import fp32_tolerance  # noqa: F401 - kept importable from here


def resolve(plugins: Any, overrides: Sequence[str]):
    from vidax_core import config as config_mod

    return config_mod.resolve(None, list(overrides), plugins.preset_for)


def converted_tree_problems(plugins: Any, overrides: Sequence[str]) -> list[str]:
    """Convert the run's checkpoint onto each denoiser's abstract tree; list every path whose key set, shape or
    dtype differs from the model built shape-only (empty when the checkpoint fills the model exactly)."""
    from vidax_core.io.run_checkpoint import checkpoint_for_run
    from vidax_core.nn.state import abstract_model
    from vidax_core.runner.denoiser import build_dit

    cfg = resolve(plugins, overrides)
    spec = plugins.registry.get(cfg.model.id)
    ckpt = checkpoint_for_run(cfg, spec, plugins)
    problems = []
    for build in build_dit(spec, ckpt, cfg, plugins):
        _, _, flat = abstract_model(build.ctor)
        values = plugins.call("convert_checkpoint", spec, component=build.component,
                              tensors=ckpt.tensors(build.component), abstract=flat,
                              config=ckpt.config(build.component))
        for path in sorted(set(flat) | set(values), key=str):
            where = f"{build.component}: {'/'.join(map(str, path))}"
            if path not in values:
                problems.append(f"{where} missing from the conversion")
            elif path not in flat:
                problems.append(f"{where} is not a parameter of the model")
            else:
                got, want = np.asarray(values[path]), flat[path]
                if tuple(got.shape) != tuple(want.shape):
                    problems.append(f"{where} has shape {got.shape}, the model {tuple(want.shape)}")
                elif not np.can_cast(got.dtype, want.dtype, "same_kind"):
                    problems.append(f"{where} has dtype {got.dtype}, the model {want.dtype}")
    return problems


def sharding_table(plugins: Any, overrides: Sequence[str]) -> dict[str, list]:
    """Parameter path -> PartitionSpec (as lists) of the first denoiser under the plugin's ``shard_rules``."""
    from flax import nnx

    from vidax_core.io.run_checkpoint import checkpoint_for_run
    from vidax_core.parallel import sharding
    from vidax_core.runner.denoiser import build_dit

    cfg = resolve(plugins, overrides)
    spec = plugins.registry.get(cfg.model.id)
    build = build_dit(spec, checkpoint_for_run(cfg, spec, plugins, configs_only=True), cfg, plugins)[0]
    _, abstract = nnx.split(nnx.eval_shape(build.ctor))
    rules = sharding.make_rules(plugins.call("shard_rules", spec))
    return sharding.spec_table(sharding.param_specs(abstract, rules))


def logical_axes(ctor) -> tuple[dict, dict]:
    """The ``eval_shape`` tree of ``ctor()`` as the shard rules see it: path -> logical axis names of every
    parameter, and path -> shape-only leaf."""
    from vidax_core.nn.state import abstract_model
    from vidax_core.parallel.sharding import param_names

    _, state, flat = abstract_model(ctor)
    return param_names(state), flat


def check_golden(table: dict, path: str) -> None:
    """Compare ``table`` with the JSON at ``path``; ``VIDAX_UPDATE_GOLDEN=1`` rewrites it (after an intended change)."""
    if os.environ.get("VIDAX_UPDATE_GOLDEN") or not os.path.exists(path):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        lines = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in sorted(table.items())]
        with open(path, "w") as f:
            f.write("{\n" + ",\n".join(lines) + "\n}\n")
    with open(path) as f:
        want = json.load(f)
    diff = sorted(k for k in set(want) | set(table) if want.get(k) != table.get(k))
    assert not diff, f"sharding differs from {path} at {diff[:10]} (VIDAX_UPDATE_GOLDEN=1 after an intended change)"
