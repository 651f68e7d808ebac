"""Decoder-only LLM used as a text encoder: Llama-3, Qwen2.5-VL's text tower, Gemma-2, Gemma-3 and Gemma-4 are
configurations of it.

Video families take a decoder LLM's hidden states as prompt embeddings (HunyuanVideo: LLaVA-Llama-3-8B,
``hidden_states[-3]`` after a chat template with ``crop_start``; Cosmos / HunyuanVideo-1.5: Qwen2.5-VL; LTX-2:
Gemma-3, all layers; SANA-Video: Gemma-2's last hidden state). One model covers them, driven by the checkpoint's
transformers ``config.json``:

* token embedding (Gemma: times ``sqrt(hidden_size)`` rounded to the weight dtype); pre-norm blocks of
  attention then gated MLP ``down(act(gate x) * up x)``, both added to a float32 residual stream; a final norm;
* RMS norm with fp32 statistics, ``x * w`` (Llama, Qwen) or Gemma's ``x * (1 + w)``; Gemma's extra
  post-attention / post-MLP norms and (Gemma-3) per-head q/k norms;
* grouped-query attention (``num_key_value_heads``), q/k/v biases where the model has them (Qwen2), scale
  ``head_dim ** -0.5`` or Gemma's ``query_pre_attn_scalar ** -0.5``, optional logit soft-capping, fp32 softmax;
* rotate-half RoPE from :mod:`vidax_core.nn.rope`: plain, ``linear`` and ``llama3`` frequency scaling, partial
  rotary, Gemma-4's ``proportional`` (the whole head rotates, frequencies past ``partial_rotary_factor`` are 0),
  Qwen2.5-VL's mRoPE (position ids (3, B, S));
* Gemma-4 text tower (``gemma4_unified`` and ``gemma4``): ``x * w`` norms with Gemma's sandwich layout, attention
  scale 1 (q/k normed), a gain-free RMS norm of the values, full-attention layers whose values are their keys'
  projection (``attention_k_eq_v``, with their own head size and KV heads), each layer's output times a learned
  scalar; the last ``num_kv_shared_layers`` layers reuse the keys and values of the last earlier layer of their
  attention type (they have no k/v projections; ``use_double_wide_mlp`` doubles their MLP); ``gemma4``'s per-layer
  inputs (``hidden_size_per_layer_input``): a second token embedding plus a projection of the input embeddings give
  each layer a small vector that gates a residual branch after its MLP;
* causal masks with key padding (left or right); per-layer ``layer_types`` mixing sliding-window and full
  attention, each type with its own RoPE (Gemma-3: local theta 1e4, global 1e6); per-type head size and KV heads
  (a Gemma-4-like layout) put the layers into several "kinds", one stacked parameter tree per kind; Gemma-2
  alternates sliding and full layers under one RoPE and soft-caps every layer's attention logits.
* ``bidirectional``: an encoder's attention (T5Gemma2's, :mod:`vidax_core.encoders.t5gemma2`): every query sees
  every key but padding, a sliding window centred on the query (``(w + 1) // 2`` keys back, ``w // 2`` ahead);
  ``eoi_token_index``: the token whose embedding is a learned ``eoi_embedding`` (unscaled), as T5Gemma2's.

Layers with full attention only (Llama, Qwen) run :func:`vidax_core.attention.attention` with ``causal=True`` and
the key-padding mask (KV heads repeated per group). Kinds holding sliding-window layers (Gemma-3), or with logit
soft-capping, which that dispatcher does not take, use a dense-mask einsum over the grouped heads: text prompts
are a few hundred tokens. Masked logits are ``finfo(float32).min`` in both.

Layers of one kind live in ONE stacked tree (leading ``layers`` axis) run with ``lax.scan``; a per-layer index
picks the layer's type (mask and RoPE table). ``__call__`` returns every hidden state like transformers'
``output_hidden_states=True`` (embeddings, each layer's output, the last one after the final norm).

Precision: parameters and matmuls in ``cfg.dtype`` (fp32 accumulation); norms, RoPE, softmax and the residual
stream in float32; hidden states returned in float32. Logical axes: ``vocab``, ``embed``, ``heads``,
``kv_heads``, ``mlp``, ``layers``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from typing import Any, Iterator, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.attention import attention
from vidax_core.encoders.policy import place_tower, resolve_dtype
from vidax_core.io.arch import from_config_dict
from vidax_core.errors import UserError
from vidax_core.io.convert import KeyRule, convert, linear
from vidax_core.nn import rope
from vidax_core.nn.layers import Linear, param, stacked
from vidax_core.nn.norms import rms_norm
from vidax_core.parallel.streamed import is_streamed, jit_unless_streamed, run_stack, stack_depth
from vidax_core.nn.state import abstract_model

VOCAB, EMBED, HEADS, KV_HEADS, MLP = "vocab", "embed", "heads", "kv_heads", "mlp"
FULL, SLIDING = "full_attention", "sliding_attention"
MASKED_LOGIT = float(jnp.finfo(jnp.float32).min)

# Megatron TP for these models on top of the default rules (heads and mlp -> tp): the K/V projections are
# column-parallel over KV heads too, so each device holds whole query groups with their KV head.
SHARD_RULES: tuple[tuple[str, Any], ...] = ((KV_HEADS, "tp"),)

ACTIVATIONS = {
    "silu": jax.nn.silu,
    "swish": jax.nn.silu,
    "gelu": lambda x: jax.nn.gelu(x, approximate=False),
    "gelu_new": lambda x: jax.nn.gelu(x, approximate=True),
    "gelu_pytorch_tanh": lambda x: jax.nn.gelu(x, approximate=True),
    "relu": jax.nn.relu,
}


# --------------------------------------------------------------------------------------------------------------
# Config
# --------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RopeSpec:
    """RoPE of one layer type: base ``theta``; ``rope_type`` default | linear | llama3 (``factor`` and the llama3
    band parameters); ``partial_rotary_factor`` (fraction of the head that rotates); ``mrope_section`` (Qwen)."""

    theta: float = 10000.0
    rope_type: str = "default"
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192
    partial_rotary_factor: float = 1.0
    mrope_section: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.rope_type not in ("default", "linear", "llama3", "proportional"):
            raise UserError(f"rope_type={self.rope_type!r} is not supported: expected default, linear, llama3 or "
                            "proportional")
        for name in ("theta", "factor", "low_freq_factor", "high_freq_factor"):  # a negative theta: NaN angles
            value = getattr(self, name)
            if not (math.isfinite(value) and 0 < value <= 1e12):
                raise UserError(f"RoPE {'rope_theta' if name == 'theta' else name}={value} must be a positive "
                                "number: check the text encoder's config.json")
        if not 0 < self.partial_rotary_factor <= 1:
            raise UserError(f"RoPE partial_rotary_factor={self.partial_rotary_factor} must be above 0 and at most "
                            "1: check the text encoder's config.json")
        if self.original_max_position_embeddings < 1:
            raise UserError(f"RoPE original_max_position_embeddings={self.original_max_position_embeddings} must be "
                            "at least 1: check the text encoder's config.json")

    def rot_dim(self, head_dim: int) -> int:
        if self.rope_type == "proportional":
            return head_dim
        return int(head_dim * self.partial_rotary_factor)

    def inv_freq(self, head_dim: int) -> np.ndarray:
        dim = self.rot_dim(head_dim)
        if self.rope_type == "linear":
            return rope.inv_freq(dim, self.theta, linear_factor=self.factor)
        if self.rope_type == "proportional":  # the first partial_rotary_factor of the pairs turn, the rest stay
            turning = int(self.partial_rotary_factor * head_dim // 2)
            freqs = rope.inv_freq(head_dim, self.theta, linear_factor=self.factor)
            return np.where(np.arange(head_dim // 2) < turning, freqs, 0.0)
        if self.rope_type == "llama3":
            return rope.inv_freq(dim, self.theta, llama3=rope.Llama3Scaling(
                self.factor, self.low_freq_factor, self.high_freq_factor, self.original_max_position_embeddings))
        return rope.inv_freq(dim, self.theta)


@dataclasses.dataclass(frozen=True)
class DecoderLLMConfig:
    """Architecture of one decoder LLM; field names follow transformers' config.json where one exists.

    ``layer_types`` holds one of ``full_attention`` / ``sliding_attention`` per layer; ``rope`` maps a layer type
    to its :class:`RopeSpec`; ``head_dim_per_type`` / ``kv_heads_per_type`` override ``head_dim`` /
    ``num_key_value_heads`` for a layer type. The booleans select the family's block layout (Llama: all False;
    Qwen2: ``qkv_bias``; Gemma-2: ``gemma_norm``, ``sandwich_norms``, ``scale_embeddings`` with
    ``attn_logit_softcapping``; Gemma-3: the same with ``qk_norm``).
    """

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    layer_types: tuple[str, ...]
    rope: tuple[tuple[str, RopeSpec], ...]
    rms_norm_eps: float = 1e-6
    hidden_act: str = "silu"
    attention_bias: bool = False  # bias on q, k, v and o (Llama's attention_bias)
    qkv_bias: bool = False  # bias on q, k, v only (Qwen2)
    mlp_bias: bool = False
    gemma_norm: bool = False  # RMS norm scales by (1 + w)
    sandwich_norms: bool = False  # norms after attention and after the MLP too (Gemma-2/3)
    qk_norm: bool = False  # RMS norm of each q / k head (Gemma-3)
    scale_embeddings: bool = False  # embeddings times sqrt(hidden_size) (Gemma)
    query_pre_attn_scalar: float | None = None  # attention scale query_pre_attn_scalar ** -0.5 (Gemma)
    attn_logit_softcapping: float | None = None
    sliding_window: int | None = None
    head_dim_per_type: tuple[tuple[str, int], ...] = ()
    kv_heads_per_type: tuple[tuple[str, int], ...] = ()
    value_norm: bool = False  # gain-free RMS norm of each value head (Gemma-4)
    k_eq_v_types: tuple[str, ...] = ()  # layer types whose values are the key projection (Gemma-4 attention_k_eq_v)
    layer_scalar: bool = False  # each layer's output times a learned scalar (Gemma-4)
    kv_shared_layers: int = 0  # the last N layers reuse an earlier layer's keys and values (num_kv_shared_layers)
    double_wide_shared_mlp: bool = False  # those layers' MLP is twice as wide (use_double_wide_mlp)
    hidden_size_per_layer_input: int = 0  # per-layer input width (Gemma-4's per-layer embeddings); 0 = none
    vocab_size_per_layer_input: int = 0
    bidirectional: bool = False  # an encoder: no causal mask, sliding windows centred on the query (T5Gemma2)
    eoi_token_index: int | None = None  # this token's embedding is the learned eoi_embedding (T5Gemma2)
    dtype: Any = None  # None: the run's encoder dtype (vidax_core.encoders.policy), float32 outside a run

    def __post_init__(self) -> None:
        resolve_dtype(self)
        if len(self.layer_types) != self.num_hidden_layers:
            raise UserError(f"layer_types has {len(self.layer_types)} entries for {self.num_hidden_layers} layers")
        unknown = set(self.layer_types) - {FULL, SLIDING}
        if unknown:
            raise UserError(f"layer types {sorted(unknown)} are not supported: expected {FULL} or {SLIDING}")
        if SLIDING in self.layer_types and not self.sliding_window:
            raise UserError("sliding_attention layers need a sliding_window in the config")
        for name in ("query_pre_attn_scalar", "attn_logit_softcapping"):  # the attention divides by them
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise UserError(f"{name}={value} must be a positive number: check the text encoder's config.json")
        if self.hidden_act not in ACTIVATIONS:
            raise UserError(f"hidden_act={self.hidden_act!r} is not supported: expected one of {sorted(ACTIVATIONS)}")
        for t in set(self.layer_types):
            if t not in dict(self.rope):
                raise UserError(f"no RoPE parameters for layer type {t}")
            if self.num_attention_heads % self.kv_heads(t):
                raise UserError(
                    f"num_attention_heads={self.num_attention_heads} is not a multiple of the "
                    f"{self.kv_heads(t)} key/value heads of {t} layers"
                )
            spec, hd = self.rope_spec(t), self.head_dim_of(t)
            if spec.rot_dim(hd) % 2 or spec.rot_dim(hd) > hd:
                raise UserError(f"{t}: partial_rotary_factor={spec.partial_rotary_factor} of head_dim={hd} is invalid")
            if spec.mrope_section is not None and sum(spec.mrope_section) != spec.rot_dim(hd) // 2:
                raise UserError(
                    f"mrope_section {list(spec.mrope_section)} "
                    f"must sum to half the rotary dim ({spec.rot_dim(hd) // 2})"
                )
        if not 0 <= self.kv_shared_layers < self.num_hidden_layers:
            raise UserError(f"num_kv_shared_layers={self.kv_shared_layers} must be below num_hidden_layers="
                            f"{self.num_hidden_layers}: a shared layer reuses the keys and values of an earlier one")
        first = self.num_hidden_layers - self.kv_shared_layers
        missing = sorted(set(self.layer_types[first:]) - set(self.layer_types[:first]))
        if missing:
            raise UserError(f"num_kv_shared_layers={self.kv_shared_layers}: no earlier layer of type {missing[0]} "
                            "produces the keys and values the shared layers of that type reuse")

    def head_dim_of(self, layer_type: str) -> int:
        return dict(self.head_dim_per_type).get(layer_type, self.head_dim)

    def kv_heads(self, layer_type: str) -> int:
        return dict(self.kv_heads_per_type).get(layer_type, self.num_key_value_heads)

    def rope_spec(self, layer_type: str) -> RopeSpec:
        return dict(self.rope)[layer_type]

    def kv_mode(self, layer: int) -> str | None:
        """transformers' ``kv_sharing_modes``: ``"reuse"`` for the last ``kv_shared_layers`` layers, ``"store"`` for
        the last earlier layer of each type (its keys and values are reused), else None."""
        first = self.num_hidden_layers - self.kv_shared_layers
        if layer >= first:
            return "reuse"
        t = self.layer_types[layer]
        if self.kv_shared_layers and t not in self.layer_types[layer + 1:first]:
            return "store"
        return None

    def kind_key(self, layer: int) -> tuple[int, int, int, bool, bool, int]:
        """Layers with the same key share parameter shapes and one stacked tree: (head size, KV heads, rotary
        dim, values from the key projection, keys and values reused, MLP width)."""
        t = self.layer_types[layer]
        hd = self.head_dim_of(t)
        shared = self.kv_mode(layer) == "reuse"
        mlp = self.intermediate_size * (2 if shared and self.double_wide_shared_mlp else 1)
        return hd, self.kv_heads(t), self.rope_spec(t).rot_dim(hd), t in self.k_eq_v_types, shared, mlp

    @property
    def kinds(self) -> tuple[tuple[int, int, int, bool, bool, int], ...]:
        """Distinct kind keys in order of first appearance."""
        return tuple(dict.fromkeys(self.kind_key(i) for i in range(self.num_hidden_layers)))

    @property
    def uses_mrope(self) -> bool:
        return any(spec.mrope_section is not None for _, spec in self.rope)

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> "DecoderLLMConfig":
        """From a transformers config dict of a Llama, Qwen2 / Qwen2.5-VL, Gemma-2, Gemma-3 or Gemma-4 model (or
        the composite LLaVA / Qwen2.5-VL / Gemma config holding it as ``text_config``); old (``rope_theta``,
        ``rope_scaling``, ``rope_local_base_freq``) and new (``rope_parameters``) RoPE fields are both read."""
        try:
            return cls._from_config(config, **overrides)
        except KeyError as e:
            raise UserError(f"decoder LLM config.json has no {e.args[0]!r}: check the text encoder's config") from None
        except UserError:
            raise
        except (TypeError, ValueError, AttributeError, OverflowError) as e:  # a text where a number is due...
            raise UserError(f"decoder LLM config.json holds an unusable value ({' '.join(str(e).split())[:160]}): "
                            "check the text encoder's config") from None

    @classmethod
    def _from_config(cls, config: Mapping[str, Any], **overrides: Any) -> "DecoderLLMConfig":
        c = dict(config)
        if isinstance(c.get("text_config"), Mapping):
            outer = c
            c = dict(c["text_config"])
            if "model_type" not in c and outer.get("model_type"):
                c["model_type"] = outer["model_type"]
        model_type = str(c.get("model_type", "llama"))
        family = _family(model_type)
        fields: dict[str, Any] = {}
        heads = int(c["num_attention_heads"])
        fields["head_dim"] = int(c.get("head_dim") or c["hidden_size"] // heads)
        fields["num_key_value_heads"] = int(c.get("num_key_value_heads") or heads)
        n = int(c["num_hidden_layers"])
        if family == "gemma2":
            fields.update(_gemma2_fields(c, fields["head_dim"]))
            default_types = [SLIDING if (i + 1) % 2 else FULL for i in range(n)]
        elif family in ("gemma", "gemma4", "gemma4_ple"):
            fields.update(gemma_norm=True, sandwich_norms=True, qk_norm=True, scale_embeddings=True,
                          hidden_act=c.get("hidden_activation") or c.get("hidden_act") or "gelu_pytorch_tanh",
                          query_pre_attn_scalar=float(c.get("query_pre_attn_scalar", fields["head_dim"])),
                          attention_bias=bool(c.get("attention_bias", False)))
            if family in ("gemma4", "gemma4_ple"):
                fields.update(_gemma4_fields(c, per_layer_inputs=family == "gemma4_ple"))
            elif c.get("use_bidirectional_attention"):
                raise UserError("Gemma-3 with use_bidirectional_attention is not supported: it is not a causal encoder")
            pattern = int(c.get("sliding_window_pattern", 6))
            default_types = [SLIDING if (i + 1) % pattern else FULL for i in range(n)]
        else:
            fields["hidden_act"] = c.get("hidden_act", "silu")
            if family == "qwen2":
                fields["qkv_bias"] = True
            else:
                fields["attention_bias"] = bool(c.get("attention_bias", False))
                fields["mlp_bias"] = bool(c.get("mlp_bias", False))
            use_sw = bool(c.get("use_sliding_window", False)) and c.get("sliding_window")
            max_window = int(c.get("max_window_layers", n))
            default_types = [SLIDING if use_sw and i >= max_window else FULL for i in range(n)]
        layer_types = tuple(c.get("layer_types") or default_types)
        fields["layer_types"] = layer_types
        if SLIDING in layer_types:
            fields["sliding_window"] = int(c["sliding_window"] if family != "gemma2" else c.get("sliding_window", 4096))
        fields["rope"] = _rope_specs(c, family, fields["head_dim"], layer_types)
        fields["rms_norm_eps"] = float(c.get("rms_norm_eps") or (1e-5 if model_type.startswith("qwen2_5_vl") else 1e-6))
        softcap = c.get("attn_logit_softcapping", 50.0 if family == "gemma2" else None)  # Gemma-2's default: 50
        if softcap is not None:
            fields["attn_logit_softcapping"] = float(softcap)
        for key in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads"):
            fields[key] = int(c[key])
        return from_config_dict(cls, fields, **overrides)


def _gemma2_fields(c: Mapping[str, Any], head_dim: int) -> dict[str, Any]:
    """What a Gemma-2 config sets, as transformers' ``Gemma2Model`` reads it: Gemma's ``(1 + w)`` RMS norms around
    attention and MLP and its scaled embeddings, but no q/k norm; scale ``query_pre_attn_scalar ** -0.5`` (default
    256); attention logits soft-capped (``attn_logit_softcapping``, default 50; null turns it off); sliding and full
    layers alternating from a sliding first (``layer_types`` when given; window ``sliding_window``, default 4096);
    one RoPE for both layer types (``rope_theta``, default 1e4, or ``rope_parameters``). ``final_logit_softcapping``
    caps the language-model head's logits, which an encoder never computes: it is read by nobody here."""
    if c.get("use_bidirectional_attention"):
        raise UserError("Gemma-2 with use_bidirectional_attention is not supported: it is not a causal encoder")
    return dict(gemma_norm=True, sandwich_norms=True, qk_norm=False, scale_embeddings=True,
                hidden_act=c.get("hidden_activation") or c.get("hidden_act") or "gelu_pytorch_tanh",
                query_pre_attn_scalar=float(c.get("query_pre_attn_scalar") or 256),
                attention_bias=bool(c.get("attention_bias", False)))


