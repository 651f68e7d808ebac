"""T5Gemma2's encoder (transformers ``T5Gemma2Encoder``) as a text tower, and its SigLIP vision tower.

T5Gemma2 is Gemma 3 adapted to an encoder-decoder; its encoder is a Gemma-3 text stack read bidirectionally, so it
is a configuration of the core's decoder LLM (:mod:`vidax_core.encoders.decoder_llm`):

* Gemma-3's blocks (``1 + w`` RMS norms, sandwich norms around attention and MLP, per-head q/k RMS norms, grouped
  KV heads, attention scale ``query_pre_attn_scalar ** -0.5``, tanh-GELU gated MLP, embeddings times
  ``sqrt(hidden_size)``, sliding-window and full layers each with its own RoPE) — under transformers' names
  ``pre_self_attn_layernorm`` / ``post_self_attn_layernorm`` for Gemma's ``input_layernorm`` /
  ``post_attention_layernorm``;
* bidirectional attention: every query sees every key but padding; a sliding layer's window is centred on the
  query (``(w + 1) // 2`` keys back, the query included, ``w // 2`` ahead), as transformers' encoder mask;
* the end-of-image token (256000, the id ``T5Gemma2Encoder`` fixes whatever the config says) embeds as a learned,
  unscaled ``eoi_embedding``;
* the output is ``last_hidden_state``, the final norm's, padding positions included (a pipeline passes the mask on).

The checkpoint (``text_model.*``, ``vision_tower.*``, ``multi_modal_projector.*``) also holds a SigLIP vision tower:
:func:`load_vision` reads it as the core's ViT (:mod:`vidax_core.encoders.vit`, ``siglip_vision``), whose
``last_hidden_state`` image-conditioned pipelines use directly (Motif-Video's image-to-video). The multimodal
projector (image tokens spliced into the text) is not used by any pipeline vidax runs and is not loaded.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from vidax_core.encoders import decoder_llm as dl
from vidax_core.errors import UserError
from vidax_core.io.renamed import RenamedTensors

EOI_TOKEN = 256_000  # T5Gemma2Encoder(config, eoi_token_index=256_000): the constructor's, not the config's
_NORMS = {"pre_self_attn_layernorm": "input_layernorm", "post_self_attn_layernorm": "post_attention_layernorm"}
_TEXT = re.compile(r"(?:model\.)?(?:encoder\.)?(?:text_model\.)?(.*)")
_OTHER = re.compile(r"(?:model\.)?(?:encoder\.)?(?:vision_tower|multi_modal_projector)\..*")
_LAYER_NORM = re.compile(r"(layers\.\d+\.)(pre_self_attn_layernorm|post_self_attn_layernorm)(\.weight)")


def text_config(config: Mapping[str, Any], **overrides: Any) -> dl.DecoderLLMConfig:
    """The decoder-LLM config of a ``T5Gemma2Encoder`` config.json (its ``text_config``; a bare
    ``t5gemma2_text`` config works too): Gemma-3's layout, bidirectional, with the end-of-image embedding."""
    c = dict(config.get("text_config") or config) if isinstance(config, Mapping) else {}
    if not c:
        raise UserError("T5Gemma2 config.json has no text_config: check the text encoder's config")
    model_type = str(c.get("model_type", "t5gemma2_text"))
    if not model_type.startswith("t5gemma2"):
        raise UserError(f"text encoder config model_type={model_type!r}: a T5Gemma2 encoder was expected")
    c.pop("use_bidirectional_attention", None)  # a decoder flag; the encoder is bidirectional whatever it says
    c["model_type"] = "gemma3_text"
    return dl.DecoderLLMConfig.from_config(c, **{"bidirectional": True, "eoi_token_index": EOI_TOKEN, **overrides})


def text_tensors(tensors: Mapping[str, Any]) -> RenamedTensors:
    """The text tower's tensors under the decoder LLM's names (a ``text_model.`` prefix dropped: transformers'
    ``save_pretrained`` writes the keys without it; Gemma's norm names; the end-of-image embedding at the root);
    the vision tower's and projector's keys left out."""

    def name(key: str) -> str | None:
        if _OTHER.fullmatch(key):
            return None
        rest = _TEXT.fullmatch(key).group(1)
        if rest == "embed_tokens.eoi_embedding":
            return "eoi_embedding"
        n = _LAYER_NORM.fullmatch(rest)
        return n.group(1) + _NORMS[n.group(2)] + n.group(3) if n else rest

    return RenamedTensors(tensors, name)


def load_text(config: Mapping[str, Any], tensors: Mapping[str, Any], *, dtype: Any = None, mesh: Any = None,
              component: str = "text encoder (T5Gemma2)") -> dl.DecoderLLM:
    """The T5Gemma2 text encoder in ``dtype`` (tensor-parallel over ``mesh``'s ``tp`` axis when it has one)."""
    return dl.load_decoder_llm(text_config(config, dtype=dtype), text_tensors(tensors), component=component,
                               mesh=mesh)


_VISION = re.compile(r"(?:model\.)?(?:encoder\.)?vision_tower\.(.*)")


def vision_tensors(tensors: Mapping[str, Any]) -> RenamedTensors:
    """The SigLIP tower's tensors without their ``vision_tower.`` prefix (the rest left out)."""

    def name(key: str) -> str | None:
        m = _VISION.fullmatch(key)
        return m.group(1) if m else None

    return RenamedTensors(tensors, name)


def load_vision(config: Mapping[str, Any], tensors: Mapping[str, Any], *, dtype: Any = None,
                component: str = "image encoder (T5Gemma2's SigLIP)") -> Any:
    """The SigLIP vision tower of a ``T5Gemma2Encoder`` checkpoint (its ``vision_config``) as a
    :class:`vidax_core.encoders.vit.ViTEncoder`; ``encode_vit`` gives its ``last_hidden_state``."""
    from vidax_core.encoders.vit import ViTConfig, load_vit

    vision = config.get("vision_config") if isinstance(config, Mapping) else None
    if not isinstance(vision, Mapping):
        raise UserError("T5Gemma2 config.json has no vision_config: the checkpoint holds no image tower")
    return load_vit(ViTConfig.siglip_vision(vision, dtype=dtype), vision_tensors(tensors), component=component)


__all__ = ["EOI_TOKEN", "load_text", "load_vision", "text_config", "text_tensors", "vision_tensors"]
