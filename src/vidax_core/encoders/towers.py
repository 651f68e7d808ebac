"""The shared prompt and image towers as a family calls them: one call loads a tower from a checkpoint component
(its ``config.json`` read there, its safetensors converted and placed), one call encodes.

=====================  =========================================  ==============================================
tower                  load (``ckpt``: a :class:`Checkpoint`)      encode (host numpy out, float32)
=====================  =========================================  ==============================================
decoder LLM: Llama-3,  ``load_llm(ckpt, "text_encoder",            ``encode_llm(model, ids, mask, layers=-1,
Qwen2.5-VL text,       dtype=..., mesh=...)``                      crop_start=0)`` -> ``(hidden, mask)``
Gemma-2/3/4
CLIP text, CLIP        ``load_vit_tower(ckpt, component, kind)``   ``encode_vit(model, inputs, attention_mask=None,
vision, SigLIP         with ``kind`` one of :data:`VIT_KINDS`      layer=None)`` -> ``(hidden, pooled)``
vision / text
T5 v1.1, UMT5, byT5    ``load_t5_tower(ckpt, component,            ``encode_t5(model, ids, mask=None)`` -> hidden
                       mesh=...)``
tokenizers             ``load_tokenizer(ckpt, component)``         ``tokenizer(texts, max_length) -> (ids, mask)``
=====================  =========================================  ==============================================

What each encode call means, in the reference's terms:

* ``encode_llm``: transformers' ``model(input_ids, attention_mask, output_hidden_states=True).hidden_states``
  (embeddings, each layer's output, the last after the final norm), the ``layers`` picked (``-1``: the last, after
  the final norm; ``-3``: HunyuanVideo's; a list stacks several; ``"all"``), and the first ``crop_start`` tokens
  (a chat template's prefix) cropped from the states and the mask. ``mask`` None attends to every token, as a
  pipeline that passes no mask does.
* ``encode_vit``: ``layer=None``: ``(last_hidden_state, pooler_output)`` of the transformers model (CLIP text:
  the final-normed EOS token; CLIP vision: ``post_layernorm`` of the class token; SigLIP: the MAP head / last
  token), ``pooled`` None for towers without pooling; ``layer=i``: ``(hidden_states[i], None)`` (Wan I2V's CLIP
  vision ``-2``), running only the layers the index needs. ``inputs``: token ids (B, L) for text towers, pixels
  (B, 3, S, S) for vision towers (:func:`vidax_core.encoders.clip_vision.preprocess_images` prepares them).
* ``encode_t5``: the encoder's ``last_hidden_state``, with the key-padding mask when given.

Each encode call is compiled once per tower graph and input shape. The module imports JAX; import it (or the
names ``vidax_core`` exports from it) inside the hook that uses it.
"""

from __future__ import annotations

import functools
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from vidax_core.errors import UserError
from vidax_core.parallel.streamed import jit_unless_streamed

#: ``kind`` -> the :class:`vidax_core.encoders.vit.ViTConfig` constructor that reads its transformers config.json
VIT_KINDS = {
    "clip_text": "clip_text",  # CLIPTextModel: pooled = final-normed EOS token
    "clip_text_projection": "clip_text",  # CLIPTextModelWithProjection: pooled through text_projection
    "clip_vision": "clip_vision",  # CLIPVisionModel
    "siglip_vision": "siglip_vision",  # SiglipVisionModel
    "siglip_text": "siglip_text",  # SiglipTextModel
}


def load_tokenizer(ckpt: Any, component: str = "tokenizer") -> Any:
    """The checkpoint folder's tokenizer: a fast-tokenizer ``tokenizer.json`` (:class:`TextTokenizer`), a byT5
    byte tokenizer or a SentencePiece ``spiece.model``, each called as ``tokenizer(texts, max_length) -> (ids,
    mask)`` (padded to ``max_length`` on the tokenizer's own padding side)."""
    from vidax_core.encoders.tokenizer import TextTokenizer

    return TextTokenizer.from_dir(ckpt.require(component))