def _gemma4_fields(c: Mapping[str, Any], *, per_layer_inputs: bool) -> dict[str, Any]:
    """What a Gemma-4 text config changes from Gemma-3. Full layers have their own head size and KV heads:
    transformers writes them as ``per_layer_config`` (layer index -> overrides), released configs as
    ``global_head_dim`` (default 512) and, with ``attention_k_eq_v``, ``num_global_key_value_heads``.
    ``num_kv_shared_layers`` / ``use_double_wide_mlp`` as both transformers models read them; the per-layer inputs
    only for ``gemma4`` (``per_layer_inputs``; transformers' ``gemma4_unified`` has none and ignores the keys),
    whose ``hidden_size_per_layer_input`` defaults to 256 there."""
    unsupported = []
    if c.get("use_bidirectional_attention") == "all":
        unsupported.append("use_bidirectional_attention='all' (not a causal encoder)")
    if c.get("enable_moe_block"):
        unsupported.append("enable_moe_block (mixture-of-experts layers)")
    if unsupported:
        raise UserError("Gemma-4 text config with " + ", ".join(unsupported) + " is not supported")
    k_eq_v = bool(c.get("attention_k_eq_v", False))
    fields: dict[str, Any] = dict(gemma_norm=False, query_pre_attn_scalar=1.0, value_norm=True, layer_scalar=True,
                                  k_eq_v_types=(FULL,) if k_eq_v else (),
                                  kv_shared_layers=int(c.get("num_kv_shared_layers") or 0),
                                  double_wide_shared_mlp=bool(c.get("use_double_wide_mlp", False)))
    if per_layer_inputs:
        width = c.get("hidden_size_per_layer_input", 256)
        fields["hidden_size_per_layer_input"] = int(width or 0)
        if fields["hidden_size_per_layer_input"]:
            fields["vocab_size_per_layer_input"] = int(c.get("vocab_size_per_layer_input") or 262_144)
    per_layer = c.get("per_layer_config")
    if isinstance(per_layer, Mapping):
        types = list(c.get("layer_types") or [])
        by_index = {int(k): v for k, v in per_layer.items()}  # transformers writes "05"-style keys
        per_type: dict[str, dict] = {}
        for i, t in enumerate(types):
            o = dict(by_index.get(i) or {})
            if per_type.setdefault(t, o) != o:
                raise UserError(f"Gemma-4 per_layer_config gives {t} layers different head sizes or KV heads")
        fields["head_dim_per_type"] = tuple((t, int(o["head_dim"])) for t, o in per_type.items() if "head_dim" in o)
        fields["kv_heads_per_type"] = tuple((t, int(o["num_key_value_heads"])) for t, o in per_type.items()
                                            if "num_key_value_heads" in o)
        return fields
    fields["head_dim_per_type"] = ((FULL, int(c.get("global_head_dim") or 512)),)
    if k_eq_v and c.get("num_global_key_value_heads") is not None:
        fields["kv_heads_per_type"] = ((FULL, int(c["num_global_key_value_heads"])),)
    return fields


