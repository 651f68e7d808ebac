"""LLaVA as an image-and-text encoder (transformers ``LlavaForConditionalGeneration``; HunyuanVideo-I2V's
llava-llama-3-8b): a CLIP vision tower, a two-layer projector, and a decoder LLM whose input embeddings carry the
projected image features at the image-token positions.

* Vision: :class:`vidax_core.encoders.clip_vision.CLIPVisionEncoder`; the features are ``hidden_states[layer]``
  for ``vision_feature_layer`` (an int, or a list whose hidden states are concatenated on the feature axis),
  without the class token when ``vision_feature_select_strategy`` is ``"default"`` (``"full"`` keeps it).
* Projector: ``linear_2(act(linear_1(features)))`` (``projector_hidden_act``, biases per
  ``multimodal_projector_bias``).
* Text: :class:`vidax_core.encoders.decoder_llm.DecoderLLM` fed ``inputs_embeds``: the token embeddings with the
  image features written, in order, over the tokens equal to ``image_token_id`` (the prompt already holds one such
  token per feature: the processor expanded them). Returns every hidden state, as ``output_hidden_states=True``.

Keys: transformers 5 saves ``model.vision_tower.``, ``model.multi_modal_projector.``, ``model.language_model.``
(and ``lm_head.``, unused); the older layout (``vision_tower.``, ``multi_modal_projector.``,
``language_model.model.``) is read too.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any, Iterator, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.encoders.clip_vision import CLIP_VISION_RULES, CLIPVisionConfig, CLIPVisionEncoder
from vidax_core.encoders.decoder_llm import DecoderLLM, DecoderLLMConfig, convert_params
from vidax_core.encoders.vit import ACTIVATIONS
from vidax_core.errors import UserError
from vidax_core.io.convert import KeyRule, convert, linear
from vidax_core.nn.layers import Linear
from vidax_core.nn.state import abstract_model, materialize


@dataclasses.dataclass(frozen=True)
class LlavaConfig:
    """transformers ``LlavaConfig``: its two sub-configs and the fields that join them."""

    text: DecoderLLMConfig
    vision: CLIPVisionConfig
    image_token_id: int = 32000
    vision_feature_layer: int | tuple[int, ...] = -2
    vision_feature_select_strategy: str = "default"
    projector_hidden_act: str = "gelu"
    multimodal_projector_bias: bool = True

    @classmethod
    def from_config(cls, config: Mapping[str, Any], *, dtype: Any = None) -> "LlavaConfig":
        """From a LLaVA config.json dict (``image_token_index`` or ``image_token_id``); ``dtype`` for both towers."""
        c = dict(config)
        if not isinstance(c.get("text_config"), Mapping) or not isinstance(c.get("vision_config"), Mapping):
            raise UserError("the LLaVA config.json needs text_config and vision_config")
        vision_cfg = dict(c["vision_config"])
        if vision_cfg.get("model_type", "clip_vision_model") != "clip_vision_model":
            raise UserError(f"LLaVA vision tower {vision_cfg.get('model_type')!r} is not supported (CLIP vision only)")
        layer = c.get("vision_feature_layer", -2)
        layer = int(layer) if isinstance(layer, int) else tuple(int(v) for v in layer)
        strategy = str(c.get("vision_feature_select_strategy", "default"))
        if strategy not in ("default", "full"):
            raise UserError(f"vision_feature_select_strategy {strategy!r} must be 'default' or 'full'")
        act = str(c.get("projector_hidden_act", "gelu"))
        if act not in ACTIVATIONS:
            raise UserError(f"projector_hidden_act {act!r} is not supported: one of {sorted(ACTIVATIONS)}")
        token = c.get("image_token_id", c.get("image_token_index", 32000))
        return cls(
            text=DecoderLLMConfig.from_config(c["text_config"], dtype=dtype),
            vision=CLIPVisionConfig.from_config(vision_cfg, dtype=dtype),
            image_token_id=int(token),
            vision_feature_layer=layer,
            vision_feature_select_strategy=strategy,
            projector_hidden_act=act,
            multimodal_projector_bias=bool(c.get("multimodal_projector_bias", True)),
        )

    @property
    def feature_layers(self) -> tuple[int, ...]:
        v = self.vision_feature_layer
        return (v,) if isinstance(v, int) else tuple(v)

    @property
    def image_tokens(self) -> int:
        """Features per image (image tokens in the expanded prompt)."""
        return self.vision.num_patches + (1 if self.vision_feature_select_strategy == "full" else 0)


class Projector(nnx.Module):
    """``LlavaMultiModalProjector``."""

    def __init__(self, cfg: LlavaConfig, *, rngs: nnx.Rngs):
        d_in = cfg.vision.hidden_size * len(cfg.feature_layers)
        d = cfg.text.hidden_size
        bias = cfg.multimodal_projector_bias
        self.linear_1 = Linear(d_in, d, (None, None), dtype=cfg.text.dtype, rngs=rngs, bias=bias)
        self.linear_2 = Linear(d, d, (None, None), dtype=cfg.text.dtype, rngs=rngs, bias=bias)
        self.act = cfg.projector_hidden_act

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.linear_2(ACTIVATIONS[self.act](self.linear_1(x)))


def scatter_features(embeds: jax.Array, is_image: jax.Array, features: jax.Array) -> jax.Array:
    """``embeds.masked_scatter(is_image, features)``: the k-th image token (row-major) gets feature row k."""
    flat = features.reshape(-1, features.shape[-1]).astype(embeds.dtype)
    order = jnp.cumsum(is_image.reshape(-1)) - 1
    picked = jnp.take(flat, jnp.clip(order, 0, flat.shape[0] - 1), axis=0).reshape(embeds.shape)
    return jnp.where(is_image[..., None], picked, embeds)


class LlavaEncoder(nnx.Module):
    """``__call__(input_ids, attention_mask, pixel_values, position_ids=None)`` -> the language model's hidden
    states (num_hidden_layers + 1, B, S, hidden) float32, embeddings first, the last after the final norm."""

    def __init__(self, cfg: LlavaConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        self.vision_tower = CLIPVisionEncoder(cfg.vision, rngs=rngs)
        self.multi_modal_projector = Projector(cfg, rngs=rngs)
        self.language_model = DecoderLLM(cfg.text, rngs=rngs)

    def image_features(self, pixel_values: jax.Array) -> jax.Array:
        """Preprocessed images (N, 3, S, S) -> projected features (N, image_tokens, hidden)."""
        feats = [self.vision_tower.hidden_state(pixel_values, layer) for layer in self.cfg.feature_layers]
        if self.cfg.vision_feature_select_strategy == "default":
            feats = [f[:, 1:] for f in feats]
        return self.multi_modal_projector(jnp.concatenate(feats, axis=-1))

    def __call__(self, input_ids: jax.Array, attention_mask: jax.Array | None = None,
                 pixel_values: jax.Array | None = None, position_ids: jax.Array | None = None) -> jax.Array:
        ids = jnp.asarray(input_ids, jnp.int32)
        is_image = ids == self.cfg.image_token_id
        table = self.language_model.embed_tokens[...]
        embeds = jnp.take(table, jnp.where(is_image, 0, ids), axis=0)
        if pixel_values is not None:
            embeds = scatter_features(embeds, is_image, self.image_features(pixel_values))
        return self.language_model(ids, attention_mask, position_ids, inputs_embeds=embeds)


@functools.partial(jax.jit, static_argnums=0)
def _forward(graphdef, state, input_ids, attention_mask, pixel_values, position_ids):
    return nnx.merge(graphdef, state)(input_ids, attention_mask, pixel_values, position_ids)


def hidden_states(model: LlavaEncoder, input_ids: Any, attention_mask: Any = None, pixel_values: Any = None,
                  position_ids: Any = None) -> jax.Array:
    """``model(...)`` jitted, after checking that the prompt holds one image token per image feature.

    ``pixel_values``: CLIP-preprocessed images (N, 3, S, S) (:func:`vidax_core.encoders.clip_vision.
    preprocess_images` at the tower's ``image_size``), or None for a text-only prompt.
    """
    ids = np.asarray(input_ids, np.int32)
    cfg = model.cfg
    n_tokens = int((ids == cfg.image_token_id).sum())
    n_images = 0 if pixel_values is None else int(np.shape(pixel_values)[0])
    if n_tokens != n_images * cfg.image_tokens:
        raise UserError(f"the LLaVA prompt holds {n_tokens} image tokens but {n_images} image(s) give "
                        f"{n_images * cfg.image_tokens} features: expand each image placeholder to "
                        f"{cfg.image_tokens} tokens of id {cfg.image_token_id}")
    mask = np.ones(ids.shape, np.int32) if attention_mask is None else np.asarray(attention_mask, np.int32)
    graphdef, state = nnx.split(model)
    pv = None if pixel_values is None else jnp.asarray(pixel_values, jnp.float32)
    pos = None if position_ids is None else jnp.asarray(position_ids, jnp.int32)
    return _forward(graphdef, state, jnp.asarray(ids), jnp.asarray(mask), pv, pos)


# --------------------------------------------------------------------------------------------------------------
# Checkpoint conversion
# --------------------------------------------------------------------------------------------------------------

_VISION = re.compile(r"(?:model\.)?vision_tower\.(.*)")
_PROJECTOR = re.compile(r"(?:model\.)?multi_modal_projector\.(.*)")
PROJECTOR_RULES: tuple[KeyRule, ...] = (
    KeyRule(r"(linear_1|linear_2)\.weight", "{1}/kernel", linear),
    KeyRule(r"(linear_1|linear_2)\.bias", "{1}/bias"),
)


class _Part(Mapping):
    """The keys of one sub-model, its prefix stripped; the source's header lookups (``shape``, ``dtype``,
    ``nbytes``) pass through where it has them, so a shape check reads no tensor (a weightless dry run has none)."""

    def __init__(self, tensors: Mapping[str, Any], pattern: re.Pattern):
        self._tensors = tensors
        self._map = {m.group(1): k for k in tensors if (m := pattern.fullmatch(k))}
        for name in ("shape", "dtype", "nbytes"):
            if hasattr(tensors, name):
                setattr(self, name, lambda key, f=getattr(tensors, name): f(self._map[key]))

    def __getitem__(self, key: str) -> Any:
        return self._tensors[self._map[key]]

    def __iter__(self) -> Iterator[str]:
        return iter(self._map)

    def __len__(self) -> int:
        return len(self._map)


def convert_llava(cfg: LlavaConfig, tensors: Mapping[str, Any], abstract: Mapping, *, check_only: bool = False,
                  component: str = "image-text encoder (LLaVA)") -> dict:
    """Checkpoint tensors -> path -> host array for :class:`LlavaEncoder`, each part checked in full."""
    out: dict = {}
    parts = (("vision_tower", _Part(tensors, _VISION), CLIP_VISION_RULES),
             ("multi_modal_projector", _Part(tensors, _PROJECTOR), PROJECTOR_RULES))
    for name, part, rules in parts:
        sub = {p[1:]: v for p, v in abstract.items() if p[0] == name}
        got = convert(part, rules, sub, component=f"{component} {name}", check_only=check_only)
        out.update({(name, *p): v for p, v in got.items()})
    sub = {p[1:]: v for p, v in abstract.items() if p[0] == "language_model"}
    got = convert_params(cfg.text, tensors, sub, component=f"{component} language_model", check_only=check_only)
    out.update({("language_model", *p): v for p, v in got.items()})
    return out


def load_llava(cfg: LlavaConfig, tensors: Mapping[str, Any], *, put=None) -> LlavaEncoder:
    """A transformers ``LlavaForConditionalGeneration`` state dict as a live :class:`LlavaEncoder` (``lm_head``
    dropped); ``put(path, array)`` places each parameter (default ``jax.device_put``)."""
    graphdef, state, flat = abstract_model(lambda: LlavaEncoder(cfg, rngs=nnx.Rngs(0)))
    return materialize(graphdef, state, convert_llava(cfg, tensors, flat), put=put)


__all__ = ["LlavaConfig", "LlavaEncoder", "Projector", "convert_llava", "hidden_states", "load_llava",
           "scatter_features"]
