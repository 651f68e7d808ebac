"""The matmul precision of a run (``runtime.matmul_precision``): float32 that is float32 on every backend.

TPUs (and GPUs with TF32) round float32 matmul and convolution inputs unless a program asks for full precision; a
float32 Wan2.1-1.3B run on a TPU v5e at the backend default differed from the same run on CPU by 1.2e-2 relative,
as much as a bf16 run. ``auto`` therefore means ``highest`` when the run computes in float32 (``model.dtype``, or
the model's policy) and the backend's default otherwise. The precision is a trace-time setting: :func:`scope` wraps
everything a call traces (DiT, VAE, encoders, upsamplers, the attention kernels' own matmuls), so it is part of
each compiled program's cache key and two pipes in one process keep their own.
"""

from __future__ import annotations

import contextlib
from typing import Any

CHOICES = ("auto", "default", "high", "highest")


def resolve(run: Any) -> str:
    """``default`` | ``high`` | ``highest`` for ``run``."""
    import jax.numpy as jnp

    from vidax_core.model_api import dit_weight_dtype

    asked = getattr(getattr(run, "runtime", None), "matmul_precision", "auto") or "auto"
    if asked != "auto":
        return asked
    return "highest" if jnp.dtype(dit_weight_dtype(run)) == jnp.float32 else "default"


def scope(run: Any):
    """The context a call of ``run`` traces in (the process's own setting is left alone for ``default``)."""
    import jax

    chosen = resolve(run)
    return contextlib.nullcontext() if chosen == "default" else jax.default_matmul_precision(chosen)


def effective(run: Any) -> str:
    """What the run's matmuls use, as the metrics report it: the run's choice, or for ``default`` the process's
    own setting where one was made (``jax_default_matmul_precision``), else ``default``."""
    import jax

    chosen = resolve(run)
    if chosen != "default":
        return chosen
    return str(jax.config.jax_default_matmul_precision or "default")
