"""One pre-norm transformer tower (ViT) in Flax NNX that CLIP vision, CLIP text (pooled, projected) and SigLIP
vision / text are configurations of (transformers ``CLIPVisionModel``, ``CLIPTextModel``,
``CLIPTextModelWithProjection``, ``SiglipVisionModel``, ``SiglipTextModel``).

The shared body: embeddings -> optional ``pre_norm`` -> ``num_hidden_layers`` blocks of LayerNorm -> multi-head
self-attention (biases, 1/sqrt(head_dim)) -> residual, LayerNorm -> MLP ``fc2(act(fc1 x))`` -> residual. What
differs is a config switch each:

* inputs: ``kind="vision"``: a ``patch_size``-stride conv (``patch_bias``: SigLIP yes, CLIP no), row-major
  patches, an optional class token in front (CLIP), learned absolute positions; ``kind="text"``: a token table
  plus learned absolute positions ``0..L-1``;
* mask: ``causal`` (CLIP text) and/or a key-padding ``attention_mask``;
* ``final_norm``: ``"all"`` normalises the last hidden state (SigLIP's ``post_layernorm``, the text towers'
  ``final_layer_norm``), ``"pooled"`` only the pooled vector (CLIP vision's ``post_layernorm``);
* ``pooling``: ``"first"`` (CLIP vision class token), ``"eos"`` (CLIP text: the first ``eos_token_id``, or the
  arg-max id for legacy configs with ``eos_token_id == 2``), ``"last"`` (SigLIP text), ``"map"`` (SigLIP vision's
  multi-head attention pooling head: a learned probe attends over the sequence, then LayerNorm + MLP residual);
* ``projection_dim``: a final linear on the pooled vector (CLIP ``text_projection`` without bias, SigLIP text
  ``head`` with bias).

``hidden_states[0]`` is the embedding output (after ``pre_norm``), ``hidden_states[i]`` the output of layer ``i``;
:meth:`ViTEncoder.hidden_state` runs only the layers an index needs.

Precision policy: parameters and matmuls in ``cfg.dtype`` with fp32 accumulation and fp32 outputs; LayerNorms,
softmax, the residual stream and all outputs in float32. Attention without a causal mask goes through
:func:`vidax_core.attention.attention` (key padding as ``kv_mask``); the causal text tower (77 tokens) uses a
small dense masked softmax. Blocks are stacked on a leading ``'layers'`` axis and run with ``jax.lax.scan``;
parameters carry logical axes ``'vocab'``, ``'embed'``, ``'heads'`` (attention width), ``'mlp'``, ``'layers'``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.attention import attention
from vidax_core.encoders.policy import resolve_dtype
from vidax_core.io.arch import from_config_dict
from vidax_core.io.convert import KeyRule, conv, convert, linear
from vidax_core.nn.layers import Linear, param, scan_blocks, stacked
from vidax_core.nn.norms import LayerNorm as CoreLayerNorm
from vidax_core.nn.state import abstract_model, materialize

VOCAB, EMBED, HEADS, MLP = "vocab", "embed", "heads", "mlp"

ACTIVATIONS = {
    "quick_gelu": lambda x: x * jax.nn.sigmoid(1.702 * x),
    "gelu": lambda x: jax.nn.gelu(x, approximate=False),
    "gelu_new": lambda x: jax.nn.gelu(x, approximate=True),
    "gelu_pytorch_tanh": lambda x: jax.nn.gelu(x, approximate=True),
    "relu": jax.nn.relu,
    "silu": jax.nn.silu,
}
POOLINGS = ("first", "eos", "last", "map", None)


@dataclasses.dataclass(frozen=True)
class ViTConfig:
    """Architecture of one tower; build it with :meth:`clip_vision`, :meth:`clip_text`, :meth:`siglip_vision` or
    :meth:`siglip_text` from a transformers config dict (whose ``dtype`` is ignored: the compute dtype is the
    caller's policy, pass ``dtype=``)."""

    hidden_size: int = 768
    intermediate_size: int = 3072
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    hidden_act: str = "quick_gelu"
    layer_norm_eps: float = 1e-5
    kind: str = "vision"  # "vision" | "text"
    # vision inputs
    num_channels: int = 3
    image_size: int = 224
    patch_size: int = 32
    class_token: bool = True
    patch_bias: bool = False
    pre_norm: bool = True
    # text inputs
    vocab_size: int = 49408
    max_position_embeddings: int = 77
    causal: bool = False
    eos_token_id: int = 2
    # outputs
    final_norm: str | None = "pooled"  # "all" | "pooled" | None
    pooling: str | None = "first"
    projection_dim: int | None = None
    projection_bias: bool = False
    dtype: Any = None  # None: the run's encoder dtype (vidax_core.encoders.policy), float32 outside a run

    def __post_init__(self) -> None:
        resolve_dtype(self)
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(f"hidden_act={self.hidden_act!r} is not supported: expected one of {sorted(ACTIVATIONS)}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError("hidden_size must be a multiple of num_attention_heads")
        if self.kind not in ("vision", "text") or self.pooling not in POOLINGS:
            raise ValueError(f"kind={self.kind!r} / pooling={self.pooling!r} not supported")
        if self.final_norm not in ("all", "pooled", None):
            raise ValueError(f"final_norm={self.final_norm!r}: expected 'all', 'pooled' or None")

    @property
    def num_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2

    @property
    def num_positions(self) -> int:
        if self.kind == "text":
            return self.max_position_embeddings
        return self.num_patches + (1 if self.class_token else 0)

    # --- configurations ---------------------------------------------------------------------------------------

    @classmethod
    def clip_vision(cls, config: Mapping[str, Any], **overrides: Any) -> "ViTConfig":
        """``CLIPVisionModel`` (a ``CLIPModel`` config.json works too: its ``vision_config``)."""
        fixed = dict(kind="vision", class_token=True, patch_bias=False, pre_norm=True, final_norm="pooled",
                     pooling="first", projection_dim=None, dtype=None)
        return from_config_dict(cls, {**config.get("vision_config", config), **fixed}, **overrides)

    @classmethod
    def clip_text(cls, config: Mapping[str, Any], *, with_projection: bool = False, **overrides: Any) -> "ViTConfig":
        """``CLIPTextModel`` (pooled at the EOS token); ``with_projection``: ``CLIPTextModelWithProjection``."""
        text = dict(config.get("text_config", config))
        proj = text.get("projection_dim", config.get("projection_dim", 512)) if with_projection else None
        fixed = dict(kind="text", causal=True, pre_norm=False, final_norm="all", pooling="eos",
                     projection_dim=proj, projection_bias=False, dtype=None)
        return from_config_dict(cls, {**text, **fixed}, **overrides)

    @classmethod
    def siglip_vision(cls, config: Mapping[str, Any], **overrides: Any) -> "ViTConfig":
        """``SiglipVisionModel``: no class token, patch bias, ``post_layernorm`` on all tokens, MAP head pooling."""
        vision = dict(config.get("vision_config", config))
        fixed = dict(kind="vision", class_token=False, patch_bias=True, pre_norm=False, final_norm="all",
                     pooling="map" if vision.get("vision_use_head", True) else None, projection_dim=None,
                     dtype=None)
        base = dict(hidden_act="gelu_pytorch_tanh", layer_norm_eps=1e-6)
        return from_config_dict(cls, {**base, **vision, **fixed}, **overrides)

    @classmethod
    def siglip_text(cls, config: Mapping[str, Any], **overrides: Any) -> "ViTConfig":
        """``SiglipTextModel``: bidirectional, ``final_layer_norm``, pooled = ``head(last token)``."""
        text = dict(config.get("text_config", config))
        fixed = dict(kind="text", causal=False, pre_norm=False, final_norm="all", pooling="last",
                     projection_dim=text.get("projection_size", text.get("hidden_size", 768)), projection_bias=True,
                     dtype=None)
        base = dict(hidden_act="gelu_pytorch_tanh", layer_norm_eps=1e-6, max_position_embeddings=64,
                    vocab_size=32000)
        return from_config_dict(cls, {**base, **text, **fixed}, **overrides)


# --------------------------------------------------------------------------------------------------------------
# Layers
# --------------------------------------------------------------------------------------------------------------


def LayerNorm(dim: int, *, eps: float) -> CoreLayerNorm:
    """Affine LayerNorm over the last axis, fp32 statistics and output."""
    return CoreLayerNorm(dim, (EMBED,), eps=eps)


def dense_attention(q: jax.Array, k: jax.Array, v: jax.Array, allowed: jax.Array) -> jax.Array:
    """(B, S, H, D) softmax attention, scale 1/sqrt(D), fp32; ``allowed`` (B, Sq, Sk) bool. For short text only."""
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32) * q.shape[-1] ** -0.5
    logits = jnp.where(allowed[:, None], logits, jnp.finfo(jnp.float32).min)
    probs = jax.nn.softmax(logits, axis=-1)
    return jnp.einsum("bhqk,bkhd->bqhd", probs, v.astype(jnp.float32), preferred_element_type=jnp.float32)


class ViTAttention(nnx.Module):
    def __init__(self, cfg: ViTConfig, *, rngs: nnx.Rngs):
        d, dt = cfg.hidden_size, cfg.dtype
        self.heads = cfg.num_attention_heads
        self.q_proj = Linear(d, d, (EMBED, HEADS), dtype=dt, rngs=rngs, fp32_out=True)
        self.k_proj = Linear(d, d, (EMBED, HEADS), dtype=dt, rngs=rngs, fp32_out=True)
        self.v_proj = Linear(d, d, (EMBED, HEADS), dtype=dt, rngs=rngs, fp32_out=True)
        self.out_proj = Linear(d, d, (HEADS, EMBED), dtype=dt, rngs=rngs, fp32_out=True)

    def __call__(self, x: jax.Array, kv_mask: jax.Array | None, allowed: jax.Array | None) -> jax.Array:
        b, n, d = x.shape
        h = self.heads
        q, k, v = (p(x).reshape(b, n, h, d // h) for p in (self.q_proj, self.k_proj, self.v_proj))
        out = dense_attention(q, k, v, allowed) if allowed is not None else attention(q, k, v, kv_mask=kv_mask)
        return self.out_proj(out.reshape(b, n, d))


class ViTMLP(nnx.Module):
    def __init__(self, cfg: ViTConfig, *, rngs: nnx.Rngs):
        self.act = ACTIVATIONS[cfg.hidden_act]
        self.fc1 = Linear(cfg.hidden_size, cfg.intermediate_size, (EMBED, MLP), dtype=cfg.dtype, rngs=rngs,
                          fp32_out=True)
        self.fc2 = Linear(cfg.intermediate_size, cfg.hidden_size, (MLP, EMBED), dtype=cfg.dtype, rngs=rngs,
                          fp32_out=True)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.fc2(self.act(self.fc1(x)))


class ViTBlock(nnx.Module):
    def __init__(self, cfg: ViTConfig, *, rngs: nnx.Rngs):
        self.layer_norm1 = LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.self_attn = ViTAttention(cfg, rngs=rngs)
        self.layer_norm2 = LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.mlp = ViTMLP(cfg, rngs=rngs)

    def __call__(self, x: jax.Array, kv_mask: jax.Array | None, allowed: jax.Array | None) -> jax.Array:
        x = x + self.self_attn(self.layer_norm1(x), kv_mask, allowed)
        return x + self.mlp(self.layer_norm2(x))


def run_blocks(block_graphdef: nnx.GraphDef, stacked_block_state: nnx.State, x: jax.Array,
               kv_mask: jax.Array | None = None, allowed: jax.Array | None = None) -> jax.Array:
    """Run blocks stacked on the leading axis of ``stacked_block_state`` (any slice of it) with ``lax.scan``."""
    return scan_blocks(block_graphdef, stacked_block_state, x, kv_mask, allowed)


class AttentionPoolingHead(nnx.Module):
    """SigLIP's multi-head attention pooling: a learned probe attends over the tokens (``nn.MultiheadAttention``
    with a fused in-projection), then ``x + mlp(layernorm(x))``; returns (B, hidden)."""

    def __init__(self, cfg: ViTConfig, *, rngs: nnx.Rngs):
        d, dt = cfg.hidden_size, cfg.dtype
        self.heads = cfg.num_attention_heads
        self.probe = param(jax.random.normal(rngs.params(), (1, 1, d), dt), (None, None, EMBED))
        self.in_proj = Linear(d, 3 * d, (EMBED, None), dtype=dt, rngs=rngs, fp32_out=True)
        self.out_proj = Linear(d, d, (None, EMBED), dtype=dt, rngs=rngs, fp32_out=True)
        self.layernorm = LayerNorm(d, eps=cfg.layer_norm_eps)
        self.mlp = ViTMLP(cfg, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        b, n, d = x.shape
        h = self.heads
        w = self.in_proj.kernel[...]
        bias = self.in_proj.bias[...].astype(jnp.float32)
        probe = jnp.broadcast_to(self.probe[...], (b, 1, d))

        def proj(inp, i):
            y = jnp.matmul(inp.astype(w.dtype), w[:, i * d : (i + 1) * d], preferred_element_type=jnp.float32)
            return (y + bias[i * d : (i + 1) * d]).reshape(b, -1, h, d // h)

        out = attention(proj(probe, 0), proj(x, 1), proj(x, 2)).reshape(b, 1, d)
        out = self.out_proj(out)
        out = out + self.mlp(self.layernorm(out))
        return out[:, 0]


# --------------------------------------------------------------------------------------------------------------
# Tower
# --------------------------------------------------------------------------------------------------------------


class ViTEncoder(nnx.Module):
    """``__call__(inputs, attention_mask=None) -> (last_hidden_state, pooled)``, both float32 (pooled is None
    without pooling). ``inputs``: (B, C, S, S) pixels for vision towers, (B, L) token ids for text towers."""

    def __init__(self, cfg: ViTConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        d, dt = cfg.hidden_size, cfg.dtype
        if cfg.kind == "vision":
            p = cfg.patch_size
            self.patch_kernel = param(
                nnx.initializers.lecun_normal()(rngs.params(), (p, p, cfg.num_channels, d), dt),
                (None, None, None, EMBED),
            )
            self.patch_bias = param(jnp.zeros((d,), dt), (EMBED,)) if cfg.patch_bias else None
            self.class_embedding = (
                param(jax.random.normal(rngs.params(), (d,), dt), (EMBED,)) if cfg.class_token else None
            )
        else:
            self.token_embedding = param(jax.random.normal(rngs.params(), (cfg.vocab_size, d), dt) * 0.02,
                                         (VOCAB, EMBED))
        self.position_embedding = param(
            jax.random.normal(rngs.params(), (cfg.num_positions, d), dt) * 0.02, (None, EMBED)
        )
        self.pre_norm = LayerNorm(d, eps=cfg.layer_norm_eps) if cfg.pre_norm else None
        self.blocks = stacked(lambda r: ViTBlock(cfg, rngs=r), cfg.num_hidden_layers, rngs)
        self.final_norm = LayerNorm(d, eps=cfg.layer_norm_eps) if cfg.final_norm else None
        self.head = AttentionPoolingHead(cfg, rngs=rngs) if cfg.pooling == "map" else None
        self.projection = (
            Linear(d, cfg.projection_dim, (EMBED, None), dtype=dt, rngs=rngs, bias=cfg.projection_bias,
                   fp32_out=True)
            if cfg.projection_dim
            else None
        )

    def embed(self, inputs: jax.Array) -> jax.Array:
        """``hidden_states[0]`` (B, S, hidden) float32."""
        cfg = self.cfg
        if cfg.kind == "text":
            ids = jnp.asarray(inputs, jnp.int32)
            n = ids.shape[1]
            if n > cfg.max_position_embeddings:
                raise ValueError(f"{n} tokens exceed max_position_embeddings={cfg.max_position_embeddings}")
            x = jnp.take(self.token_embedding[...], ids, axis=0).astype(jnp.float32)
            x = x + self.position_embedding[...][:n].astype(jnp.float32)[None]
        else:
            if inputs.shape[-2:] != (cfg.image_size, cfg.image_size):
                raise ValueError(f"pixel_values are {inputs.shape[-2:]}, the model takes {cfg.image_size}^2")
            k = self.patch_kernel[...]
            x = jnp.moveaxis(jnp.asarray(inputs).astype(k.dtype), 1, -1)
            x = jax.lax.conv_general_dilated(
                x, k, (cfg.patch_size,) * 2, "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                preferred_element_type=jnp.float32,
            )
            b = x.shape[0]
            x = x.reshape(b, -1, cfg.hidden_size)
            if self.patch_bias is not None:
                x = x + self.patch_bias[...].astype(jnp.float32)
            if self.class_embedding is not None:
                cls = jnp.broadcast_to(self.class_embedding[...].astype(jnp.float32), (b, 1, cfg.hidden_size))
                x = jnp.concatenate([cls, x], axis=1)
            x = x + self.position_embedding[...].astype(jnp.float32)[None]
        return self.pre_norm(x) if self.pre_norm is not None else x

    def _masks(self, n: int, b: int, attention_mask: jax.Array | None) -> tuple[jax.Array | None, jax.Array | None]:
        kv_mask = None if attention_mask is None else jnp.asarray(attention_mask) > 0
        if not self.cfg.causal:
            return kv_mask, None
        allowed = jnp.broadcast_to(jnp.tril(jnp.ones((n, n), bool))[None], (b, n, n))
        if kv_mask is not None:
            allowed = allowed & kv_mask[:, None, :]
        return None, allowed

    def hidden_state(self, inputs: jax.Array, index: int = -1, attention_mask: jax.Array | None = None) -> jax.Array:
        """transformers' ``hidden_states[index]`` (B, S, hidden) float32; runs only the layers needed.

        Wan's image embedding is CLIP vision's ``index=-2`` (the output of the second-to-last layer).
        """
        x = self.embed(inputs)
        layers = index % (self.cfg.num_hidden_layers + 1)
        graphdef, state = nnx.split(self.blocks)
        state = jax.tree.map(lambda a: a[:layers], state)
        kv_mask, allowed = self._masks(x.shape[1], x.shape[0], attention_mask)
        return run_blocks(graphdef, state, x, kv_mask, allowed)

    def __call__(self, inputs: jax.Array, attention_mask: jax.Array | None = None) -> tuple[jax.Array, Any]:
        cfg = self.cfg
        last = self.hidden_state(inputs, -1, attention_mask)
        if cfg.final_norm == "all":
            last = self.final_norm(last)
        if cfg.pooling is None:
            return last, None
        if cfg.pooling == "first":
            pooled = last[:, 0]
        elif cfg.pooling == "last":
            pooled = last[:, -1]
        elif cfg.pooling == "map":
            pooled = self.head(last)
        else:  # "eos"
            ids = jnp.asarray(inputs, jnp.int32)
            pos = jnp.argmax(ids, axis=-1) if cfg.eos_token_id == 2 else jnp.argmax(ids == cfg.eos_token_id, axis=-1)
            pooled = jnp.take_along_axis(last, pos[:, None, None], axis=1)[:, 0]
        if cfg.final_norm == "pooled":
            pooled = self.final_norm(pooled)
        if self.projection is not None:
            pooled = self.projection(pooled)
        return last, pooled


# --------------------------------------------------------------------------------------------------------------
# Checkpoint conversion (transformers names; the tower prefix is optional)
# --------------------------------------------------------------------------------------------------------------

def _probe(w: np.ndarray) -> np.ndarray:
    return w.reshape(1, 1, -1)


def _rules(tower: str) -> tuple[KeyRule, ...]:
    """Key table of one tower; its ``vision_model.`` / ``text_model.`` prefix is optional."""
    p = rf"(?:{tower}\.)?"
    lay = p + r"encoder\.layers\.(\d+)\."
    return (
        KeyRule(p + r"embeddings\.class_embedding", "class_embedding"),
        KeyRule(p + r"embeddings\.patch_embedding\.weight", "patch_kernel", conv),
        KeyRule(p + r"embeddings\.patch_embedding\.bias", "patch_bias"),
        KeyRule(p + r"embeddings\.position_embedding\.weight", "position_embedding"),
        KeyRule(p + r"embeddings\.token_embedding\.weight", "token_embedding"),
        KeyRule(p + r"pre_layrnorm\.weight", "pre_norm/scale"),
        KeyRule(p + r"pre_layrnorm\.bias", "pre_norm/bias"),
        KeyRule(p + r"(?:post_layernorm|final_layer_norm)\.weight", "final_norm/scale"),
        KeyRule(p + r"(?:post_layernorm|final_layer_norm)\.bias", "final_norm/bias"),
        KeyRule(lay + r"self_attn\.(q_proj|k_proj|v_proj|out_proj)\.weight", "blocks/self_attn/{2}/kernel", linear, 1),
        KeyRule(lay + r"self_attn\.(q_proj|k_proj|v_proj|out_proj)\.bias", "blocks/self_attn/{2}/bias", None, 1),
        KeyRule(lay + r"mlp\.(fc1|fc2)\.weight", "blocks/mlp/{2}/kernel", linear, 1),
        KeyRule(lay + r"mlp\.(fc1|fc2)\.bias", "blocks/mlp/{2}/bias", None, 1),
        KeyRule(lay + r"(layer_norm1|layer_norm2)\.weight", "blocks/{2}/scale", None, 1),
        KeyRule(lay + r"(layer_norm1|layer_norm2)\.bias", "blocks/{2}/bias", None, 1),
        # SigLIP vision: attention pooling head
        KeyRule(p + r"head\.probe", "head/probe", _probe),
        KeyRule(p + r"head\.attention\.in_proj_weight", "head/in_proj/kernel", linear),
        KeyRule(p + r"head\.attention\.in_proj_bias", "head/in_proj/bias"),
        KeyRule(p + r"head\.attention\.out_proj\.weight", "head/out_proj/kernel", linear),
        KeyRule(p + r"head\.attention\.out_proj\.bias", "head/out_proj/bias"),
        KeyRule(p + r"head\.layernorm\.weight", "head/layernorm/scale"),
        KeyRule(p + r"head\.layernorm\.bias", "head/layernorm/bias"),
        KeyRule(p + r"head\.mlp\.(fc1|fc2)\.weight", "head/mlp/{1}/kernel", linear),
        KeyRule(p + r"head\.mlp\.(fc1|fc2)\.bias", "head/mlp/{1}/bias"),
        # pooled projections: CLIP text_projection (no bias), SigLIP text head
        KeyRule(r"text_projection\.weight", "projection/kernel", linear),
        KeyRule(p + r"head\.weight", "projection/kernel", linear),
        KeyRule(p + r"head\.bias", "projection/bias"),
    )


VISION_RULES: tuple[KeyRule, ...] = _rules("vision_model")
TEXT_RULES: tuple[KeyRule, ...] = _rules("text_model")


def vit_rules(cfg: ViTConfig) -> tuple[KeyRule, ...]:
    return VISION_RULES if cfg.kind == "vision" else TEXT_RULES


def vit_ignore(cfg: ViTConfig) -> tuple[str, ...]:
    """Keys of a full two-tower checkpoint (``CLIPModel``, ``SiglipModel``) that this tower does not use."""
    other = r"text_model\..*" if cfg.kind == "vision" else r"vision_model\..*"
    keys = [other, r".*position_ids", r"logit_scale", r"logit_bias", r"visual_projection\.weight"]
    if cfg.kind == "vision" or cfg.projection_dim is None:
        keys.append(r"text_projection\.weight")
    return tuple(keys)


def load_vit(cfg: ViTConfig, tensors: Mapping[str, Any], *, component: str = "ViT encoder",
             put: Any = None) -> ViTEncoder:
    """Build a :class:`ViTEncoder` from a transformers state dict (key -> array or zero-arg loader)."""
    graphdef, state, flat = abstract_model(lambda: ViTEncoder(cfg, rngs=nnx.Rngs(0)))
    values = convert(tensors, vit_rules(cfg), flat, component=component, ignore=vit_ignore(cfg))
    return materialize(graphdef, state, values, put=put)
