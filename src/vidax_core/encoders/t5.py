"""T5 encoder stack in Flax NNX: UMT5 (Wan), T5 v1.1 (XXL) and byT5 are configurations of :class:`T5Encoder`.

Numerics follow transformers' ``T5EncoderModel`` / ``UMT5EncoderModel``:

* token embedding (tied ``shared`` / ``encoder.embed_tokens`` table), no scaling, no absolute positions;
* pre-norm blocks: T5 RMS norm (no mean subtraction, no bias) -> self-attention -> residual, T5 RMS norm ->
  feed-forward -> residual; a final RMS norm. The feed-forward is ``feed_forward_proj``: ``gated-gelu`` (T5 v1.1,
  UMT5, byT5) is ``wo(gelu_tanh(wi_0 x) * wi_1 x)``, ``relu`` (original T5) is ``wo(relu(wi x))``;
* attention logits are NOT scaled by 1/sqrt(d_kv) (T5 convention); a learned relative position bias over bucketed
  bidirectional distances is added, the padding mask is an additive ``finfo(float32).min`` bias on the keys.
* The one switch between the variants is where the bias table lives: T5 / T5 v1.1 / byT5 compute it ONCE from the
  first layer's table and share it across all layers (``position_bias_per_layer=False``, the
  ``encoder.block.0...relative_attention_bias`` key); UMT5 gives every layer its own table (True). By default the
  switch follows ``model_type`` (``"umt5"`` -> per layer).

Precision policy (where the reference computes in fp32, so do we; everything else is ``cfg.dtype``):

* fp32: RMS norm statistics and output (transformers computes the variance in fp32), attention logits, position
  bias and softmax (transformers: ``softmax(scores.float())``), the gated activation product, the residual stream
  (transformers keeps the residual in the parameter dtype and needs fp16 clamps; an fp32 residual is at least as
  exact and needs none), and the output ``last_hidden_state``;
* ``cfg.dtype``: parameters and the q/k/v/o, wi and wo matmuls (fp32 accumulation). transformers'
  ``_keep_in_fp32_modules = ["wo"]`` only applies to fp16 loads; set ``wo_dtype=float32`` to mirror that.

Short text sequences with a position bias use a small dense softmax here (not the video attention backends).
The ``num_layers`` blocks live in ONE parameter tree stacked on a leading ``'layers'`` axis, run by
:func:`run_blocks` with ``jax.lax.scan``. Parameters carry logical axis names ``'vocab'``, ``'embed'`` (d_model),
``'heads'`` (num_heads * d_kv), ``'mlp'`` (d_ff), ``'layers'``: tensor parallel places heads/mlp on ``tp``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.io.arch import from_config_dict
from vidax_core.errors import UserError
from vidax_core.io.convert import KeyRule, convert, linear
from vidax_core.nn.layers import Linear, param, scan_blocks, stacked
from vidax_core.nn.norms import RMSNorm
from vidax_core.encoders.policy import place_tower, resolve_dtype
from vidax_core.quant.stored import convert_as_stored
from vidax_core.parallel.streamed import jit_unless_streamed, run_stack

VOCAB, EMBED, HEADS, MLP = "vocab", "embed", "heads", "mlp"

_ACTIVATIONS = {
    "relu": jax.nn.relu,
    "gelu": lambda x: jax.nn.gelu(x, approximate=False),  # transformers' "gelu" is the exact erf form
    "gelu_new": lambda x: jax.nn.gelu(x, approximate=True),
    "gelu_pytorch_tanh": lambda x: jax.nn.gelu(x, approximate=True),
    "silu": jax.nn.silu,
    "swish": jax.nn.silu,
}


# --------------------------------------------------------------------------------------------------------------
# Config
# --------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class T5Config:
    """Field names match transformers' T5 / UMT5 ``config.json``; ``dtype`` is the parameter / matmul dtype.

    Defaults are transformers' ``T5Config`` defaults (t5-small); real checkpoints come from their config.json
    (see :data:`T5_V1_1_XXL`, :data:`UMT5_XXL`, :data:`BYT5_SMALL` for the published shapes).
    """

    vocab_size: int = 32128
    d_model: int = 512
    d_kv: int = 64
    d_ff: int = 2048
    num_layers: int = 6
    num_heads: int = 8
    relative_attention_num_buckets: int = 32
    relative_attention_max_distance: int = 128
    feed_forward_proj: str = "relu"
    layer_norm_epsilon: float = 1e-6
    model_type: str = "t5"
    position_bias_per_layer: bool | None = None  # None: per layer iff model_type == "umt5"
    dtype: Any = None  # None: the run's encoder dtype (vidax_core.encoders.policy), float32 outside a run
    wo_dtype: Any = None  # None: ``dtype``

    def __post_init__(self) -> None:
        resolve_dtype(self)
        parts = self.feed_forward_proj.split("-")
        if len(parts) > 2 or (len(parts) == 2 and parts[0] != "gated") or self.act_name not in _ACTIVATIONS:
            raise ValueError(
                f"feed_forward_proj={self.feed_forward_proj!r} is not supported: expected '<act>' or 'gated-<act>' "
                f"with act one of {sorted(_ACTIVATIONS)}"
            )

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> "T5Config":
        """Build from a transformers config dict; unknown keys (``architectures``, ``dropout_rate``...) are ignored,
        and so is the file's ``dtype`` (the compute dtype is the caller's policy: pass ``dtype=`` to choose it)."""
        return from_config_dict(cls, {k: v for k, v in config.items() if k != "dtype"}, **overrides)

    @property
    def per_layer_bias(self) -> bool:
        if self.position_bias_per_layer is not None:
            return bool(self.position_bias_per_layer)
        return self.model_type == "umt5"

    @property
    def is_gated(self) -> bool:
        return self.feed_forward_proj.startswith("gated-")

    @property
    def act_name(self) -> str:
        # transformers: dense_act_fn = last part, except that "gated-gelu" means gelu_new (tanh approximation)
        if self.feed_forward_proj == "gated-gelu":
            return "gelu_new"
        return self.feed_forward_proj.split("-")[-1]

    @property
    def inner_dim(self) -> int:
        return self.num_heads * self.d_kv


def config_from_tensors(tensors: Any, base: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` (a transformers T5 / UMT5 config) with the sizes a T5 encoder's tensors (transformers names, as
    ComfyUI's T5 files keep them) determine: vocabulary and width from ``shared``, depth from the blocks, heads and
    buckets from the first relative position bias, ``d_kv`` and ``d_ff`` from the projections."""
    import re

    def shape(key: str) -> tuple[int, ...]:
        return tuple(tensors.shape(key)) if hasattr(tensors, "shape") else tuple(np.shape(tensors[key]))

    vocab, d_model = shape("shared.weight")
    blocks = {int(m[1]) for k in tensors if (m := re.match(r"encoder\.block\.(\d+)\.", k))}
    bias = "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
    buckets, heads = shape(bias) if bias in tensors else (base.get("relative_attention_num_buckets", 32),
                                                          base.get("num_heads", 8))
    ff = next((k for k in ("wi_0", "wi") if f"encoder.block.0.layer.1.DenseReluDense.{k}.weight" in tensors), "wi")
    return {**dict(base), "vocab_size": vocab, "d_model": d_model, "num_layers": len(blocks) or base.get("num_layers"),
            "num_heads": heads, "relative_attention_num_buckets": buckets,
            "d_kv": shape("encoder.block.0.layer.0.SelfAttention.q.weight")[0] // heads,
            "d_ff": shape(f"encoder.block.0.layer.1.DenseReluDense.{ff}.weight")[0]}


