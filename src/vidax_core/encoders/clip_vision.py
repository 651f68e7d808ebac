"""CLIP vision tower (transformers ``CLIPVisionModel``; Wan2.1 I2V's ViT-H/14 image encoder): a configuration of
:class:`vidax_core.encoders.vit.ViTEncoder` (class token, bias-free patch conv, ``pre_layrnorm``, pooled output =
``post_layernorm`` of the class token), plus ``CLIPImageProcessor``'s preprocessing.

Wan's image-to-video pipeline feeds ``CLIPImageProcessor(image)`` into ``CLIPVisionModel(...,
output_hidden_states=True)`` and keeps ``hidden_states[-2]``: the residual stream after all but the last encoder
layer (no post layer norm). :meth:`CLIPVisionEncoder.hidden_state` runs exactly the layers that index needs.
Precision follows :mod:`vidax_core.encoders.vit` (fp32 norms, softmax, residual and outputs); Wan runs it in fp32.

:func:`preprocess_images` is ``CLIPImageProcessor``'s PIL path (shortest side -> 224 bicubic with PIL, center
crop, /255, CLIP mean/std) in numpy, bit-compatible with transformers' PIL backend.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.encoders.policy import resolve_dtype
from vidax_core.io.arch import from_config_dict
from vidax_core.encoders.vit import ACTIVATIONS, VISION_RULES, ViTConfig, ViTEncoder, vit_ignore
from vidax_core.io.convert import KeyRule, convert
from vidax_core.nn.state import abstract_model, materialize

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


@dataclasses.dataclass(frozen=True)
class CLIPVisionConfig:
    """transformers ``CLIPVisionConfig`` field names and defaults (ViT-B/32); Wan's ViT-H/14 comes from config.json."""

    hidden_size: int = 768
    intermediate_size: int = 3072
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    num_channels: int = 3
    image_size: int = 224
    patch_size: int = 32
    hidden_act: str = "quick_gelu"
    layer_norm_eps: float = 1e-5
    dtype: Any = None  # None: the run's encoder dtype (vidax_core.encoders.policy), float32 outside a run

    def __post_init__(self) -> None:
        resolve_dtype(self)
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(f"hidden_act={self.hidden_act!r} is not supported: expected one of {sorted(ACTIVATIONS)}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError("hidden_size must be a multiple of num_attention_heads")

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> "CLIPVisionConfig":
        """From a ``CLIPVisionModel`` config.json, or a full ``CLIPModel`` one (its ``vision_config``); the file's
        ``dtype`` is ignored (pass ``dtype=`` to choose the compute dtype)."""
        config = config.get("vision_config", config)
        return from_config_dict(cls, {k: v for k, v in config.items() if k != "dtype"}, **overrides)

    @property
    def num_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2

    def vit(self) -> ViTConfig:
        """The :class:`ViTConfig` of this tower."""
        return ViTConfig.clip_vision(dataclasses.asdict(self), dtype=self.dtype)


class CLIPVisionEncoder(ViTEncoder):
    """``CLIPVisionModel`` as a :class:`ViTEncoder`: :meth:`hidden_state` gives ``hidden_states[index]``,
    ``__call__`` (last_hidden_state, pooler_output = post_layernorm(last_hidden_state[:, 0]))."""

    def __init__(self, cfg: CLIPVisionConfig | ViTConfig, *, rngs: nnx.Rngs):
        super().__init__(cfg.vit() if isinstance(cfg, CLIPVisionConfig) else cfg, rngs=rngs)


def encode_image(encoder: CLIPVisionEncoder, images: Sequence[Any] | Any) -> jax.Array:
    """Wan I2V's ``encode_image``: CLIP preprocessing then ``hidden_states[-2]`` (B, 257, 1280 for ViT-H/14)."""
    return encoder.hidden_state(jnp.asarray(preprocess_images(images, encoder.cfg.image_size)), -2)


# --------------------------------------------------------------------------------------------------------------
# Image preprocessing (CLIPImageProcessor, PIL backend)
# --------------------------------------------------------------------------------------------------------------


def preprocess_images(
    images: Sequence[Any] | Any,
    size: int = 224,
    crop: int | None = None,
    mean: Sequence[float] = CLIP_MEAN,
    std: Sequence[float] = CLIP_STD,
) -> np.ndarray:
    """PIL images (or uint8 HWC arrays) -> ``pixel_values`` (B, 3, crop, crop) float32.

    As transformers' ``CLIPImageProcessor`` (PIL backend): convert to RGB (transparency composited onto white);
    resize with PIL bicubic so the shorter
    side is ``size`` and the longer ``int(size * long / short)``; center crop at ``((h - crop) // 2, (w - crop) //
    2)``; rescale by 1/255 (float64, then float32); ``(x - mean) / std`` per channel.
    """
    from PIL import Image

    crop = crop or size
    if not isinstance(images, (list, tuple)):
        images = [images]
    out = []
    for img in images:
        if not isinstance(img, Image.Image):
            arr = np.asarray(img)
            if arr.dtype != np.uint8:
                raise ValueError("preprocess_images takes PIL images or uint8 (H, W, 3) arrays")
            img = Image.fromarray(arr)
        if "A" in img.getbands() or img.info.get("transparency") is not None:  # composite onto white
            img = img.convert("RGBA")
            img = Image.alpha_composite(Image.new("RGBA", img.size, (255, 255, 255, 255)), img)
        img = img.convert("RGB")
        w, h = img.size
        short, long = (w, h) if w <= h else (h, w)
        new_short, new_long = size, int(size * long / short)
        new_w, new_h = (new_short, new_long) if w <= h else (new_long, new_short)
        arr = np.asarray(img.resize((new_w, new_h), resample=Image.Resampling.BICUBIC))
        top, left = (new_h - crop) // 2, (new_w - crop) // 2
        arr = arr[top : top + crop, left : left + crop]
        x = (arr.astype(np.float64) * (1 / 255)).astype(np.float32)
        x = (x - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)
        out.append(np.transpose(x, (2, 0, 1)))
    return np.stack(out).astype(np.float32)


# --------------------------------------------------------------------------------------------------------------
# Checkpoint conversion
# --------------------------------------------------------------------------------------------------------------

CLIP_VISION_RULES: tuple[KeyRule, ...] = VISION_RULES

#: Keys of a ``CLIPVisionModelWithProjection`` / full ``CLIPModel`` checkpoint that the tower does not use.
CLIP_VISION_IGNORE: tuple[str, ...] = vit_ignore(CLIPVisionConfig().vit())


def load_clip_vision(cfg: CLIPVisionConfig, tensors: Mapping[str, Any]) -> CLIPVisionEncoder:
    """Build a :class:`CLIPVisionEncoder` from a transformers state dict (key -> array or zero-arg loader)."""
    graphdef, state, flat = abstract_model(lambda: CLIPVisionEncoder(cfg, rngs=nnx.Rngs(0)))
    values = convert(tensors, CLIP_VISION_RULES, flat, component="image encoder (CLIP vision)",
                     ignore=CLIP_VISION_IGNORE)
    return materialize(graphdef, state, values)
