"""A decoder-LLM prompt encoder's config from a single file's tensors (ComfyUI's Qwen / Gemma text encoder files
carry no config): the id's published config, with the sizes the tensors fix read from them.

Read from the shapes: vocabulary and width (``embed_tokens``), depth (the ``layers.N`` blocks), feed-forward width
(``mlp.gate_proj``), head width (a Gemma ``q_norm``; else the published ``head_dim``, or width / heads), query and
key-value heads (``q_proj`` / ``k_proj`` rows over the head width). Everything else (RoPE, sliding windows, norms,
special tokens) is the published config's; a per-layer ``layer_types`` list is cut or repeated to the depth.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

import numpy as np

_Q = re.compile(r"^(.*?)layers\.(\d+)\.self_attn\.q_proj\.weight$")


def _shape(tensors: Any, key: str) -> tuple[int, ...]:
    return tuple(tensors.shape(key)) if hasattr(tensors, "shape") else tuple(np.shape(tensors[key]))


def is_decoder_llm(tensors: Any) -> bool:
    """Whether ``tensors`` look like a decoder LLM's (``...layers.N.self_attn.q_proj`` and ``embed_tokens``)."""
    keys = list(tensors)
    return any(_Q.match(k) for k in keys) and any(k.endswith("embed_tokens.weight") for k in keys)


def config_from_tensors(tensors: Any, published: Mapping[str, Any]) -> dict[str, Any]:
    """``published`` (a transformers config, its text tower's fields at the top or under ``text_config``) with
    the sizes ``tensors`` (transformers names) determine."""
    text = published.get("text_config") if isinstance(published.get("text_config"), Mapping) else published
    hits = [m for k in tensors if (m := _Q.match(k))]
    prefix = hits[0][1]
    depth = len({int(m[2]) for m in hits})
    layer = f"{prefix}layers.0."
    vocab, width = _shape(tensors, next(k for k in tensors if k.endswith("embed_tokens.weight")))
    norm = layer + "self_attn.q_norm.weight"
    if norm in tensors:
        head_dim = _shape(tensors, norm)[0]
    else:
        head_dim = int(text.get("head_dim") or text["hidden_size"] // text["num_attention_heads"])
    sizes: dict[str, Any] = {
        "vocab_size": vocab, "hidden_size": width, "num_hidden_layers": depth, "head_dim": head_dim,
        "num_attention_heads": _shape(tensors, layer + "self_attn.q_proj.weight")[0] // head_dim,
        "num_key_value_heads": _shape(tensors, layer + "self_attn.k_proj.weight")[0] // head_dim,
    }
    gate = layer + "mlp.gate_proj.weight"
    if gate in tensors:
        sizes["intermediate_size"] = _shape(tensors, gate)[0]
    types = text.get("layer_types")
    if isinstance(types, list) and types:
        sizes["layer_types"] = [types[i % len(types)] for i in range(depth)]
    out = {**dict(text), **sizes}
    return {**dict(published), "text_config": out} if text is not published else out