#: google/t5-v1_1-xxl encoder (Cosmos, HunyuanVideo-era text towers): gated-gelu, untied head, shared bias.
T5_V1_1_XXL: dict[str, Any] = dict(
    model_type="t5", vocab_size=32128, d_model=4096, d_kv=64, d_ff=10240, num_layers=24, num_heads=64,
    relative_attention_num_buckets=32, relative_attention_max_distance=128, feed_forward_proj="gated-gelu",
    layer_norm_epsilon=1e-6,
)
#: google/umt5-xxl encoder (Wan): per-layer bias tables.
UMT5_XXL: dict[str, Any] = dict(
    model_type="umt5", vocab_size=256384, d_model=4096, d_kv=64, d_ff=10240, num_layers=24, num_heads=64,
    relative_attention_num_buckets=32, relative_attention_max_distance=128, feed_forward_proj="gated-gelu",
    layer_norm_epsilon=1e-6,
)
#: google/byt5-small encoder: T5 v1.1 architecture over 256 bytes + 3 specials + 125 sentinels.
BYT5_SMALL: dict[str, Any] = dict(
    model_type="t5", vocab_size=384, d_model=1472, d_kv=64, d_ff=3584, num_layers=12, num_heads=6,
    relative_attention_num_buckets=32, relative_attention_max_distance=128, feed_forward_proj="gated-gelu",
    layer_norm_epsilon=1e-6,
)


