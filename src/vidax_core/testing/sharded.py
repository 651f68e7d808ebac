"""A model's live weights on a device mesh as a plugin's shard rules place them, and a function run with that mesh
in effect: the two steps of every multi-device parity script (run it on fake CPU devices with
:mod:`vidax_core.testing.devices`). Imports JAX and flax: use it inside the subprocess, not at collection time."""

from __future__ import annotations

from typing import Any, Callable

import jax
from flax import nnx

from vidax_core.parallel import sharding


def place_state(state: nnx.State, abstract: nnx.State, rules: Any, mesh: Any) -> tuple[nnx.State, dict]:
    """``state`` with every parameter put on ``mesh`` by its logical axes (read off ``abstract``, the
    ``eval_shape`` state of the same model) under ``rules``; returns the placed state and path -> PartitionSpec."""
    specs = sharding.param_specs(abstract, rules, mesh)
    placed = nnx.from_flat_state([
        (tuple(p), v.replace(jax.device_put(v.get_value(), jax.sharding.NamedSharding(mesh, specs[tuple(p)]))))
        for p, v in nnx.to_flat_state(state)])
    return placed, specs


def under_mesh(fn: Callable, mesh: Any, rules: Any) -> Callable:
    """``fn`` run with ``mesh`` and ``rules`` active, so the model's logical-axis constraints take effect (jit it)."""

    def run(*args: Any, **kwargs: Any) -> Any:
        with sharding.activate(mesh, rules):
            return fn(*args, **kwargs)

    return run
