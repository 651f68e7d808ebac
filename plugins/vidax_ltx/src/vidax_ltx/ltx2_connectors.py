"""LTX-2.x text connectors (diffusers ``LTX2TextConnectors``, the pipelines' ``connectors/`` folder) in Flax NNX.

Stacked Gemma hidden states (B, S, D, L) and the tokenizer mask -> the DiT's two text streams::

    connectors(hidden, mask, padding_side="left") -> {"video": (B, S, Cv), "audio": (B, S, Ca)} float32

1. Features (:mod:`.ltx2_text_features`) and projection. LTX-2.0 (``per_modality_projections: false``): the
   masked mean/range norm and ONE ``text_proj_in`` (D L -> D) shared by both streams. LTX-2.3 / 2.5: the per-token
   RMS norm, rescaled per stream by ``sqrt(width / D)``, then ``video_text_proj_in`` / ``audio_text_proj_in``.
2. Per stream, a 1-D transformer (``video_connector`` / ``audio_connector``): the padding is replaced by learned
   registers (the valid tokens moved to the front in order, register ``i mod R`` at every later position ``i``), so
   the blocks and the DiT see no mask; pre-RMS-norm (no gain) blocks of self-attention (:class:`LTX2Attention`,
   RMS q/k norm across heads, optional per-head gates) with a 1-D RoPE over ``arange(S) / rope_base_seq_len``
   (:func:`rope_tables`), and a gelu(tanh) FFN; a final RMS norm without gain. Without registers (a config with
   ``num_learnable_registers: null``) the blocks take the key-padding mask instead.

The reference also returns a "mask" for the DiT; it is all ones in every configuration (its ``< 1e-6`` test of an
additive mask holds for 0 and for ``-finfo.max`` alike), so the streams go to the DiT without one.

Weights: diffusers key names (:data:`CONNECTOR_RULES`); the original single-file layout, where the connectors sit
inside the LTX-2.x transformer safetensors, reads through :func:`original_connector_key`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import jax
import jax.numpy as jnp
from flax import nnx

from vidax_core.io.arch_base import ArchConfig
from vidax_core.io.convert import KeyRule
from vidax_core.io.diffusers_rules import attention_rules, feedforward_rules, linear_rules
from vidax_core.io.load import dit_loader
from vidax_core.io.renamed import RenamedTensors
from vidax_core.nn.feedforward import FeedForward
from vidax_core.nn.layers import Linear, param, scan_blocks, stacked
from vidax_core.nn.norms import rms_norm

from . import ltx2_text_features as features
from .ltx2_dit import EMBED, LTX2Attention, Rope, rope_tables

EPS = 1e-6


@dataclasses.dataclass(frozen=True)
class LTX2ConnectorsConfig(ArchConfig):
    """Field names and defaults are diffusers' ``LTX2TextConnectors`` config.json keys; ``dtype`` is the weight
    dtype. ``caption_channels`` is Gemma's hidden size D, ``text_proj_in_factor`` its layers + 1."""

    caption_channels: int = 3840
    text_proj_in_factor: int = 49
    video_connector_num_attention_heads: int = 30
    video_connector_attention_head_dim: int = 128
    video_connector_num_layers: int = 2
    video_connector_num_learnable_registers: int | None = 128
    video_gated_attn: bool = False
    audio_connector_num_attention_heads: int = 30
    audio_connector_attention_head_dim: int = 128
    audio_connector_num_layers: int = 2
    audio_connector_num_learnable_registers: int | None = 128
    audio_gated_attn: bool = False
    connector_rope_base_seq_len: int = 4096
    rope_theta: float = 10000.0
    rope_double_precision: bool = True
    causal_temporal_positioning: bool = False
    rope_type: str = "interleaved"
    per_modality_projections: bool = False
    video_hidden_dim: int = 4096
    audio_hidden_dim: int = 2048
    proj_bias: bool = False
    dtype: Any = jnp.float32

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.rope_type not in ("interleaved", "split"):
            raise ValueError(f"rope_type={self.rope_type!r}: expected 'interleaved' or 'split'")
        for name in ("video", "audio"):
            width = self.stream_width(name)
            heads, head_dim = self.stream_heads(name)
            if heads * head_dim != width:
                what = "video_hidden_dim" if name == "video" else "audio_hidden_dim"
                raise ValueError(
                    f"the {name} connector's {heads} heads x {head_dim} must equal its input width {width} ("
                    f"{what if self.per_modality_projections else 'caption_channels'})")

    def stream_width(self, name: str) -> int:
        """Width of a stream's projected features (the connector's width and its output)."""
        if not self.per_modality_projections:
            return self.caption_channels
        return self.video_hidden_dim if name == "video" else self.audio_hidden_dim

    def stream_heads(self, name: str) -> tuple[int, int]:
        return (getattr(self, f"{name}_connector_num_attention_heads"),
                getattr(self, f"{name}_connector_attention_head_dim"))

    @property
    def features_width(self) -> int:
        return self.caption_channels * self.text_proj_in_factor