def _family(model_type: str) -> str:
    if model_type.startswith("gemma"):
        if model_type in ("gemma4_unified", "gemma4_unified_text"):
            return "gemma4"
        if model_type in ("gemma4", "gemma4_text"):
            return "gemma4_ple"  # the per-layer-input generation
        if model_type in ("gemma2", "gemma2_text"):
            return "gemma2"
        if model_type not in ("gemma3", "gemma3_text"):
            raise UserError(f"model_type={model_type!r}: only Gemma-2, Gemma-3 and Gemma-4 are read from config.json; "
                            "build DecoderLLMConfig directly for other Gemma layouts")
        return "gemma"
    if model_type.startswith("qwen2"):
        return "qwen2"
    if model_type in ("llama", "llava", "mistral"):
        return "llama"
    raise UserError(f"model_type={model_type!r} is not a supported decoder LLM (llama, qwen2*, gemma2, gemma3, "
                    "gemma4, gemma4_unified)")


def _spec(params: Mapping[str, Any], theta: float, partial: float) -> RopeSpec:
    rope_type = params.get("rope_type", params.get("type", "default")) or "default"
    if rope_type in ("mrope", "default"):
        rope_type = "default"
    section = params.get("mrope_section")
    return RopeSpec(
        theta=float(params.get("rope_theta", theta)),
        rope_type=rope_type,
        factor=float(params.get("factor", 1.0)),
        low_freq_factor=float(params.get("low_freq_factor", 1.0)),
        high_freq_factor=float(params.get("high_freq_factor", 4.0)),
        original_max_position_embeddings=int(params.get("original_max_position_embeddings", 8192)),
        partial_rotary_factor=float(params.get("partial_rotary_factor", partial)),
        mrope_section=tuple(int(s) for s in section) if section is not None else None,
    )


