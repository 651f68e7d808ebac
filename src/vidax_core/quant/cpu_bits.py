"""float8_e4m3fn weights on the CPU backend are held as their uint8 bits.

XLA:CPU has no float8 arithmetic: it upcasts a float8 array wherever an op other than a convert reads it, and the
scan over stacked blocks slices its weights with a dynamic slice, so a float8 stack became one 16-bit copy of the
whole stack per call (an offloaded Wan-14B chunk of two blocks: about 2 GiB more host memory during a step; a
resident model: its whole block stack). Held as uint8 the slice is one layer's bytes, and the 8-bit Linear
(:class:`vidax_core.nn.layers.Linear`) bitcasts them back to float8 and converts one layer's kernel for its matmul,
as it does int8 (``benchmarks/quant_memory_analysis.py``: the fp8 program's temporaries fall from blocks + 1 of
one block's bf16 kernels to 1.02, the int8 figure). The bits are the same bytes: nothing is copied on the host
(a numpy view), and accelerators keep float8 as is.
"""

from __future__ import annotations

from typing import Any

import jax
import ml_dtypes
import numpy as np

FLOAT8 = np.dtype(ml_dtypes.float8_e4m3fn)
BITS = np.dtype(np.uint8)


def platform(sharding: Any) -> str:
    """The platform of ``sharding``'s devices (None: where an uncommitted array goes, the ``jax.default_device`` a
    caller set, as an encoder computing on the host CPU beside an accelerator does, else JAX's default backend)."""
    if sharding is None:
        chosen = jax.config.jax_default_device
        if chosen is not None:
            return chosen if isinstance(chosen, str) else chosen.platform
        return jax.default_backend()
    return next(iter(sharding.device_set)).platform


def held_dtype(dtype: Any, sharding: Any) -> np.dtype:
    """The dtype the devices of ``sharding`` hold an array of ``dtype`` in."""
    dtype = np.dtype(dtype)
    return BITS if dtype == FLOAT8 and platform(sharding) == "cpu" else dtype


def held_shapes(tree: Any, sharding: Any = None) -> Any:
    """``jax.ShapeDtypeStruct`` leaves of ``tree`` with the dtypes the devices of ``sharding`` hold them in (what a
    program compiled for placed weights sees)."""
    return jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, held_dtype(a.dtype, sharding)), tree)


def held(host: Any, sharding: Any) -> Any:
    """``host`` (a numpy array) as the devices of ``sharding`` hold it: a uint8 view of float8_e4m3fn values on the
    CPU backend, else ``host`` itself."""
    dtype = getattr(host, "dtype", None)
    if dtype is None or np.dtype(dtype) != FLOAT8 or not isinstance(host, np.ndarray):
        return host
    return host.view(BITS) if platform(sharding) == "cpu" else host
