"""A model's ``aux`` across the jitted stages of offload: array leaves traced, every other leaf static.

Under ``offload.enabled`` a denoiser runs as ``jit(pre)`` -> each block group -> ``jit(post)``, and the ``aux`` that
``pre`` returns crosses every one of those jit boundaries. A leaf that is not an array (a Python int such as a
token grid, a tuple of sizes, a string) would come back from ``jit(pre)`` as an array and reach the blocks as a
tracer, where ``reshape(b, f, h, w, c)`` with a traced ``f`` fails. Here such leaves stay what ``pre`` made them:

* :func:`split` / :func:`join`: an aux as (its array leaves, a hashable :class:`Static` holding the rest);
* :func:`jit_aux`: ``jax.jit`` of a stage that takes an aux, its non-array leaves a static argument (one compile
  per distinct value, as for any static argument);
* :class:`StaticOutputs`: ``jax.jit`` of a stage that returns an aux (``pre``): the non-array leaves it produced
  while tracing are kept per input signature (tree structure, shapes and dtypes) and put back into every output.

A non-array leaf must be hashable (ints, floats, strings, tuples of them); another one is refused with one line
naming it. Only numpy is imported at the top; JAX is imported when the functions run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np


def _is_array(x: Any) -> bool:
    import jax

    return isinstance(x, (jax.Array, np.ndarray, np.generic))


@dataclass(frozen=True)
class Static:
    """The non-array leaves of a pytree: its structure and ``(leaf index, value)`` of each (hashable)."""

    treedef: Any
    values: tuple[tuple[int, Any], ...]


def split(tree: Any) -> tuple[list, Static]:
    """``tree`` -> (its leaves with every non-array one replaced by None, the :class:`Static` of those)."""
    import jax

    leaves, treedef = jax.tree.flatten(tree)
    values = []
    for i, leaf in enumerate(leaves):
        if _is_array(leaf):
            continue
        try:
            hash(leaf)
        except TypeError:
            path = jax.tree_util.keystr(jax.tree_util.tree_flatten_with_path(tree)[0][i][0])
            raise TypeError(f"the denoiser's aux{path} is a {type(leaf).__name__}, neither an array nor a hashable "
                            "constant: return arrays, or ints / floats / strings / tuples, from pre") from None
        values.append((i, leaf))
    kept = dict(values)
    return [None if i in kept else leaf for i, leaf in enumerate(leaves)], Static(treedef, tuple(values))


def join(arrays: list, static: Static) -> Any:
    """The inverse of :func:`split`."""
    import jax

    leaves = list(arrays)
    for i, value in static.values:
        leaves[i] = value
    return jax.tree.unflatten(static.treedef, leaves)


def jit_aux(fn: Callable[..., Any], aux_argnum: int, **jit_kwargs: Any) -> Callable[..., Any]:
    """``jax.jit(fn, **jit_kwargs)`` where positional argument ``aux_argnum`` is an aux (or a list of them): its
    array leaves are traced, the others passed as a static argument. Called with the same arguments as ``fn``."""
    import jax

    def inner(*args, static_aux):
        args = list(args)
        args[aux_argnum] = join(args[aux_argnum], static_aux)
        return fn(*args)

    jitted = jax.jit(inner, static_argnames=("static_aux",), **jit_kwargs)

    def call(*args):
        args = list(args)
        args[aux_argnum], static = split(args[aux_argnum])
        return jitted(*args, static_aux=static)

    return call


class StaticOutputs:
    """``jax.jit(fn)`` for a ``fn`` whose output may hold non-array leaves, kept as ``fn`` made them while tracing.

    They may depend on the input shapes only (a token grid from the latents' shape), so they are recorded per
    signature of the arguments from ``key_from`` on (tree structure, shapes, dtypes; earlier arguments, such as
    the weights, are the same for every call). Tracing happens inside the call that needs it, so the signature
    of that call is the one a trace records under."""

    def __init__(self, fn: Callable[..., Any], *, key_from: int = 0, **jit_kwargs: Any) -> None:
        import jax

        self._static: dict[Any, Static] = {}
        self._key_from = key_from
        self._tracing_key: Any = None

        def traced(*args):
            arrays, static = split(fn(*args))
            self._static[self._tracing_key] = static
            return arrays

        self._jitted = jax.jit(traced, **jit_kwargs)

    def _key(self, args: tuple) -> Any:
        import jax

        leaves, treedef = jax.tree.flatten(args[self._key_from:])
        return treedef, tuple((tuple(np.shape(a)), str(getattr(a, "dtype", type(a).__name__))) for a in leaves)

    def __call__(self, *args: Any) -> Any:
        self._tracing_key = key = self._key(args)
        arrays = self._jitted(*args)
        return join(arrays, self._static[key])


__all__ = ["Static", "StaticOutputs", "jit_aux", "join", "split"]
