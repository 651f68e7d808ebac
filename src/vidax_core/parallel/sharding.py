"""Logical axis names -> mesh PartitionSpecs, the active sharding context, and host -> device staging.

Parameters and activations carry logical axis names (``embed``, ``heads``, ``mlp``, ``layers``, ``batch``, ``seq``
...). A family's ``shard_rules`` hook maps them onto the mesh axes of :mod:`vidax_core.parallel.mesh`;
names without a rule
are replicated. The pipeline activates ``(mesh, rules)`` while tracing the model, and model code calls
:func:`constrain` (a no-op without an active multi-device mesh) to pin activation layouts.

Tensor parallelism is plain GSPMD on top of these layouts: a column-parallel kernel (``embed, heads``) leaves its
output sharded on ``heads``; the row-parallel kernel after it (``heads, embed``) contracts over the sharded axis,
XLA inserts one all-reduce and the (replicated) bias is added to the reduced sum, i.e. exactly once. Reductions
over a sharded width (Wan's q/k RMS norm over all heads) become a partial sum plus an all-reduce, so they stay
exact.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

# Activation names every model may use; they map onto the mesh the same way for all families.
DEFAULT_RULES: tuple[tuple[str, Any], ...] = (
    ("batch", "dp"),
    ("seq", "sp"),
    ("heads", "tp"),
    ("mlp", "tp"),
    ("embed", None),
    ("layers", None),
)

Rules = Mapping[str, Any]

# Prompt encoders run before the denoiser, tensor-parallel only: heads and MLP width over tp, everything else
# (batch of prompts, text tokens) replicated.
ENCODER_RULES: tuple[tuple[str, Any], ...] = (
    ("batch", None),
    ("seq", None),
    ("heads", "tp"),
    ("kv_heads", "tp"),
    ("mlp", "tp"),
    ("embed", None),
    ("vocab", None),
    ("layers", None),
)


def make_rules(plugin_rules: Sequence[tuple[str, Any]] | None) -> dict[str, Any]:
    """The plugin's rules layered over :data:`DEFAULT_RULES` (the plugin wins on a name)."""
    rules = dict(DEFAULT_RULES)
    if plugin_rules is not None:
        rules.update(dict(plugin_rules))
    return rules


def logical_to_spec(names: Sequence[str | None] | None, rules: Rules, mesh: Mesh | None = None) -> P:
    """PartitionSpec for an array whose axes are named ``names``; a mesh axis is used at most once, and mesh axes
    of size 1 are dropped (so the spec shows what is really split)."""
    if names is None:
        return P()
    used: set[str] = set()
    out = []
    for n in names:
        axis = rules.get(n) if n is not None else None
        axes = (axis,) if isinstance(axis, str) else tuple(axis or ())
        keep = tuple(a for a in axes if a not in used and (mesh is None or mesh.shape[a] > 1))
        used.update(keep)
        out.append(None if not keep else keep[0] if len(keep) == 1 else keep)
    while out and out[-1] is None:
        out.pop()
    return P(*out)


def param_names(abstract_state) -> dict[tuple, tuple | None]:
    """Flat path -> logical axis names of every parameter (``out_sharding`` metadata of the NNX variables)."""
    from flax import nnx

    names = {}
    for path, var in nnx.to_flat_state(abstract_state):
        meta = var.get_metadata() if hasattr(var, "get_metadata") else {}
        names[tuple(path)] = meta.get("out_sharding") or meta.get("sharding_names")
    return names


def param_placer(abstract_state, mesh: Mesh, rules: Rules):
    """``put(path, host_array)`` that places each parameter of ``abstract_state`` on ``mesh`` by its logical axes
    (one sharded transfer per array), for loaders that take a ``put`` (``materialize``)."""
    specs = param_specs(abstract_state, rules, mesh)
    return lambda path, array: put(array, NamedSharding(mesh, specs.get(tuple(path), P())))


def param_specs(abstract_state, rules: Rules, mesh: Mesh | None = None) -> dict[tuple, P]:
    return {p: logical_to_spec(n, rules, mesh) for p, n in param_names(abstract_state).items()}


def spec_table(specs: Mapping[tuple, P]) -> dict[str, list]:
    """JSON-friendly golden table: 'a/b/c' -> list of per-axis mesh axes (None = replicated)."""
    return {"/".join(map(str, p)): [list(a) if isinstance(a, tuple) else a for a in s]
            for p, s in sorted(specs.items(), key=lambda kv: "/".join(map(str, kv[0])))}


