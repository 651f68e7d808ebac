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
