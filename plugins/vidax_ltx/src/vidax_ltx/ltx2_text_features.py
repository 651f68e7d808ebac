"""LTX-2.x text feature extraction: all of Gemma's hidden states, stacked, normalised per generation.

The input is every hidden state of the Gemma encoder (the embeddings, each layer's output, the last one after the
final norm) stacked on a trailing axis, (B, S, D, L) with L = layers + 1, plus the tokenizer's (B, S) mask. Both
generations flatten it D-major (feature ``d * L + l``, the order of the projection's input) and zero the padding
tokens; they differ in the normalisation (diffusers ``LTX2TextConnectors.forward``):

* LTX-2.0 (:func:`masked_mean_range_norm`): per sample and per layer, the mean and the range (max - min) over every
  valid token and channel, ``8 (x - mean) / (range + 1e-6)``. Which tokens are valid is derived from the token
  count and the padding side (Gemma pads on the left), so the side is an input of the result.
* LTX-2.3 / 2.5 (:func:`per_token_rms_features`): each token's D channels of each layer RMS-normalised (no gain),
  then every stream scales the features by ``sqrt(stream width / D)`` before its own projection.

Statistics run in float32; padding rows may hold anything (they are excluded by ``where``, never multiplied).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from vidax_core.errors import UserError
from vidax_core.nn.norms import rms_norm


def valid_tokens(lengths: jax.Array, seq_len: int, padding_side: str) -> jax.Array:
    """(B, S) bool: the ``lengths`` (B,) valid tokens of each row at the end (left padding) or the start (right)."""
    if padding_side not in ("left", "right"):
        raise UserError(f"padding side {padding_side!r} is not 'left' or 'right'")
    pos = jnp.arange(seq_len)[None, :]
    n = jnp.asarray(lengths)[:, None]
    return pos >= seq_len - n if padding_side == "left" else pos < n


def masked_mean_range_norm(hidden: jax.Array, mask: jax.Array, padding_side: str, scale: float = 8.0,
                           eps: float = 1e-6) -> jax.Array:
    """LTX-2.0's features: (B, S, D, L) hidden states and the (B, S) mask -> (B, S, D L) float32."""
    b, s, d, n_layers = hidden.shape
    h = hidden.astype(jnp.float32)
    lengths = jnp.asarray(mask).astype(jnp.int32).sum(-1)
    valid = valid_tokens(lengths, s, padding_side)
    v = valid[:, :, None, None]
    count = (lengths * d).astype(jnp.float32)[:, None, None, None] + eps
    mean = jnp.where(v, h, 0.0).sum(axis=(1, 2), keepdims=True) / count
    lo = jnp.where(v, h, jnp.inf).min(axis=(1, 2), keepdims=True)
    hi = jnp.where(v, h, -jnp.inf).max(axis=(1, 2), keepdims=True)
    out = ((h - mean) / (hi - lo + eps) * scale).reshape(b, s, d * n_layers)
    return jnp.where(valid[..., None], out, 0.0)


def per_token_rms_features(hidden: jax.Array, mask: jax.Array, eps: float = 1e-6) -> jax.Array:
    """LTX-2.3 / 2.5's features before the per-stream rescale: (B, S, D, L) -> (B, S, D L) float32."""
    b, s, d, n_layers = hidden.shape
    normed = rms_norm(jnp.moveaxis(hidden, 2, -1), eps=eps, out_dtype=jnp.float32)  # over D, per layer
    out = jnp.moveaxis(normed, -1, 2).reshape(b, s, d * n_layers)
    return jnp.where(jnp.asarray(mask).astype(bool)[..., None], out, 0.0)


def stream_scale(stream_width: int, hidden_size: int) -> float:
    """The 2.3 / 2.5 rescale of the features for a stream of ``stream_width`` channels."""
    return math.sqrt(stream_width / hidden_size)


__all__ = ["masked_mean_range_norm", "per_token_rms_features", "stream_scale", "valid_tokens"]