def _rope_specs(c: Mapping[str, Any], family: str, head_dim: int, layer_types: Sequence[str]):
    params = c.get("rope_parameters") or {}
    scaling = c.get("rope_scaling") or {}
    partial = float(c.get("partial_rotary_factor", 1.0))
    if family in ("gemma", "gemma4", "gemma4_ple"):
        per_type = params if FULL in params or SLIDING in params else {}
        full = {"rope_theta": c.get("rope_theta", 1_000_000.0), **scaling, **(per_type.get(FULL) or {})}
        local = {"rope_theta": c.get("rope_local_base_freq", 10_000.0), **(per_type.get(SLIDING) or {})}
        specs = {FULL: _spec(full, 1_000_000.0, partial), SLIDING: _spec(local, 10_000.0, partial)}
    else:
        default_theta = 1_000_000.0 if family == "qwen2" else 10_000.0
        merged = {"rope_theta": c.get("rope_theta", default_theta), **scaling, **params}
        spec = _spec(merged, default_theta, partial)
        specs = {FULL: spec, SLIDING: spec}
    return tuple((t, specs[t]) for t in (FULL, SLIDING) if t in layer_types)


# --------------------------------------------------------------------------------------------------------------
# Layers
# --------------------------------------------------------------------------------------------------------------


class RMSNorm(nnx.Module):
    """The core's :func:`~vidax_core.nn.norms.rms_norm` with transformers' parameter name ``weight`` (``1 + w`` for
    Gemma); statistics and output in float32."""

    def __init__(self, dim: int, *, eps: float, plus_one: bool, names: tuple[str | None, ...] = (EMBED,)):
        self.eps, self.plus_one = eps, plus_one
        self.weight = param(jnp.zeros((dim,), jnp.float32) if plus_one else jnp.ones((dim,), jnp.float32), names)

    def __call__(self, x: jax.Array) -> jax.Array:
        return rms_norm(x, self.weight[...], eps=self.eps, offset=1.0 if self.plus_one else 0.0, out_dtype=jnp.float32)