# --------------------------------------------------------------------------------------------------------------
# Relative position buckets (host-side: shapes are static)
# --------------------------------------------------------------------------------------------------------------


def relative_position_buckets(
    query_length: int, key_length: int, num_buckets: int, max_distance: int, bidirectional: bool = True
) -> np.ndarray:
    """T5 bucket index of every (query, key) pair, int32 (query_length, key_length).

    Mirrors transformers' ``_relative_position_bucket`` including its float32 log arithmetic, so bucket edges land
    on the same side. Half the buckets (per direction) are exact distances, the rest logarithmic up to
    ``max_distance``; the encoder is bidirectional (positive distances get the upper half of the buckets).
    """
    rel = np.arange(key_length, dtype=np.int64)[None, :] - np.arange(query_length, dtype=np.int64)[:, None]
    buckets = np.zeros_like(rel)
    if bidirectional:
        num_buckets //= 2
        buckets += (rel > 0).astype(np.int64) * num_buckets
        rel = np.abs(rel)
    else:
        rel = -np.minimum(rel, 0)
    max_exact = num_buckets // 2
    is_small = rel < max_exact
    with np.errstate(divide="ignore"):
        ratio = np.log(rel.astype(np.float32) / np.float32(max_exact))
    ratio = ratio / np.float32(math.log(max_distance / max_exact)) * np.float32(num_buckets - max_exact)
    large = max_exact + np.where(is_small, 0.0, ratio).astype(np.int64)  # truncation like torch .to(long)
    large = np.minimum(large, num_buckets - 1)
    buckets += np.where(is_small, rel, large)
    return buckets.astype(np.int32)


def position_bias(table: jax.Array, buckets: jax.Array) -> jax.Array:
    """(num_buckets, H) table gathered at (Lq, Lk) buckets -> (H, Lq, Lk) float32 additive bias."""
    return jnp.transpose(jnp.take(table.astype(jnp.float32), buckets, axis=0), (2, 0, 1))


# --------------------------------------------------------------------------------------------------------------
# Layers
# --------------------------------------------------------------------------------------------------------------


def T5LayerNorm(dim: int, *, eps: float) -> RMSNorm:
    """T5 RMS norm: x * rsqrt(mean(x^2) + eps) * scale, no mean subtraction, no bias; fp32 statistics and output."""
    return RMSNorm(dim, (EMBED,), eps=eps, out_dtype=jnp.float32)


def _bias_table(cfg: T5Config, rngs: nnx.Rngs) -> nnx.Param:
    table = jax.random.normal(rngs.params(), (cfg.relative_attention_num_buckets, cfg.num_heads), cfg.dtype) * 0.02
    return param(table, (None, None))


