"""The LTX-2.5 duration head (diffusers ``LTX2DurationHead``, a checkpoint's ``duration_head/``): the length of the
shot a prompt implies, predicted from the text connectors' output, so a run may leave ``sampling.num_frames`` unset.

The head: each stream's connector tokens (the positive prompt's) projected to a shared width plus a learned
modality embedding, concatenated, pooled by ``num_queries`` learned queries in one unmasked multi-head attention,
then ``mlp_out(gelu_tanh(mlp_hidden(pooled)))`` is a log-duration in seconds. :func:`frames_for_seconds` turns it
into a frame count as the pipeline's ``predict_num_frames`` does: rounded to frames at ``frame_rate``, clamped to
``[min_seconds, max_seconds]`` first, floored to the VAE's ``8k + 1`` grid, moved up one grid step when flooring
left the lower bound (or to the nearest grid point when the bounds hold none).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.io.arch_base import ArchConfig
from vidax_core.io.convert import KeyRule, convert
from vidax_core.io.diffusers_rules import linear_rules
from vidax_core.nn.layers import Linear, param
from vidax_core.nn.state import abstract_model, materialize

COMPONENT = "duration_head"


@dataclasses.dataclass(frozen=True)
class LTX2DurationHeadConfig(ArchConfig):
    """diffusers ``LTX2DurationHead`` config.json fields with its defaults."""

    video_cross_attention_dim: int = 4096
    audio_cross_attention_dim: int = 2048
    pooler_hidden_dim: int = 256
    num_queries: int = 1
    num_pooler_heads: int = 4
    mlp_hidden_dim: int = 256

    def __post_init__(self) -> None:
        if self.pooler_hidden_dim % self.num_pooler_heads:
            raise ValueError(f"num_pooler_heads={self.num_pooler_heads} must divide pooler_hidden_dim="
                             f"{self.pooler_hidden_dim}")


class LTX2DurationHead(nnx.Module):
    def __init__(self, cfg: LTX2DurationHeadConfig, *, rngs: nnx.Rngs | None = None):
        rngs = rngs or nnx.Rngs(0)
        d, f32 = cfg.pooler_hidden_dim, jnp.float32
        self.heads = cfg.num_pooler_heads
        self.video_input_proj = Linear(cfg.video_cross_attention_dim, d, (None, None), dtype=f32, rngs=rngs)
        self.audio_input_proj = Linear(cfg.audio_cross_attention_dim, d, (None, None), dtype=f32, rngs=rngs)
        self.video_modality_emb = param(jnp.zeros((d,), f32), (None,))
        self.audio_modality_emb = param(jnp.zeros((d,), f32), (None,))
        self.query_tokens = param(jnp.zeros((cfg.num_queries, d), f32), (None, None))
        for name in ("to_q", "to_k", "to_v", "to_out"):
            setattr(self, name, Linear(d, d, (None, None), dtype=f32, rngs=rngs))
        self.mlp_hidden = Linear(d * cfg.num_queries, cfg.mlp_hidden_dim, (None, None), dtype=f32, rngs=rngs)
        self.mlp_out = Linear(cfg.mlp_hidden_dim, 1, (None, None), dtype=f32, rngs=rngs)

    def __call__(self, video: jax.Array, audio: jax.Array) -> jax.Array:
        """Connector tokens (B, S, Cv) and (B, S, Ca) -> predicted seconds (B,)."""
        tokens = jnp.concatenate([self.video_input_proj(video) + self.video_modality_emb[...],
                                  self.audio_input_proj(audio) + self.audio_modality_emb[...]], axis=1)
        b, h = tokens.shape[0], self.heads
        queries = jnp.broadcast_to(self.query_tokens[...][None], (b, *self.query_tokens.shape))

        def split(x):
            return x.reshape(*x.shape[:2], h, -1)

        q, k, v = split(self.to_q(queries)), split(self.to_k(tokens)), split(self.to_v(tokens))
        logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(q.shape[-1]).astype(np.float32)
        pooled = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(logits, axis=-1), v).reshape(b, queries.shape[1], -1)
        pooled = self.to_out(pooled).reshape(b, -1)
        return jnp.exp(self.mlp_out(jax.nn.gelu(self.mlp_hidden(pooled), approximate=True))[:, 0])


#: diffusers names -> :class:`LTX2DurationHead` paths.
DURATION_RULES: list[KeyRule] = [
    *linear_rules(r"(video_input_proj|audio_input_proj|mlp_hidden|mlp_out)", "{1}"),
    *linear_rules(r"attention_pooler\.(to_q|to_k|to_v|to_out)", "{1}"),
    KeyRule(r"attention_pooler\.query_tokens", "query_tokens"),
    KeyRule(r"(video_modality_emb|audio_modality_emb)", "{1}"),
]


def load(config: Mapping[str, Any], tensors: Mapping[str, Any]) -> LTX2DurationHead:
    """A checkpoint's ``duration_head/`` (config dict and diffusers state dict) -> the head, float32."""
    cfg = LTX2DurationHeadConfig.from_config(config)
    graphdef, abstract, flat = abstract_model(lambda: LTX2DurationHead(cfg))
    return materialize(graphdef, abstract, convert(tensors, DURATION_RULES, flat, component=COMPONENT))


@functools.partial(jax.jit, static_argnums=(0,))
def _seconds(graphdef, state, video, audio):
    return nnx.merge(graphdef, state)(video, audio)


def predict_seconds(head: LTX2DurationHead, video: Any, audio: Any) -> float:
    """Seconds the one prompt's connector tokens (1, S, C) of each stream imply."""
    graphdef, state = nnx.split(head)
    out = _seconds(graphdef, state, jnp.asarray(video, jnp.float32), jnp.asarray(audio, jnp.float32))
    return float(np.asarray(out)[0])


def frames_for_seconds(seconds: float, frame_rate: float, temporal: int = 8, min_seconds: float = 1.0,
                       max_seconds: float = 20.0) -> int:
    """The frame count ``predict_num_frames`` picks for ``seconds`` (module docstring): always ``temporal k + 1``."""
    lo = max(1, round(min_seconds * frame_rate))
    hi = round(max_seconds * frame_rate)
    clamped = max(lo, min(round(seconds * frame_rate), hi))
    n = (clamped - 1) // temporal * temporal + 1
    if n < lo:
        up = n + temporal
        if up <= hi or abs(up - clamped) < abs(n - clamped):
            n = up
    return n


__all__ = ["COMPONENT", "DURATION_RULES", "LTX2DurationHead", "LTX2DurationHeadConfig", "frames_for_seconds", "load",
           "predict_seconds"]
