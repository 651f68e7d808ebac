"""Small glue between Flax NNX modules and host-side parameter dictionaries.

Models are built abstractly with ``nnx.eval_shape`` (no memory), their parameters are listed as a flat
``path -> ShapeDtypeStruct`` map for :func:`vidax_core.io.convert.convert`, and the converted host arrays are put
back with :func:`materialize`. Keeping this in one place means no plugin touches NNX state internals.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import jax
import numpy as np
from flax import nnx

Path = tuple[Any, ...]


def leaf_value(v: Any) -> Any:
    """An NNX state leaf's array (or ShapeDtypeStruct): a Variable's value without the deprecated ``.value``."""
    return v.get_value() if hasattr(v, "get_value") else v


def abstract_model(ctor: Callable[[], nnx.Module]) -> tuple[nnx.GraphDef, nnx.State, dict[Path, Any]]:
    """Build ``ctor()`` shape-only; return (graphdef, abstract state, flat path -> ShapeDtypeStruct)."""
    model = nnx.eval_shape(ctor)
    graphdef, state = nnx.split(model)
    flat = {tuple(path): leaf_value(v) for path, v in nnx.to_flat_state(state)}
    return graphdef, state, flat


def flat_state(model_or_state: Any) -> dict[Path, Any]:
    """Flat path -> array map of a module's (or a state's) variables."""
    state = model_or_state if isinstance(model_or_state, nnx.State) else nnx.state(model_or_state)
    return {tuple(path): leaf_value(v) for path, v in nnx.to_flat_state(state)}


def materialize(
    graphdef: nnx.GraphDef,
    abstract_state: nnx.State,
    values: Mapping[Path, Any],
    *,
    put: Callable[[Path, np.ndarray], Any] | None = None,
) -> nnx.Module:
    """Merge host arrays into the abstract state and return a live module.

    ``put(path, value)`` places each value (default: :func:`vidax_core.parallel.sharding.put` onto the default
    device), so sharded placement can be plugged in; a value may be a lazy checkpoint leaf
    (:class:`vidax_core.io.lazy.LazyLeaf`), read as it is placed.
    """
    from vidax_core.io.lazy import checking_only

    if checking_only():
        put = lambda _p, a: jax.ShapeDtypeStruct(tuple(a.shape), a.dtype)  # noqa: E731
    elif put is None:
        from vidax_core.parallel.sharding import put as put_one

        put = lambda _p, a: put_one(a, None)  # noqa: E731
    flat = nnx.to_flat_state(abstract_state)
    new = []
    for path, var in flat:
        path = tuple(path)
        if path not in values:
            raise KeyError(f"no value for parameter {'/'.join(map(str, path))}")
        new.append((path, var.replace(put(path, values[path]))))
    state = nnx.from_flat_state(new)
    return nnx.merge(graphdef, state)