class T5Attention(nnx.Module):
    """Self-attention without 1/sqrt(d) scaling plus a relative position bias (this layer's own table when
    ``cfg.per_layer_bias``, else the shared bias passed in)."""

    def __init__(self, cfg: T5Config, *, rngs: nnx.Rngs):
        self.num_heads, self.d_kv = cfg.num_heads, cfg.d_kv
        dt = cfg.dtype
        self.q = Linear(cfg.d_model, cfg.inner_dim, (EMBED, HEADS), dtype=dt, rngs=rngs, bias=False)
        self.k = Linear(cfg.d_model, cfg.inner_dim, (EMBED, HEADS), dtype=dt, rngs=rngs, bias=False)
        self.v = Linear(cfg.d_model, cfg.inner_dim, (EMBED, HEADS), dtype=dt, rngs=rngs, bias=False)
        self.o = Linear(cfg.inner_dim, cfg.d_model, (HEADS, EMBED), dtype=dt, rngs=rngs, bias=False)
        self.relative_attention_bias = _bias_table(cfg, rngs) if cfg.per_layer_bias else None

    def __call__(
        self, x: jax.Array, buckets: jax.Array, shared_bias: jax.Array | None, key_bias: jax.Array
    ) -> jax.Array:
        """x (B, L, d_model); buckets (L, L) int32; shared_bias (H, L, L) or None; key_bias (B, L) additive."""
        b, n, _ = x.shape
        h, d = self.num_heads, self.d_kv
        q = self.q(x).reshape(b, n, h, d)
        k = self.k(x).reshape(b, n, h, d)
        v = self.v(x).reshape(b, n, h, d)
        logits = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32)
        if self.relative_attention_bias is not None:
            pos = position_bias(self.relative_attention_bias[...], buckets)
        else:
            pos = shared_bias
        logits = logits + pos[None] + key_bias[:, None, None, :]
        probs = jax.nn.softmax(logits, axis=-1).astype(v.dtype)
        out = jnp.einsum("bhqk,bkhd->bqhd", probs, v, preferred_element_type=jnp.float32).astype(v.dtype)
        return self.o(out.reshape(b, n, h * d))


class T5FeedForward(nnx.Module):
    """Gated: wo(act(wi_0 x) * wi_1 x); plain: wo(act(wi x)). The activation and gate product run in fp32."""

    def __init__(self, cfg: T5Config, *, rngs: nnx.Rngs):
        dt = cfg.dtype
        self.act = _ACTIVATIONS[cfg.act_name]
        self.gated = cfg.is_gated
        if self.gated:
            self.wi_0 = Linear(cfg.d_model, cfg.d_ff, (EMBED, MLP), dtype=dt, rngs=rngs, bias=False)
            self.wi_1 = Linear(cfg.d_model, cfg.d_ff, (EMBED, MLP), dtype=dt, rngs=rngs, bias=False)
        else:
            self.wi = Linear(cfg.d_model, cfg.d_ff, (EMBED, MLP), dtype=dt, rngs=rngs, bias=False)
        self.wo = Linear(cfg.d_ff, cfg.d_model, (MLP, EMBED), dtype=cfg.wo_dtype or dt, rngs=rngs, bias=False)

    def __call__(self, x: jax.Array) -> jax.Array:
        if self.gated:
            hidden = self.act(self.wi_0(x).astype(jnp.float32)) * self.wi_1(x).astype(jnp.float32)
        else:
            hidden = self.act(self.wi(x).astype(jnp.float32))
        return self.wo(hidden)


class T5Block(nnx.Module):
    def __init__(self, cfg: T5Config, *, rngs: nnx.Rngs):
        self.attn_norm = T5LayerNorm(cfg.d_model, eps=cfg.layer_norm_epsilon)
        self.attn = T5Attention(cfg, rngs=rngs)
        self.ffn_norm = T5LayerNorm(cfg.d_model, eps=cfg.layer_norm_epsilon)
        self.ffn = T5FeedForward(cfg, rngs=rngs)

    def __call__(
        self, x: jax.Array, buckets: jax.Array, shared_bias: jax.Array | None, key_bias: jax.Array
    ) -> jax.Array:
        """x: float32 residual stream (B, L, d_model)."""
        x = x + self.attn(self.attn_norm(x), buckets, shared_bias, key_bias).astype(jnp.float32)
        return x + self.ffn(self.ffn_norm(x)).astype(jnp.float32)


