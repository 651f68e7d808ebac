"""A live module from checkpoint tensors through a key table, without a random initialisation.

The model is built shape-only (``eval_shape``), :func:`vidax_core.io.convert.convert` fills every parameter from the
tensors (collecting every missing, unexpected and mis-shaped key before it raises once), and the host arrays are
placed (``put``) and merged into the module.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np
from flax import nnx

from vidax_core.io.convert import KeyRule, convert
from vidax_core.nn.state import abstract_model, materialize


def load_model(make: Callable[[], nnx.Module], tensors: Mapping[str, Any], rules: Sequence[KeyRule], *,
               component: str, put: Callable[[tuple, np.ndarray], Any] | None = None,
               **convert_kw: Any) -> nnx.Module:
    """``make()`` filled from ``tensors`` (key -> array or zero-arg loader) by ``rules``; ``convert_kw`` goes to
    :func:`~vidax_core.io.convert.convert` (``ignore``, ``on_tensor``, ``dtype``)."""
    graphdef, abstract, flat = abstract_model(make)
    values = convert(tensors, rules, flat, component=component, **convert_kw)
    return materialize(graphdef, abstract, values, put=put)


def dit_loader(dit_cls: Callable[..., nnx.Module], rules: Sequence[KeyRule] | Callable[[Any], Sequence[KeyRule]], *,
               component: str, prepare: Callable[[Mapping[str, Any], Any], Mapping[str, Any]] | None = None,
               ignore: Sequence[str] = (), name: str = "load_dit") -> Callable:
    """A family's ``load_dit(cfg, tensors, *, put=None, on_tensor=None)`` for a denoiser built as
    ``dit_cls(cfg, rngs=nnx.Rngs(0))``: :func:`load_model` with the family's table (or ``rules(cfg)`` for a table
    that depends on the config) after ``prepare(tensors, cfg)`` (e.g. splitting a fused tensor)."""

    def load(cfg: Any, tensors: Mapping[str, Any], *, put: Callable[[tuple, np.ndarray], Any] | None = None,
             on_tensor: Callable[[str, int], None] | None = None) -> nnx.Module:
        table = rules(cfg) if callable(rules) else rules
        source = prepare(tensors, cfg) if prepare is not None else tensors
        return load_model(lambda: dit_cls(cfg, rngs=nnx.Rngs(0)), source, table, put=put, component=component,
                          ignore=list(ignore), on_tensor=on_tensor)

    load.__name__ = load.__qualname__ = name
    load.__doc__ = (f"Build a :class:`{dit_cls.__name__}` from diffusers-named tensors (arrays or zero-arg loaders) "
                    "without random init (:func:`vidax_core.io.load.dit_loader`).")
    return load