# ---------------------------------------------------------------------------------------------------------------
# Active context
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShardingContext:
    mesh: Mesh
    rules: Rules

    def spec(self, names: Sequence[str | None]) -> P:
        return logical_to_spec(names, self.rules, self.mesh)

    def sharding(self, names: Sequence[str | None]) -> NamedSharding:
        return NamedSharding(self.mesh, self.spec(names))

    def axis(self, name: str) -> str | None:
        """The mesh axis the logical name maps to, None if unmapped or of size 1."""
        a = self.rules.get(name)
        if isinstance(a, (tuple, list)):
            a = a[0] if len(a) == 1 else None
        return a if a is not None and self.mesh.shape[a] > 1 else None

    def size(self, name: str) -> int:
        a = self.axis(name)
        return self.mesh.shape[a] if a else 1


_local = threading.local()


def active() -> ShardingContext | None:
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


@contextlib.contextmanager
def activate(mesh: Mesh | None, rules: Rules | None = None) -> Iterator[ShardingContext | None]:
    """Make ``(mesh, rules)`` the context that :func:`constrain` and the sequence-parallel attention read while
    the model is traced. ``mesh=None`` (or a 1-device mesh) deactivates sharding inside the block."""
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    ctx = ShardingContext(mesh, dict(rules or DEFAULT_RULES)) if mesh is not None and mesh.size > 1 else None
    stack.append(ctx)
    try:
        yield ctx
    finally:
        stack.pop()


def constrain(x: jax.Array, names: Sequence[str | None]) -> jax.Array:
    """``with_sharding_constraint`` by logical names under the active context; identity without one."""
    ctx = active()
    if ctx is None:
        return x
    return jax.lax.with_sharding_constraint(x, ctx.sharding(names))


# ---------------------------------------------------------------------------------------------------------------
# Host -> device staging
# ---------------------------------------------------------------------------------------------------------------


def put(array: np.ndarray, sharding: NamedSharding | None) -> jax.Array:
    """One sharded transfer of a host (numpy) array. Under ``jax.distributed`` each process supplies only the shards
    of its own devices (every process holds the full host array). A lazy checkpoint value
    (:class:`vidax_core.io.lazy.LazyLeaf`) is read and placed a piece at a time (:mod:`vidax_core.parallel.place`)."""
    from vidax_core.io.lazy import LazyLeaf

    if isinstance(array, LazyLeaf):
        from vidax_core.parallel.place import place

        return place(array, sharding)
    from vidax_core.quant.cpu_bits import held

    array = held(array, sharding)  # float8 on the CPU backend: its uint8 bits
    if sharding is None:
        return jax.device_put(array)
    if jax.process_count() > 1:
        return jax.make_array_from_callback(array.shape, sharding, lambda idx: np.asarray(array[idx]))
    return jax.device_put(array, sharding)


def put_value(value: Any, sharding: NamedSharding | None) -> jax.Array:
    """A step input onto the devices: an array already on a device moves device to device (no round trip through
    the host, and on the CPU backend no host view that keeps the source alive until its transfer completes); a
    host array or a Python number is transferred once (:func:`put`)."""
    if isinstance(value, jax.Array) and jax.process_count() == 1:
        return jax.device_put(value, sharding)
    return put(np.asarray(value), sharding)


def device_bytes(arrays: Any) -> dict[Any, int]:
    """Bytes each device holds for the jax arrays in the pytree ``arrays`` (deleted arrays count 0)."""
    out: dict[Any, int] = {}
    for a in jax.tree.leaves(arrays):
        if not isinstance(a, jax.Array) or a.is_deleted():
            continue
        for s in a.addressable_shards:
            out[s.device] = out.get(s.device, 0) + s.data.nbytes
    return out


def per_device_bytes(arrays: Any) -> int:
    """Largest per-device byte count of ``arrays`` (shapes from shardings; no device access)."""
    total = 0
    for a in jax.tree.leaves(arrays):
        if isinstance(a, jax.Array):
            shape = a.sharding.shard_shape(a.shape)
            total += int(np.prod(shape, dtype=np.int64)) * a.dtype.itemsize
        elif isinstance(a, np.ndarray):
            total += a.nbytes
    return total