class Attention(nnx.Module):
    """Grouped-query causal self-attention with rotate-half RoPE.

    ``core=True`` (layers with full attention only, no soft-capping): :func:`vidax_core.attention.attention` with
    ``causal=True`` and the key-padding mask, KV heads repeated per query group, q pre-scaled when the model's
    scale is not ``head_dim ** -0.5``. Otherwise a dense-mask einsum over the grouped heads (sliding windows,
    soft-capping), fine for text prompts of a few hundred tokens.
    """

    def __init__(self, cfg: DecoderLLMConfig, head_dim: int, kv_heads: int, *, core: bool, rngs: nnx.Rngs,
                 k_eq_v: bool = False, shared: bool = False):
        self.core = core and not cfg.attn_logit_softcapping
        self.causal = not cfg.bidirectional
        self.shared = shared  # keys and values come from an earlier layer: no k / v projections or key norm
        self.value_norm, self.eps = cfg.value_norm, cfg.rms_norm_eps
        self.num_heads, self.kv_heads, self.head_dim = cfg.num_attention_heads, kv_heads, head_dim
        self.scale = (cfg.query_pre_attn_scalar or head_dim) ** -0.5
        self.softcap = cfg.attn_logit_softcapping
        dt, h = cfg.dtype, cfg.hidden_size
        qkv_bias = cfg.attention_bias or cfg.qkv_bias
        self.q_proj = Linear(h, self.num_heads * head_dim, (EMBED, HEADS), dtype=dt, rngs=rngs, bias=qkv_bias)
        self.k_proj = (None if shared else
                       Linear(h, kv_heads * head_dim, (EMBED, KV_HEADS), dtype=dt, rngs=rngs, bias=qkv_bias))
        self.v_proj = (None if k_eq_v or shared else  # k_eq_v: values are the key projection (before the key norm)
                       Linear(h, kv_heads * head_dim, (EMBED, KV_HEADS), dtype=dt, rngs=rngs, bias=qkv_bias))
        self.o_proj = Linear(self.num_heads * head_dim, h, (HEADS, EMBED), dtype=dt, rngs=rngs,
                             bias=cfg.attention_bias)
        if cfg.qk_norm:
            self.q_norm = RMSNorm(head_dim, eps=cfg.rms_norm_eps, plus_one=cfg.gemma_norm, names=(None,))
            self.k_norm = (None if shared else
                           RMSNorm(head_dim, eps=cfg.rms_norm_eps, plus_one=cfg.gemma_norm, names=(None,)))
        else:
            self.q_norm = self.k_norm = None

    def __call__(self, x: jax.Array, cos: jax.Array, sin: jax.Array, visible: jax.Array,
                 kv: tuple[jax.Array, jax.Array] | None = None) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
        """x (B, S, hidden); cos/sin (B, S, pairs) float32; visible: the (B, S) key-padding mask when ``core``,
        else the (B, S, S) bool visibility (query, key); ``kv``: a shared layer's keys (normed, rotated) and values
        (normed), (B, S, kv_heads, head_dim) each. Returns the output and this layer's keys and values."""
        b, s, _ = x.shape
        hd, kvh = self.head_dim, self.kv_heads
        dt = self.q_proj.kernel[...].dtype
        q = self.q_proj(x).reshape(b, s, self.num_heads, hd)
        if self.q_norm is not None:
            q = self.q_norm(q)
        c, sn = cos[:, :, None, :], sin[:, :, None, :]
        q = rope.apply_rotate_half(q.astype(jnp.float32), c, sn)
        if self.shared:
            k, v = kv
        else:
            k = self.k_proj(x).reshape(b, s, kvh, hd)
            v = k if self.v_proj is None else self.v_proj(x).reshape(b, s, kvh, hd)
            if self.value_norm:
                v = rms_norm(v, eps=self.eps)
            if self.k_norm is not None:
                k = self.k_norm(k)
            k = rope.apply_rotate_half(k.astype(jnp.float32), c, sn).astype(dt)
        return self._attend(q, k, v, visible, dt), (k, v)

    def _attend(self, q, k, v, visible, dt):
        b, s = q.shape[:2]
        hd, kvh, g = self.head_dim, self.kv_heads, self.num_heads // self.kv_heads
        if self.core:
            factor = self.scale * math.sqrt(hd)  # the core attention scales by head_dim ** -0.5
            q = (q if factor == 1.0 else q * factor).astype(dt)
            out = attention(q, jnp.repeat(k, g, axis=2), jnp.repeat(v, g, axis=2), kv_mask=visible > 0,
                            causal=self.causal)
            return self.o_proj(out.astype(dt).reshape(b, s, self.num_heads * hd))
        q = q.astype(dt).reshape(b, s, kvh, g, hd)
        logits = jnp.einsum("bqkgd,bskd->bkgqs", q, k, preferred_element_type=jnp.float32) * self.scale
        if self.softcap:
            logits = jnp.tanh(logits / self.softcap) * self.softcap
        logits = jnp.where(visible[:, None, None], logits, MASKED_LOGIT)
        probs = jax.nn.softmax(logits, axis=-1).astype(v.dtype)
        out = jnp.einsum("bkgqs,bskd->bqkgd", probs, v, preferred_element_type=jnp.float32).astype(dt)
        return self.o_proj(out.reshape(b, s, self.num_heads * hd))


class GatedMLP(nnx.Module):
    """down(act(gate x) * up x)."""

    def __init__(self, cfg: DecoderLLMConfig, *, rngs: nnx.Rngs, width: int | None = None):
        dt, h, m, bias = cfg.dtype, cfg.hidden_size, width or cfg.intermediate_size, cfg.mlp_bias
        self.act = ACTIVATIONS[cfg.hidden_act]
        self.gate_proj = Linear(h, m, (EMBED, MLP), dtype=dt, rngs=rngs, bias=bias)
        self.up_proj = Linear(h, m, (EMBED, MLP), dtype=dt, rngs=rngs, bias=bias)
        self.down_proj = Linear(m, h, (MLP, EMBED), dtype=dt, rngs=rngs, bias=bias)

    def __call__(self, x: jax.Array) -> jax.Array:
        hidden = self.act(self.gate_proj(x).astype(jnp.float32)) * self.up_proj(x).astype(jnp.float32)
        return self.down_proj(hidden)


class DecoderLayer(nnx.Module):
    """Pre-norm block; attribute names are transformers' (Llama's ``post_attention_layernorm`` is the MLP's
    pre-norm; with ``sandwich_norms`` it normalises the attention output and ``pre_feedforward_layernorm`` is the
    MLP's pre-norm)."""

    def __init__(self, cfg: DecoderLLMConfig, head_dim: int, kv_heads: int, *, core: bool, rngs: nnx.Rngs,
                 k_eq_v: bool = False, shared: bool = False, mlp_width: int | None = None):
        norm = lambda: RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps, plus_one=cfg.gemma_norm)  # noqa: E731
        self.sandwich = cfg.sandwich_norms
        self.input_layernorm = norm()
        self.self_attn = Attention(cfg, head_dim, kv_heads, core=core, rngs=rngs, k_eq_v=k_eq_v, shared=shared)
        self.layer_scalar = param(jnp.ones((1,), jnp.float32), (None,)) if cfg.layer_scalar else None
        self.post_attention_layernorm = norm()
        self.mlp = GatedMLP(cfg, rngs=rngs, width=mlp_width)
        if self.sandwich:
            self.pre_feedforward_layernorm = norm()
            self.post_feedforward_layernorm = norm()
        self.per_layer = bool(cfg.hidden_size_per_layer_input)
        if self.per_layer:  # Gemma-4's per-layer input branch
            d, dt = cfg.hidden_size_per_layer_input, cfg.dtype
            self.act = ACTIVATIONS[cfg.hidden_act]
            self.per_layer_input_gate = Linear(cfg.hidden_size, d, (EMBED, None), dtype=dt, rngs=rngs, bias=False)
            self.per_layer_projection = Linear(d, cfg.hidden_size, (None, EMBED), dtype=dt, rngs=rngs, bias=False)
            self.post_per_layer_input_norm = norm()

    def __call__(self, x, cos, sin, visible, kv=None, per_layer_input=None):
        """x: float32 residual stream (B, S, hidden); ``kv``: a shared layer's keys and values; ``per_layer_input``:
        this layer's (B, S, d) input. Returns the new stream and the layer's keys and values."""
        a, kv = self.self_attn(self.input_layernorm(x), cos, sin, visible, kv)
        if self.sandwich:
            x = x + self.post_attention_layernorm(a)
            x = x + self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(x)))
        else:
            x = x + a.astype(jnp.float32)
            x = x + self.mlp(self.post_attention_layernorm(x)).astype(jnp.float32)
        if self.per_layer:
            g = self.act(self.per_layer_input_gate(x).astype(jnp.float32)) * per_layer_input.astype(jnp.float32)
            x = x + self.post_per_layer_input_norm(self.per_layer_projection(g))
        return (x if self.layer_scalar is None else x * self.layer_scalar[...].astype(jnp.float32)), kv


# --------------------------------------------------------------------------------------------------------------
# Masks and positions
# --------------------------------------------------------------------------------------------------------------