# ------------------------------------------------------------------------------------------------------------
# The 1-D connector transformer
# ------------------------------------------------------------------------------------------------------------


def replace_padding(x: jax.Array, mask: jax.Array, registers: jax.Array) -> jax.Array:
    """(B, S, C) tokens with (B, S) mask -> the valid tokens first (in order), then register ``i mod R`` at each
    later position ``i`` (S must be a multiple of the R registers)."""
    b, s, c = x.shape
    r = registers.shape[0]
    if s % r:
        raise ValueError(f"the prompt length {s} must be a multiple of the {r} learnable registers")
    valid = jnp.asarray(mask).astype(bool)
    order = jnp.argsort(jnp.logical_not(valid).astype(jnp.int32), axis=1, stable=True)
    front = jnp.take_along_axis(x, order[..., None], axis=1)
    n = valid.sum(axis=1)[:, None, None]
    tiled = jnp.tile(registers.astype(x.dtype), (s // r, 1))[None]
    return jnp.where(jnp.arange(s)[None, :, None] < n, front, tiled)


class ConnectorBlock(nnx.Module):
    """diffusers ``LTX2TransformerBlock1d``: ``x + attn1(rms(x))``, then ``x + ff(rms(x))``."""

    def __init__(self, heads: int, head_dim: int, *, gated: bool, rope_style: str, dtype: Any, rngs: nnx.Rngs):
        dim = heads * head_dim
        self.attn1 = LTX2Attention(dim, heads, head_dim, gated=gated, bias=True, out_bias=True, eps=EPS,
                                   rope_style=rope_style, dtype=dtype, rngs=rngs)
        self.ff = FeedForward(dim, 4 * dim, dtype=dtype, rngs=rngs, bias=True, activation="gelu-approximate")
        self.dtype = dtype

    def __call__(self, x: jax.Array, rope: Rope, kv_mask: jax.Array | None) -> jax.Array:
        f32 = jnp.float32
        h = rms_norm(x, eps=EPS, out_dtype=self.dtype)
        x = x + self.attn1(h, q_seq=None, kv_seq=None, q_rope=rope, kv_mask=kv_mask).astype(f32)
        h = rms_norm(x, eps=EPS, out_dtype=self.dtype)
        return x + self.ff(h, seq=None).astype(f32)


class TextConnector(nnx.Module):
    """diffusers ``LTX2ConnectorTransformer1d``: (B, S, C) projected features and (B, S) mask -> (B, S, C) float32."""

    def __init__(self, cfg: LTX2ConnectorsConfig, name: str, *, rngs: nnx.Rngs):
        heads, head_dim = cfg.stream_heads(name)
        registers = getattr(cfg, f"{name}_connector_num_learnable_registers")
        dim = heads * head_dim
        self.cfg, self.heads, self.dim = cfg, heads, dim
        self.learnable_registers = (
            param(jax.random.uniform(rngs.params(), (registers, dim), jnp.float32, -1.0, 1.0).astype(cfg.dtype),
                  (None, EMBED)) if registers else None)
        style = "interleaved" if cfg.rope_type == "interleaved" else "rotate_half"
        gated = getattr(cfg, f"{name}_gated_attn")
        self.blocks = stacked(lambda r: ConnectorBlock(heads, head_dim, gated=gated, rope_style=style,
                                                       dtype=cfg.dtype, rngs=r),
                              getattr(cfg, f"{name}_connector_num_layers"), rngs)

    def __call__(self, x: jax.Array, mask: jax.Array) -> jax.Array:
        cfg = self.cfg
        b, s, _ = x.shape
        x = x.astype(jnp.float32)
        kv_mask = None
        if self.learnable_registers is not None:
            x = replace_padding(x, mask, self.learnable_registers[...])
        else:
            kv_mask = jnp.asarray(mask).astype(bool)
        pos = jnp.broadcast_to(jnp.arange(s, dtype=jnp.float32)[None, :, None], (b, s, 1))
        rope = rope_tables(pos, (cfg.connector_rope_base_seq_len,), self.dim, self.heads, cfg.rope_theta,
                           cfg.rope_double_precision)
        graphdef, state = nnx.split(self.blocks)
        x = scan_blocks(graphdef, state, x, rope, kv_mask)
        return rms_norm(x, eps=EPS, out_dtype=jnp.float32)


# ------------------------------------------------------------------------------------------------------------
# Features + projections + both connectors
# ------------------------------------------------------------------------------------------------------------


class LTX2TextConnectors(nnx.Module):
    """Stacked Gemma hidden states -> ``{"video", "audio"}`` text streams of the LTX-2 DiT (module docstring)."""

    def __init__(self, cfg: LTX2ConnectorsConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        dt, n_in, bias = cfg.dtype, cfg.features_width, cfg.proj_bias
        if cfg.per_modality_projections:
            self.video_text_proj_in = Linear(n_in, cfg.video_hidden_dim, (None, EMBED), dtype=dt, rngs=rngs,
                                             bias=bias)
            self.audio_text_proj_in = Linear(n_in, cfg.audio_hidden_dim, (None, EMBED), dtype=dt, rngs=rngs,
                                             bias=bias)
            self.text_proj_in = None
        else:
            self.text_proj_in = Linear(n_in, cfg.caption_channels, (None, EMBED), dtype=dt, rngs=rngs, bias=bias)
            self.video_text_proj_in = self.audio_text_proj_in = None
        self.video_connector = TextConnector(cfg, "video", rngs=rngs)
        self.audio_connector = TextConnector(cfg, "audio", rngs=rngs)

    def project(self, hidden: jax.Array, mask: jax.Array, padding_side: str = "left") -> tuple[jax.Array, jax.Array]:
        """(B, S, D, L) hidden states -> the (video, audio) projected features, before the connectors."""
        cfg, dt = self.cfg, self.cfg.dtype
        if hidden.shape[2:] != (cfg.caption_channels, cfg.text_proj_in_factor):
            raise ValueError(f"hidden states of shape {hidden.shape}: the connectors expect (B, S, "
                             f"{cfg.caption_channels}, {cfg.text_proj_in_factor}) (Gemma's width, layers + 1)")
        if not cfg.per_modality_projections:
            shared = self.text_proj_in(features.masked_mean_range_norm(hidden, mask, padding_side).astype(dt))
            return shared, shared
        feats = features.per_token_rms_features(hidden, mask)
        out = []
        for proj, width in ((self.video_text_proj_in, cfg.video_hidden_dim),
                            (self.audio_text_proj_in, cfg.audio_hidden_dim)):
            out.append(proj((feats * features.stream_scale(width, cfg.caption_channels)).astype(dt)))
        return out[0], out[1]

    def __call__(self, hidden: jax.Array, mask: jax.Array, padding_side: str = "left") -> dict[str, jax.Array]:
        video, audio = self.project(hidden, mask, padding_side)
        return {"video": self.video_connector(video, mask), "audio": self.audio_connector(audio, mask)}


# ------------------------------------------------------------------------------------------------------------
# Checkpoint keys
# ------------------------------------------------------------------------------------------------------------

_B = r"transformer_blocks\.(\d+)\."


def _connector_rules(name: str) -> list[KeyRule]:
    root = rf"{name}\.{_B}"
    return [KeyRule(rf"{name}\.learnable_registers", f"{name}/learnable_registers"),
            *attention_rules(rf"{root}attn1", f"{name}/blocks/attn1", 1, qk_norm="rms_norm_across_heads"),
            *linear_rules(rf"{root}attn1\.to_gate_logits", f"{name}/blocks/attn1/to_gate_logits", 1),
            *feedforward_rules(rf"{root}ff", f"{name}/blocks/ff", 1)]


CONNECTOR_RULES: list[KeyRule] = [
    *linear_rules(r"text_proj_in", "text_proj_in"),
    *linear_rules(r"video_text_proj_in", "video_text_proj_in"),
    *linear_rules(r"audio_text_proj_in", "audio_text_proj_in"),
    *_connector_rules("video_connector"),
    *_connector_rules("audio_connector"),
]

load_connectors = dit_loader(LTX2TextConnectors, CONNECTOR_RULES, component="LTX-2 text connectors (connectors)",
                             name="load_connectors")

# The original release: the feature extractor's projections under ``text_embedding_projection.`` and the two
# connectors inside the DiT (diffusers' LTX-2 conversion script).
_ORIGINAL_PREFIXES = (
    ("text_embedding_projection.aggregate_embed.", "text_proj_in."),
    ("text_embedding_projection.video_aggregate_embed.", "video_text_proj_in."),
    ("text_embedding_projection.audio_aggregate_embed.", "audio_text_proj_in."),
    ("model.diffusion_model.video_embeddings_connector.", "video_connector."),
    ("model.diffusion_model.audio_embeddings_connector.", "audio_connector."),
)
_ORIGINAL_RENAMES = (("transformer_1d_blocks", "transformer_blocks"), ("q_norm", "norm_q"), ("k_norm", "norm_k"))


def original_connector_key(key: str) -> str | None:
    """An original single-file key -> its diffusers ``connectors/`` name, or None for a key of another part."""
    for old, new in _ORIGINAL_PREFIXES:
        if key.startswith(old):
            key = new + key[len(old):]
            for a, b in _ORIGINAL_RENAMES:
                key = key.replace(a, b)
            return key
    return None


def original_connector_tensors(tensors: Mapping[str, Any]) -> RenamedTensors:
    """The connector part of an original single-file state dict, under diffusers' names (lazy: nothing is read)."""
    return RenamedTensors(tensors, original_connector_key)


__all__ = ["CONNECTOR_RULES", "ConnectorBlock", "LTX2ConnectorsConfig", "LTX2TextConnectors", "TextConnector",
           "load_connectors", "original_connector_key", "original_connector_tensors", "replace_padding"]
