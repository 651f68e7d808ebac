"""Attention dispatch: every model calls :func:`attention` with (batch, seq, heads, head_dim) tensors.

The backend is chosen once per run (``attention.backend`` in the config) and never changes silently.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def attention(q: jax.Array, k: jax.Array, v: jax.Array, *, kv_mask: jax.Array | None = None) -> jax.Array:
    """Softmax attention over (B, S, H, D) inputs, scale 1/sqrt(D), softmax in fp32.

    ``kv_mask``: optional (B, Sk) boolean, True where the key is valid (short text sequences only).
    """
    scale = 1.0 / jnp.sqrt(jnp.asarray(q.shape[-1], jnp.float32))
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32) * scale
    if kv_mask is not None:
        logits = jnp.where(kv_mask[:, None, None, :], logits, jnp.finfo(jnp.float32).min)
    probs = jax.nn.softmax(logits, axis=-1).astype(v.dtype)
    return jnp.einsum("bhqk,bkhd->bqhd", probs, v)