def visibility(attention_mask: jax.Array, *, sliding_window: int | None = None,
               bidirectional: bool = False) -> jax.Array:
    """(B, S, S) bool: query i sees key j iff key j is not padding and j <= i (causal) and, with a sliding window,
    i - j < window; ``bidirectional``: any j, a window reaching ``(w + 1) // 2`` keys back (the query's own
    included) and ``w // 2`` ahead (transformers' bidirectional ``sliding_window_mask_function``)."""
    s = attention_mask.shape[1]
    i = jnp.arange(s)[:, None]
    j = jnp.arange(s)[None, :]
    if bidirectional:
        vis = jnp.ones((s, s), bool)
        if sliding_window is not None:
            w = int(sliding_window)
            vis = ((i - j >= 0) & (i - j < (w + 1) // 2)) | ((j - i > 0) & (j - i < w // 2 + 1))
    else:
        vis = j <= i
        if sliding_window is not None:
            vis = vis & (i - j < sliding_window)
    return vis[None] & (jnp.asarray(attention_mask) > 0)[:, None, :]


def text_position_ids(attention_mask: jax.Array) -> jax.Array:
    """Positions that skip padding (``cumsum(mask) - 1``, padding at 0), as Qwen2.5-VL's ``get_rope_index`` gives
    for text-only input; the default of :class:`DecoderLLM` is ``arange(S)`` like the transformers base models."""
    m = jnp.asarray(attention_mask).astype(jnp.int32)
    return jnp.where(m > 0, jnp.cumsum(m, axis=1) - 1, 0)


# --------------------------------------------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Segment:
    """Layers ``start..stop`` (in the kind's own numbering) of kind ``kind``, run as one scan; ``first`` is the
    model's index of its first layer."""

    kind: int
    start: int
    stop: int
    first: int = 0


def layer_plan(cfg: DecoderLLMConfig) -> tuple[tuple[tuple[int, int], ...], tuple[Segment, ...]]:
    """(kind, index within kind) of every layer, and the consecutive same-kind runs to scan."""
    kinds = cfg.kinds
    counts = [0] * len(kinds)
    where, segments = [], []
    for i in range(cfg.num_hidden_layers):
        k = kinds.index(cfg.kind_key(i))
        where.append((k, counts[k]))
        if segments and segments[-1].kind == k:
            segments[-1] = dataclasses.replace(segments[-1], stop=counts[k] + 1)
        else:
            segments.append(Segment(k, counts[k], counts[k] + 1, i))
        counts[k] += 1
    return tuple(where), tuple(segments)


@functools.lru_cache(maxsize=None)
def _layer_body(keep_kv: bool, per_layer_inputs: bool):
    """The scan body of one layer (one function per flag pair, so a streamed stack compiles its chunk once)."""

    def body(graphdef, h, layer_state, xs_i, aux):
        i, ple_i = xs_i
        cos, sin, vis, shared = aux
        kv = None if shared is None else (shared[0][i], shared[1][i])
        h, kv = nnx.merge(graphdef, layer_state)(h, cos[i], sin[i], vis[i], kv, ple_i if per_layer_inputs else None)
        return h, (h, kv if keep_kv else None)

    return body


class DecoderLLM(nnx.Module):
    """``__call__(input_ids, attention_mask, position_ids) -> (num_hidden_layers + 1, B, S, hidden)`` float32:
    transformers' ``hidden_states`` (embeddings, each layer's output, the last after the final norm)."""

    def __init__(self, cfg: DecoderLLMConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        self.embed_tokens = param(
            jax.random.normal(rngs.params(), (cfg.vocab_size, cfg.hidden_size), cfg.dtype), (VOCAB, EMBED)
        )
        if cfg.eoi_token_index is not None:
            self.eoi_embedding = param(jnp.zeros((cfg.hidden_size,), cfg.dtype), (EMBED,))
        where, _ = layer_plan(cfg)
        sizes = [sum(1 for k, _ in where if k == i) for i in range(len(cfg.kinds))]
        self.kinds = nnx.List([
            stacked(lambda r, hd=hd, kvh=kvh, core=core, kv=kv, sh=sh, m=m: DecoderLayer(
                cfg, hd, kvh, core=core, rngs=r, k_eq_v=kv, shared=sh, mlp_width=m), n, rngs)
            for (hd, kvh, _, kv, sh, m), n, core in zip(cfg.kinds, sizes, self._core_kinds())
        ])
        self.norm = RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps, plus_one=cfg.gemma_norm)
        d = cfg.hidden_size_per_layer_input
        if d:  # Gemma-4's per-layer inputs: a token embedding and a projection of the input embeddings, per layer
            n = cfg.num_hidden_layers * d
            self.embed_tokens_per_layer = param(
                jax.random.normal(rngs.params(), (cfg.vocab_size_per_layer_input, n), cfg.dtype), (VOCAB, None))
            self.per_layer_model_projection = Linear(cfg.hidden_size, n, (EMBED, None), dtype=cfg.dtype, rngs=rngs,
                                                     bias=False)
            self.per_layer_projection_norm = RMSNorm(d, eps=cfg.rms_norm_eps, plus_one=cfg.gemma_norm, names=(None,))

    def _types_of(self, key) -> tuple[str, ...]:
        cfg = self.cfg
        return tuple(dict.fromkeys(cfg.layer_types[i] for i in range(cfg.num_hidden_layers) if cfg.kind_key(i) == key))

    def _core_kinds(self) -> list[bool]:
        """Per kind: True when all its layers attend fully (the core attention takes them)."""
        cfg = self.cfg
        return [self._types_of(key) == (FULL,) and not cfg.attn_logit_softcapping for key in cfg.kinds]

    def _per_layer_inputs(self, input_ids: jax.Array, x: jax.Array) -> jax.Array:
        """(layers, B, S, d) float32: ``(norm(project(x) / sqrt(hidden)) + embed_per_layer(ids)) / sqrt(2)``, the
        per-layer embedding scaled by ``sqrt(d)`` in the weight dtype, as transformers' Gemma-4."""
        cfg = self.cfg
        d, n = cfg.hidden_size_per_layer_input, cfg.num_hidden_layers
        table = self.embed_tokens_per_layer[...]
        tokens = jnp.take(table, input_ids, axis=0) * jnp.asarray(d**0.5, table.dtype)
        proj = self.per_layer_model_projection(x).astype(jnp.float32) * np.float32(cfg.hidden_size**-0.5)
        proj = self.per_layer_projection_norm(proj.reshape(*x.shape[:-1], n, d))
        out = (proj + tokens.astype(jnp.float32).reshape(proj.shape)) * np.float32(2.0**-0.5)
        return jnp.moveaxis(out, 2, 0)

    def _tables(self, position_ids: jax.Array, attention_mask: jax.Array):
        """Per kind: the layer types it holds, their (T, B, S, pairs) cos/sin and masks ((T, B, S) key padding
        for core-attention kinds, else (T, B, S, S) visibility)."""
        cfg = self.cfg
        out = []
        for key, core in zip(cfg.kinds, self._core_kinds()):
            types = tuple(t for t in (FULL, SLIDING) if t in self._types_of(key))
            cos, sin, vis = [], [], []
            for t in types:
                spec = cfg.rope_spec(t)
                freqs = spec.inv_freq(cfg.head_dim_of(t))
                if spec.mrope_section is not None:
                    ang = rope.mrope_angles(position_ids, freqs, spec.mrope_section)
                else:
                    ang = rope.angles(position_ids[0], freqs)
                c, s = rope.cos_sin(ang)
                cos.append(c)
                sin.append(s)
                if core:
                    vis.append(jnp.asarray(attention_mask) > 0)
                else:
                    vis.append(visibility(attention_mask, sliding_window=cfg.sliding_window if t == SLIDING else None,
                                          bidirectional=cfg.bidirectional))
            out.append((types, jnp.stack(cos), jnp.stack(sin), jnp.stack(vis)))
        return out

    def __call__(
        self, input_ids: jax.Array, attention_mask: jax.Array | None = None, position_ids: jax.Array | None = None,
        inputs_embeds: jax.Array | None = None,
    ) -> jax.Array:
        """``inputs_embeds`` (B, S, hidden), when given, replaces the token embedding of ``input_ids`` (taken as is,
        unscaled, as transformers does): how a multimodal model (LLaVA) feeds image features in."""
        cfg = self.cfg
        input_ids = jnp.asarray(input_ids, jnp.int32)
        b, s = input_ids.shape
        if attention_mask is None:
            attention_mask = jnp.ones((b, s), jnp.int32)
        if position_ids is None:
            position_ids = jnp.broadcast_to(jnp.arange(s, dtype=jnp.int32), (b, s))
        position_ids = jnp.asarray(position_ids)
        if position_ids.ndim == 2:
            position_ids = jnp.broadcast_to(position_ids[None], (3, b, s))
        table = self.embed_tokens[...]
        if inputs_embeds is not None:
            x = jnp.asarray(inputs_embeds).astype(jnp.float32)
        else:
            x = jnp.take(table, input_ids, axis=0).astype(jnp.float32)
            if cfg.scale_embeddings:
                x = x * jnp.asarray(math.sqrt(cfg.hidden_size), table.dtype).astype(jnp.float32)
            if cfg.eoi_token_index is not None:
                eoi = self.eoi_embedding[...].astype(jnp.float32)
                x = jnp.where((input_ids == cfg.eoi_token_index)[..., None], eoi, x)
        tables = self._tables(position_ids, attention_mask)
        where, segments = layer_plan(cfg)
        type_index = [[] for _ in cfg.kinds]
        for t, (k, _) in zip(cfg.layer_types, where):
            type_index[k].append(tables[k][0].index(t))
        per_layer = None
        if cfg.hidden_size_per_layer_input:
            if inputs_embeds is not None:
                raise ValueError("Gemma-4's per-layer inputs are looked up from input_ids: give no inputs_embeds")
            per_layer = self._per_layer_inputs(input_ids, x)
        stored: dict[str, tuple[jax.Array, jax.Array]] = {}  # layer type -> the keys and values shared layers reuse
        hidden = [x[None]]
        for seg in segments:
            stack = self.kinds[seg.kind]
            types, cos, sin, vis = tables[seg.kind]
            idx = jnp.asarray(type_index[seg.kind][seg.start:seg.stop], jnp.int32)
            layers = range(seg.first, seg.first + seg.stop - seg.start)
            ple = per_layer[seg.first:layers.stop] if per_layer is not None else jnp.zeros((len(layers),))
            shared = (None if not cfg.kinds[seg.kind][4] else
                      tuple(jnp.stack([stored[t][j] for t in types]) for j in (0, 1)))
            keep = [n for n, i in enumerate(layers) if cfg.kv_mode(i) == "store"]
            body = _layer_body(bool(keep), per_layer is not None)
            aux = (cos, sin, vis, shared)
            if seg.stop - seg.start == stack_depth(stack):  # the whole stack: resident scan or streamed chunks
                x, (ys, kvs) = run_stack(stack, x, *aux, body=body, xs=(idx, ple))
            else:  # layer kinds interleave: a slice of the resident stack (never streamed: memory_plan checks)
                graphdef, state = nnx.split(stack)
                state = jax.tree.map(lambda a, seg=seg: a[seg.start:seg.stop], state)
                x, (ys, kvs) = jax.lax.scan(lambda c, s, g=graphdef: body(g, c, s[0], s[1], aux), x,
                                            (state, (idx, ple)))
            for n in keep:
                stored[cfg.layer_types[layers[n]]] = (kvs[0][n], kvs[1][n])
            hidden.append(ys)
        hidden = jnp.concatenate(hidden, axis=0)
        return hidden.at[-1].set(self.norm(hidden[-1]))


# --------------------------------------------------------------------------------------------------------------
# Prompt embeddings: padding, layer selection, crop
# --------------------------------------------------------------------------------------------------------------


def padding_side(tokenizer_config: Mapping[str, Any]) -> str:
    """The tokenizer's ``padding_side`` from its tokenizer_config.json dict (transformers' default: right)."""
    side = tokenizer_config.get("padding_side") or "right"
    if side not in ("left", "right"):
        raise UserError(f"tokenizer_config.json padding_side={side!r} is not 'left' or 'right'")
    return side


def pad_batch(
    sequences: Sequence[Sequence[int]], *, pad_id: int, length: int | None = None, side: str = "right"
) -> tuple[np.ndarray, np.ndarray]:
    """Token id lists -> (ids, mask) int32 (B, length), padded on ``side`` ("left" or "right", the tokenizer
    config's ``padding_side``); ``length`` defaults to the longest; longer sequences are an error."""
    if side not in ("left", "right"):
        raise UserError(f"padding side {side!r} is not 'left' or 'right'")
    n = max(len(s) for s in sequences) if length is None else length
    ids = np.full((len(sequences), n), pad_id, np.int32)
    mask = np.zeros((len(sequences), n), np.int32)
    for r, seq in enumerate(sequences):
        if len(seq) > n:
            raise UserError(f"prompt has {len(seq)} tokens, more than the maximum length {n}")
        sl = slice(0, len(seq)) if side == "right" else slice(n - len(seq), n)
        ids[r, sl] = np.asarray(seq, np.int32)
        mask[r, sl] = 1
    return ids, mask


def select_hidden(hidden: jax.Array, layers: int | Sequence[int] | str) -> jax.Array:
    """One hidden state (``-3``: HunyuanVideo's ``hidden_states[-3]``), several stacked on axis 0 (a list of
    indices), or ``"all"``: the full (num_hidden_layers + 1, B, S, hidden) stack."""
    if isinstance(layers, str):
        if layers != "all":
            raise UserError(f"hidden layer selection {layers!r}: expected an index, a list of indices or 'all'")
        return hidden
    if isinstance(layers, int):
        return hidden[layers]
    return hidden[jnp.asarray(list(layers), jnp.int32)]


def crop(embeddings: jax.Array, attention_mask: jax.Array, crop_start: int) -> tuple[jax.Array, jax.Array]:
    """Drop the first ``crop_start`` tokens (the chat template's prefix) from (…, B, S, D) embeddings and the
    (B, S) mask, as HunyuanVideo does after encoding the templated prompt."""
    return embeddings[..., crop_start:, :], attention_mask[:, crop_start:]


@functools.partial(jax.jit, static_argnums=0)
def _forward(graphdef, state, input_ids, attention_mask, position_ids):
    return nnx.merge(graphdef, state)(input_ids, attention_mask, position_ids)


def _call(model, input_ids, attention_mask, position_ids):
    return model(input_ids, attention_mask, position_ids)


_streamed_forward = jit_unless_streamed(_call)


def hidden_states(
    model: DecoderLLM, input_ids: Any, attention_mask: Any = None, position_ids: Any = None
) -> jax.Array:
    """``model(input_ids, attention_mask, position_ids)`` compiled once per model graph and input shapes (a model
    that streams its layers runs one program per chunk of layers)."""
    input_ids = jnp.asarray(input_ids, jnp.int32)
    if attention_mask is None:
        attention_mask = jnp.ones(input_ids.shape, jnp.int32)
    pos = None if position_ids is None else jnp.asarray(position_ids, jnp.int32)
    mask = jnp.asarray(attention_mask, jnp.int32)
    if is_streamed(model):
        return _streamed_forward(model, input_ids, mask, pos)
    graphdef, state = nnx.split(model)
    return _forward(graphdef, state, input_ids, mask, pos)


def encode(
    model: DecoderLLM,
    input_ids: jax.Array,
    attention_mask: jax.Array,
    *,
    layers: int | Sequence[int] | str = -1,
    crop_start: int = 0,
    position_ids: jax.Array | None = None,
) -> tuple[jax.Array, jax.Array]:
    """Prompt embeddings and their mask: run ``model``, pick ``layers`` (:func:`select_hidden`), crop."""
    hidden = select_hidden(hidden_states(model, input_ids, attention_mask, position_ids), layers)
    return crop(hidden, jnp.asarray(attention_mask), crop_start)


# --------------------------------------------------------------------------------------------------------------
# Checkpoint conversion
# --------------------------------------------------------------------------------------------------------------

# Where the text model sits in the checkpoints of the families: a bare model, a *ForCausalLM, and the composite
# LLaVA / Qwen2.5-VL / Gemma-3 models in their old and new (transformers 5) layouts.
PREFIX = r"(?:model\.language_model\.|language_model\.model\.|language_model\.|model\.)?"

IGNORE: tuple[str, ...] = (
    r"(?:language_model\.)?lm_head\.weight",
    r"(?:model\.)?(?:visual|vision_tower|vision_model|multi_modal_projector|image_newline|embed_vision|"
    r"embed_audio)\b.*",
    r".*\.rotary_emb\.inv_freq",
)

_LAYER = r"k(\d+)\.layers\.(\d+)\."

RULES: tuple[KeyRule, ...] = (
    KeyRule(r"embed_tokens\.weight", "embed_tokens"),
    KeyRule(r"eoi_embedding", "eoi_embedding"),
    KeyRule(r"norm\.weight", "norm/weight"),
    KeyRule(r"embed_tokens_per_layer\.weight", "embed_tokens_per_layer"),
    KeyRule(r"per_layer_model_projection\.weight", "per_layer_model_projection/kernel", linear),
    KeyRule(r"per_layer_projection_norm\.weight", "per_layer_projection_norm/weight"),
    KeyRule(_LAYER + r"(per_layer_input_gate|per_layer_projection)\.weight", "kinds/{1}/{3}/kernel", linear,
            layer_group=2),
    KeyRule(_LAYER + r"self_attn\.(q_proj|k_proj|v_proj|o_proj)\.weight", "kinds/{1}/self_attn/{3}/kernel", linear,
            layer_group=2),
    KeyRule(_LAYER + r"self_attn\.(q_proj|k_proj|v_proj|o_proj)\.bias", "kinds/{1}/self_attn/{3}/bias", layer_group=2),
    KeyRule(_LAYER + r"self_attn\.(q_norm|k_norm)\.weight", "kinds/{1}/self_attn/{3}/weight", layer_group=2),
    KeyRule(_LAYER + r"layer_scalar", "kinds/{1}/layer_scalar", layer_group=2),
    KeyRule(_LAYER + r"mlp\.(gate_proj|up_proj|down_proj)\.weight", "kinds/{1}/mlp/{3}/kernel", linear, layer_group=2),
    KeyRule(_LAYER + r"mlp\.(gate_proj|up_proj|down_proj)\.bias", "kinds/{1}/mlp/{3}/bias", layer_group=2),
    KeyRule(
        _LAYER + r"(input_layernorm|post_attention_layernorm|pre_feedforward_layernorm|post_feedforward_layernorm)"
        r"\.weight",
        "kinds/{1}/{3}/weight",
        layer_group=2,
    ),
    KeyRule(_LAYER + r"post_per_layer_input_norm\.weight", "kinds/{1}/post_per_layer_input_norm/weight",
            layer_group=2),
)


class _KindKeys(Mapping):
    """A view of a checkpoint with the model prefix stripped and ``layers.N.`` renamed ``k<kind>.layers.<i>.``
    (index within the kind), so one rule table serves every layout."""

    def __init__(self, tensors: Mapping[str, Any], where: Sequence[tuple[int, int]]):
        self._map: dict[str, str] = {}
        prefix = re.compile(PREFIX + r"(embed_tokens\.weight|eoi_embedding|norm\.weight|"
                                     r"embed_tokens_per_layer\.weight|"
                                     r"per_layer_model_projection\.weight|per_layer_projection_norm\.weight|"
                                     r"layers\.(\d+)\.(.*))")
        ignore = [re.compile(p) for p in IGNORE]
        for key in tensors:
            m = prefix.fullmatch(key)
            if m is None or any(r.fullmatch(key) for r in ignore):
                self._map[key] = key
                continue
            if m.group(2) is None:
                self._map[m.group(1)] = key
                continue
            layer = int(m.group(2))
            if layer >= len(where):
                self._map[key] = key  # reported as unexpected
                continue
            kind, index = where[layer]
            self._map[f"k{kind}.layers.{index}.{m.group(3)}"] = key
        self._tensors = tensors

    def __getitem__(self, key: str) -> Any:
        return self._tensors[self._map[key]]

    def __iter__(self) -> Iterator[str]:
        return iter(self._map)

    def __len__(self) -> int:
        return len(self._map)


def convert_params(cfg: DecoderLLMConfig, tensors: Mapping[str, Any], abstract: Mapping, *, component: str,
                   check_only: bool = False) -> dict:
    """Checkpoint tensors -> path -> host array for :class:`DecoderLLM` (every problem reported at once)."""
    where, _ = layer_plan(cfg)
    return convert(_KindKeys(tensors, where), RULES, abstract, component=component, ignore=IGNORE,
                   check_only=check_only)


def load_decoder_llm(
    cfg: DecoderLLMConfig, tensors: Mapping[str, Any], *, component: str = "text encoder (decoder LLM)", put=None,
    mesh: Any = None,
) -> DecoderLLM:
    """Build a :class:`DecoderLLM` from a transformers state dict (key -> array or zero-arg loader).

    ``put(path, array)`` places each parameter (default ``jax.device_put``); or give the run's ``mesh`` to place
    the model tensor-parallel over its ``tp`` axis by the encoder rules."""
    graphdef, state, flat = abstract_model(lambda: DecoderLLM(cfg, rngs=nnx.Rngs(0)))
    values = convert_params(cfg, tensors, flat, component=component)
    return place_tower(graphdef, state, values, put=put, mesh=mesh)


__all__ = [
    "ACTIVATIONS", "Attention", "DecoderLLM", "DecoderLLMConfig", "DecoderLayer", "FULL", "GatedMLP", "IGNORE",
    "RMSNorm", "RULES", "RopeSpec", "SHARD_RULES", "SLIDING", "Segment",
    "convert_params", "crop", "encode", "hidden_states", "layer_plan",
    "load_decoder_llm", "pad_batch", "padding_side", "select_hidden", "text_position_ids", "visibility",
]
