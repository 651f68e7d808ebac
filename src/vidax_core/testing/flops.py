"""The test side of :mod:`vidax_core.flops`: XLA's own FLOP count of a compiled denoiser call on CPU.

XLA's cost analysis counts a while loop's body once, whatever its trip count, so the checks use denoisers with
ONE block per stacked group (``lax.scan`` of length 1) and attention as one einsum (the CPU ``xla`` backend loops
over heads with ``lax.map``, which would hide all heads but one). A multiply-add counts as 2 FLOPs on both sides.

With one block, XLA also drops what only the (unused) text stream of the last block needs, which the real
``lax.scan`` over many blocks computes; :func:`staged_call` keeps every stream of the staged forward live.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
from flax import nnx


def staged_call(model: Any, *args: Any, **kwargs: Any) -> Any:
    """The staged forward (``pre`` -> every block group -> ``post``) returning the prediction AND the carry after
    the last group, so that no stream of the last block is dead code."""
    x, aux = model.pre(*args, **kwargs)
    for name in model.block_groups:
        graphdef, state = nnx.split(getattr(model, name))
        x = model.run_block_group(name, graphdef, state, x, aux)
    return model.post(x, aux, args[0].shape), x


def xla_flops(model: Any, *args: Any, call: Callable[..., Any] | None = None, **kwargs: Any) -> float:
    """FLOPs XLA reports for ``call(model, *args, **kwargs)`` (default ``model(*args, **kwargs)``) jitted and
    compiled on the current backend."""
    from vidax_core import attention

    graphdef, state = nnx.split(model)
    run = call or (lambda m, *a, **kw: m(*a, **kw))

    def fn(state, *a):
        return run(nnx.merge(graphdef, state), *a, **kwargs)

    saved = attention.IMPLEMENTATIONS["xla"]
    attention.IMPLEMENTATIONS["xla"] = attention.einsum_attention
    try:
        with attention.use_backend("xla"):
            compiled = jax.jit(fn).lower(state, *args).compile()
    finally:
        attention.IMPLEMENTATIONS["xla"] = saved
    cost = compiled.cost_analysis()
    if isinstance(cost, (list, tuple)):
        cost = cost[0]
    return float(cost["flops"])


def check_flops(counted: float, model: Any, *args: Any, rel: float = 0.05, call: Callable[..., Any] | None = None,
                **kwargs: Any) -> float:
    """Assert that ``counted`` is within ``rel`` of XLA's count; returns counted / XLA (printed for the record)."""
    xla = xla_flops(model, *args, call=call, **kwargs)
    ratio = counted / xla
    print(f"flops: counted {counted:.4e}, XLA {xla:.4e}, counted/XLA {ratio:.4f}")
    assert abs(ratio - 1.0) <= rel, (counted, xla)
    return ratio