def run_blocks(
    block_graphdef: nnx.GraphDef,
    stacked_block_state: nnx.State,
    x: jax.Array,
    buckets: jax.Array,
    shared_bias: jax.Array | None,
    key_bias: jax.Array,
) -> jax.Array:
    """Run blocks stacked on the leading axis of ``stacked_block_state`` (any slice of it) with ``lax.scan``."""
    return scan_blocks(block_graphdef, stacked_block_state, x, buckets, shared_bias, key_bias)


# --------------------------------------------------------------------------------------------------------------
# Encoder
# --------------------------------------------------------------------------------------------------------------


class T5Encoder(nnx.Module):
    """``T5EncoderModel`` / ``UMT5EncoderModel``: ``__call__(input_ids, attention_mask) -> last_hidden_state``
    (B, L, d_model) float32."""

    def __init__(self, cfg: T5Config, *, rngs: nnx.Rngs):
        self.cfg = cfg
        self.embedding = param(
            jax.random.normal(rngs.params(), (cfg.vocab_size, cfg.d_model), cfg.dtype), (VOCAB, EMBED)
        )
        self.relative_attention_bias = None if cfg.per_layer_bias else _bias_table(cfg, rngs)
        self.blocks = stacked(lambda r: T5Block(cfg, rngs=r), cfg.num_layers, rngs)
        self.final_norm = T5LayerNorm(cfg.d_model, eps=cfg.layer_norm_epsilon)

    def split_blocks(self) -> tuple[nnx.GraphDef, nnx.State]:
        """(graphdef of ONE block, stacked state with leading layer axis) for :func:`run_blocks`."""
        return nnx.split(self.blocks)

    def __call__(self, input_ids: jax.Array, attention_mask: jax.Array | None = None) -> jax.Array:
        input_ids = jnp.asarray(input_ids, jnp.int32)
        b, n = input_ids.shape
        if attention_mask is None:
            attention_mask = jnp.ones((b, n), jnp.int32)
        key_bias = jnp.where(jnp.asarray(attention_mask) > 0, 0.0, jnp.finfo(jnp.float32).min).astype(jnp.float32)
        cfg = self.cfg
        buckets = jnp.asarray(
            relative_position_buckets(n, n, cfg.relative_attention_num_buckets, cfg.relative_attention_max_distance)
        )
        shared = None
        if self.relative_attention_bias is not None:
            shared = position_bias(self.relative_attention_bias[...], buckets)
        x = jnp.take(self.embedding[...], input_ids, axis=0).astype(jnp.float32)
        x = run_stack(self.blocks, x, buckets, shared, key_bias)  # resident: one scan; else streamed chunks
        return self.final_norm(x)


def _encode_text(
    encoder: T5Encoder, input_ids: jax.Array, attention_mask: jax.Array, max_sequence_length: int
) -> jax.Array:
    """Wan's prompt embeddings: (B, max_sequence_length, d_model) float32.

    As diffusers' ``WanPipeline._get_t5_prompt_embeds``: encode with the mask, keep each row's first
    ``seq_len = (mask > 0).sum()`` vectors (a prefix, as the pipeline slices ``u[:seq_len]``), zero the rest and
    zero-pad the sequence axis up to ``max_sequence_length``.
    """
    input_ids = jnp.asarray(input_ids, jnp.int32)
    attention_mask = jnp.asarray(attention_mask)
    n = input_ids.shape[1]
    if n > max_sequence_length:
        raise ValueError(f"token length {n} exceeds max_sequence_length={max_sequence_length}")
    hidden = encoder(input_ids, attention_mask)
    seq_lens = jnp.sum(attention_mask > 0, axis=1)
    keep = jnp.arange(n)[None, :] < seq_lens[:, None]
    hidden = jnp.where(keep[..., None], hidden, 0.0)
    return jnp.pad(hidden, ((0, 0), (0, max_sequence_length - n), (0, 0)))


# --------------------------------------------------------------------------------------------------------------
# Checkpoint conversion
# --------------------------------------------------------------------------------------------------------------

_BLOCK = r"encoder\.block\.(\d+)\.layer"