def load_llm(ckpt: Any, component: str = "text_encoder", *, dtype: Any = None, mesh: Any = None,
             label: str | None = None) -> Any:
    """The decoder LLM of ``component`` (a Llama, Qwen2 / Qwen2.5-VL (its text tower; the vision tower's tensors are
    skipped), Gemma-2, Gemma-3 or Gemma-4 ``config.json``) in ``dtype``, tensor-parallel over ``mesh``'s ``tp`` axis
    when it has one. ``label`` names it in conversion errors."""
    from vidax_core.encoders import decoder_llm as dl

    cfg = dl.DecoderLLMConfig.from_config(ckpt.config(component), dtype=dtype)
    return dl.load_decoder_llm(cfg, ckpt.tensors(component), component=label or f"{component} (decoder LLM)",
                               mesh=mesh)


def encode_llm(model: Any, ids: Any, mask: Any = None, *, layers: int | Sequence[int] | str = -1,
               crop_start: int = 0, position_ids: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """``(hidden (..., B, S - crop_start, D) float32, mask (B, S - crop_start) int32)``; see the module's notes."""
    from vidax_core.encoders import decoder_llm as dl

    ids = np.asarray(ids, np.int32)
    mask = np.ones(ids.shape, np.int32) if mask is None else np.asarray(mask, np.int32)
    hidden, mask = dl.encode(model, ids, mask, layers=layers, crop_start=crop_start, position_ids=position_ids)
    return np.asarray(hidden, np.float32), np.asarray(mask, np.int32)


def load_vit_tower(ckpt: Any, component: str, kind: str, *, dtype: Any = None, label: str | None = None
                   ) -> Any:
    """The ViT-family tower of ``component`` read as ``kind`` (:data:`VIT_KINDS`); parameters and matmuls in
    ``dtype``, norms, softmax and outputs in float32."""
    from vidax_core.encoders.vit import ViTConfig, load_vit

    if kind not in VIT_KINDS:
        raise UserError(f"unknown ViT tower kind {kind!r}: expected one of {sorted(VIT_KINDS)}")
    extra = {"with_projection": True} if kind == "clip_text_projection" else {}
    cfg = getattr(ViTConfig, VIT_KINDS[kind])(ckpt.config(component), dtype=dtype, **extra)
    return load_vit(cfg, ckpt.tensors(component), component=label or f"{component} ({kind})")


@functools.partial(jax.jit, static_argnames=("layer",))
def _vit(model, inputs, attention_mask, layer):
    if layer is None:
        return model(inputs, attention_mask)
    return model.hidden_state(inputs, layer, attention_mask), None


def encode_vit(model: Any, inputs: Any, *, attention_mask: Any = None, layer: int | None = None
               ) -> tuple[np.ndarray, np.ndarray | None]:
    """``(hidden, pooled)`` float32 numpy; see the module's notes."""
    text = model.cfg.kind == "text"
    inputs = jnp.asarray(inputs, jnp.int32) if text else jnp.asarray(inputs, jnp.float32)
    mask = None if attention_mask is None else jnp.asarray(attention_mask, jnp.int32)
    hidden, pooled = _vit(model, inputs, mask, layer)
    return np.asarray(hidden, np.float32), None if pooled is None else np.asarray(pooled, np.float32)


def load_t5_tower(ckpt: Any, component: str = "text_encoder", *, mesh: Any = None, **defaults: Any) -> Any:
    """The T5-family encoder of ``component`` (T5 v1.1, UMT5, byT5) in the run's encoder dtype
    (:mod:`vidax_core.encoders.policy`), tensor-parallel over ``mesh``'s ``tp`` axis when it has one; ``defaults``
    fill keys its config.json lacks (Wan: ``model_type="umt5"``)."""
    from vidax_core.encoders.t5 import T5Config, load_t5

    return load_t5(T5Config.from_config({**defaults, **ckpt.config(component)}), ckpt.tensors(component), mesh=mesh)


def _t5_states(model, ids, mask):
    return model(ids, mask)


_t5 = jit_unless_streamed(_t5_states)  # a streamed model runs eagerly around one program per chunk


def encode_t5(model: Any, ids: Any, mask: Any = None) -> np.ndarray:
    """The encoder's last hidden state (B, L, d_model) float32, attending under ``mask`` when given."""
    ids = jnp.asarray(ids, jnp.int32)
    mask = jnp.ones(ids.shape, jnp.int32) if mask is None else jnp.asarray(mask, jnp.int32)
    return np.asarray(_t5(model, ids, mask), np.float32)