_COMMON_RULES: tuple[KeyRule, ...] = (
    # Tied input embedding: either name (or both) may be in the file; both fill the same table.
    KeyRule(r"(?:shared|encoder\.embed_tokens)\.weight", "embedding"),
    KeyRule(_BLOCK + r"\.0\.SelfAttention\.(q|k|v|o)\.weight", "blocks/attn/{2}/kernel", linear, layer_group=1),
    KeyRule(_BLOCK + r"\.0\.layer_norm\.weight", "blocks/attn_norm/scale", layer_group=1),
    KeyRule(_BLOCK + r"\.1\.DenseReluDense\.(wi_0|wi_1|wi|wo)\.weight", "blocks/ffn/{2}/kernel", linear, layer_group=1),
    KeyRule(_BLOCK + r"\.1\.layer_norm\.weight", "blocks/ffn_norm/scale", layer_group=1),
    KeyRule(r"encoder\.final_layer_norm\.weight", "final_norm/scale"),
)

#: transformers ``UMT5EncoderModel`` keys: every block has its own bias table.
UMT5_RULES: tuple[KeyRule, ...] = _COMMON_RULES + (
    KeyRule(
        _BLOCK + r"\.0\.SelfAttention\.relative_attention_bias\.weight",
        "blocks/attn/relative_attention_bias",
        layer_group=1,
    ),
)

#: transformers ``T5EncoderModel`` keys (T5, T5 v1.1, byT5): only block 0 holds the (shared) bias table.
T5_RULES: tuple[KeyRule, ...] = _COMMON_RULES + (
    KeyRule(r"encoder\.block\.0\.layer\.0\.SelfAttention\.relative_attention_bias\.weight", "relative_attention_bias"),
)

#: Keys of a full encoder-decoder checkpoint that the encoder does not use.
T5_IGNORE: tuple[str, ...] = (r"decoder\..*", r"lm_head\.weight")
UMT5_IGNORE = T5_IGNORE


def t5_rules(cfg: T5Config) -> tuple[KeyRule, ...]:
    """The key table for ``cfg``'s bias layout."""
    return UMT5_RULES if cfg.per_layer_bias else T5_RULES


def load_t5(cfg: T5Config, tensors: Mapping[str, Any], *, put: Any = None, mesh: Any = None) -> T5Encoder:
    """Build a :class:`T5Encoder` from a transformers state dict (key -> array or zero-arg loader).

    ``put(path, array)`` places each parameter (default ``jax.device_put``); or give the run's ``mesh`` to place
    the encoder tensor-parallel over its ``tp`` axis (heads and FFN width split, the rest replicated). Linear
    weights the file stores 8-bit (ComfyUI's scaled fp8 UMT5) stay 8-bit (:mod:`vidax_core.quant.stored`).
    """
    if not any(k in tensors for k in ("shared.weight", "encoder.embed_tokens.weight")):
        raise UserError(
            f"{cfg.model_type.upper()} checkpoint has no token embedding: expected 'shared.weight' or "
            "'encoder.embed_tokens.weight'"
        )
    component = f"text encoder ({cfg.model_type.upper()})"
    graphdef, state, values = convert_as_stored(
        lambda: T5Encoder(cfg, rngs=nnx.Rngs(0)), tensors,
        lambda source, flat: convert(source, t5_rules(cfg), flat, component=component, ignore=T5_IGNORE), component)
    return place_tower(graphdef, state, values, put=put, mesh=mesh)


# Jitted once per process: a loaded pipe calls the encoder for many prompts, and a fresh trace per call would
# compile it again every time. A streamed encoder runs eagerly around one jitted program per chunk.
encode_text = jit_unless_streamed(_encode_text, static_argnames=("max_sequence_length",))


def _call_encoder(encoder: T5Encoder, input_ids: jax.Array) -> jax.Array:
    """The encoder's hidden states for ``input_ids`` without a mask (CogVideoX's and LTX's pipelines), jitted once."""
    return encoder(input_ids)


call_encoder = jit_unless_streamed(_call_encoder)

