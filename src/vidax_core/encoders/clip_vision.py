"""CLIP vision tower (transformers ``CLIPVisionModel``; Wan2.1 I2V's ViT-H/14 image encoder) in Flax NNX.

Wan's image-to-video pipeline feeds ``CLIPImageProcessor(image)`` into ``CLIPVisionModel(...,
output_hidden_states=True)`` and keeps ``hidden_states[-2]``: the residual stream after all but the last encoder
layer (no post layer norm). :meth:`CLIPVisionEncoder.hidden_state` runs exactly the layers that index needs.

Numerics follow transformers:

* patch embedding: a bias-free ``patch_size``-stride conv, flattened row-major; a learned class token in front;
  learned absolute position embeddings added (the checkpoint's ``image_size`` only, no interpolation);
* ``pre_layrnorm`` (sic) LayerNorm, then pre-norm blocks: LayerNorm -> multi-head self-attention (biases,
  1/sqrt(head_dim) scaling, no mask) -> residual, LayerNorm -> MLP ``fc2(act(fc1 x))`` -> residual;
* ``hidden_states[0]`` is the pre-layer-norm output, ``hidden_states[i]`` the output of layer ``i``.

Precision policy: parameters and matmuls in ``cfg.dtype`` (fp32 accumulation), LayerNorms, softmax and the
residual stream in float32; outputs float32. Wan runs this encoder in fp32.

Blocks are stacked on a leading ``'layers'`` axis and run with ``jax.lax.scan``; parameters carry logical axis
names ``'embed'`` (hidden_size), ``'heads'`` (attention width), ``'mlp'`` (intermediate_size), ``'layers'``.

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

from vidax_core.config.arch import from_config_dict
from vidax_core.io.convert import KeyRule, conv, convert, linear
from vidax_core.nn.layers import Linear, param, scan_blocks, stacked
from vidax_core.nn.state import abstract_model, materialize


EMBED, HEADS, MLP = "embed", "heads", "mlp"

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)

_ACTIVATIONS = {
    "quick_gelu": lambda x: x * jax.nn.sigmoid(1.702 * x),
    "gelu": lambda x: jax.nn.gelu(x, approximate=False),
    "gelu_new": lambda x: jax.nn.gelu(x, approximate=True),
    "gelu_pytorch_tanh": lambda x: jax.nn.gelu(x, approximate=True),
    "relu": jax.nn.relu,
    "silu": jax.nn.silu,
}


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
    dtype: Any = jnp.float32

    def __post_init__(self) -> None:
        if self.hidden_act not in _ACTIVATIONS:
            raise ValueError(f"hidden_act={self.hidden_act!r} is not supported: expected one of {sorted(_ACTIVATIONS)}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError("hidden_size must be a multiple of num_attention_heads")

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> "CLIPVisionConfig":
        """From a ``CLIPVisionModel`` config.json, or a full ``CLIPModel`` one (its ``vision_config``)."""
        return from_config_dict(cls, config.get("vision_config", config), **overrides)

    @property
    def num_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2


class LayerNorm(nnx.Module):
    """Affine LayerNorm over the last axis, fp32 statistics and output."""

    def __init__(self, dim: int, *, eps: float):
        self.eps = eps
        self.scale = param(jnp.ones((dim,), jnp.float32), (EMBED,))
        self.bias = param(jnp.zeros((dim,), jnp.float32), (EMBED,))

    def __call__(self, x: jax.Array) -> jax.Array:
        xf = x.astype(jnp.float32)
        xc = xf - jnp.mean(xf, axis=-1, keepdims=True)
        y = xc * jax.lax.rsqrt(jnp.mean(xc * xc, axis=-1, keepdims=True) + self.eps)
        return y * self.scale[...].astype(jnp.float32) + self.bias[...].astype(jnp.float32)


class CLIPAttention(nnx.Module):
    def __init__(self, cfg: CLIPVisionConfig, *, rngs: nnx.Rngs):
        d, dt = cfg.hidden_size, cfg.dtype
        self.heads = cfg.num_attention_heads
        self.q_proj = Linear(d, d, (EMBED, HEADS), dtype=dt, rngs=rngs, fp32_out=True)
        self.k_proj = Linear(d, d, (EMBED, HEADS), dtype=dt, rngs=rngs, fp32_out=True)
        self.v_proj = Linear(d, d, (EMBED, HEADS), dtype=dt, rngs=rngs, fp32_out=True)
        self.out_proj = Linear(d, d, (HEADS, EMBED), dtype=dt, rngs=rngs, fp32_out=True)

    def __call__(self, x: jax.Array) -> jax.Array:
        b, n, d = x.shape
        h = self.heads
        q, k, v = (p(x).reshape(b, n, h, d // h) for p in (self.q_proj, self.k_proj, self.v_proj))
        logits = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32) * (d // h) ** -0.5
        probs = jax.nn.softmax(logits, axis=-1)
        out = jnp.einsum("bhqk,bkhd->bqhd", probs, v, preferred_element_type=jnp.float32)
        return self.out_proj(out.reshape(b, n, d))


class CLIPMLP(nnx.Module):
    def __init__(self, cfg: CLIPVisionConfig, *, rngs: nnx.Rngs):
        self.act = _ACTIVATIONS[cfg.hidden_act]
        self.fc1 = Linear(cfg.hidden_size, cfg.intermediate_size, (EMBED, MLP), dtype=cfg.dtype, rngs=rngs, fp32_out=True)
        self.fc2 = Linear(cfg.intermediate_size, cfg.hidden_size, (MLP, EMBED), dtype=cfg.dtype, rngs=rngs, fp32_out=True)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.fc2(self.act(self.fc1(x)))


class CLIPBlock(nnx.Module):
    def __init__(self, cfg: CLIPVisionConfig, *, rngs: nnx.Rngs):
        self.layer_norm1 = LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.self_attn = CLIPAttention(cfg, rngs=rngs)
        self.layer_norm2 = LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.mlp = CLIPMLP(cfg, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = x + self.self_attn(self.layer_norm1(x))
        return x + self.mlp(self.layer_norm2(x))


def run_blocks(block_graphdef: nnx.GraphDef, stacked_block_state: nnx.State, x: jax.Array) -> jax.Array:
    """Run blocks stacked on the leading axis of ``stacked_block_state`` (any slice of it) with ``lax.scan``."""
    return scan_blocks(block_graphdef, stacked_block_state, x)


class CLIPVisionEncoder(nnx.Module):
    """``CLIPVisionModel``: :meth:`hidden_state` gives ``hidden_states[index]``, ``__call__`` the pooled output."""

    def __init__(self, cfg: CLIPVisionConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        d, p, dt = cfg.hidden_size, cfg.patch_size, cfg.dtype
        self.class_embedding = param(jax.random.normal(rngs.params(), (d,), dt), (EMBED,))
        self.patch_kernel = param(
            nnx.initializers.lecun_normal()(rngs.params(), (p, p, cfg.num_channels, d), dt), (None, None, None, EMBED)
        )
        self.position_embedding = param(
            jax.random.normal(rngs.params(), (cfg.num_patches + 1, d), dt) * 0.02, (None, EMBED)
        )
        self.pre_layrnorm = LayerNorm(d, eps=cfg.layer_norm_eps)
        self.blocks = stacked(lambda r: CLIPBlock(cfg, rngs=r), cfg.num_hidden_layers, rngs)
        self.post_layernorm = LayerNorm(d, eps=cfg.layer_norm_eps)

    def embed(self, pixel_values: jax.Array) -> jax.Array:
        """(B, C, S, S) channel-first pixels (``CLIPImageProcessor`` output) -> ``hidden_states[0]`` float32."""
        cfg = self.cfg
        if pixel_values.shape[-2:] != (cfg.image_size, cfg.image_size):
            raise ValueError(f"pixel_values are {pixel_values.shape[-2:]}, the model takes {cfg.image_size}^2")
        k = self.patch_kernel[...]
        x = jnp.moveaxis(jnp.asarray(pixel_values).astype(k.dtype), 1, -1)
        x = jax.lax.conv_general_dilated(
            x, k, (cfg.patch_size,) * 2, "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"),
            preferred_element_type=jnp.float32,
        )
        b = x.shape[0]
        x = x.reshape(b, -1, cfg.hidden_size)
        cls = jnp.broadcast_to(self.class_embedding[...].astype(jnp.float32), (b, 1, cfg.hidden_size))
        x = jnp.concatenate([cls, x], axis=1) + self.position_embedding[...].astype(jnp.float32)[None]
        return self.pre_layrnorm(x)

    def hidden_state(self, pixel_values: jax.Array, index: int = -2) -> jax.Array:
        """transformers' ``hidden_states[index]`` (B, 1 + num_patches, hidden) float32; runs only the layers needed.

        Wan's image embedding is ``index=-2`` (the output of the second-to-last layer).
        """
        n = self.cfg.num_hidden_layers
        layers = index % (n + 1)
        graphdef, state = nnx.split(self.blocks)
        state = jax.tree.map(lambda a: a[:layers], state)
        return run_blocks(graphdef, state, self.embed(pixel_values))

    def __call__(self, pixel_values: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(last_hidden_state, pooler_output = post_layernorm(last_hidden_state[:, 0]))."""
        last = self.hidden_state(pixel_values, -1)
        return last, self.post_layernorm(last[:, 0])


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

_L = r"(?:vision_model\.)?encoder\.layers\.(\d+)\."
_P = r"(?:vision_model\.)?"

CLIP_VISION_RULES: tuple[KeyRule, ...] = (
    KeyRule(_P + r"embeddings\.class_embedding", "class_embedding"),
    KeyRule(_P + r"embeddings\.patch_embedding\.weight", "patch_kernel", conv),
    KeyRule(_P + r"embeddings\.position_embedding\.weight", "position_embedding"),
    KeyRule(_P + r"(pre_layrnorm|post_layernorm)\.weight", "{1}/scale"),
    KeyRule(_P + r"(pre_layrnorm|post_layernorm)\.bias", "{1}/bias"),
    KeyRule(_L + r"self_attn\.(q_proj|k_proj|v_proj|out_proj)\.weight", "blocks/self_attn/{2}/kernel", linear, 1),
    KeyRule(_L + r"self_attn\.(q_proj|k_proj|v_proj|out_proj)\.bias", "blocks/self_attn/{2}/bias", None, 1),
    KeyRule(_L + r"mlp\.(fc1|fc2)\.weight", "blocks/mlp/{2}/kernel", linear, 1),
    KeyRule(_L + r"mlp\.(fc1|fc2)\.bias", "blocks/mlp/{2}/bias", None, 1),
    KeyRule(_L + r"(layer_norm1|layer_norm2)\.weight", "blocks/{2}/scale", None, 1),
    KeyRule(_L + r"(layer_norm1|layer_norm2)\.bias", "blocks/{2}/bias", None, 1),
)

#: Keys of a ``CLIPVisionModelWithProjection`` / full ``CLIPModel`` checkpoint that the tower does not use.
CLIP_VISION_IGNORE: tuple[str, ...] = (
    r"(?:vision_model\.)?embeddings\.position_ids", r"visual_projection\.weight", r"text_model\..*",
    r"text_projection\.weight", r"logit_scale",
)


def load_clip_vision(cfg: CLIPVisionConfig, tensors: Mapping[str, Any]) -> CLIPVisionEncoder:
    """Build a :class:`CLIPVisionEncoder` from a transformers state dict (key -> array or zero-arg loader)."""
    graphdef, state, flat = abstract_model(lambda: CLIPVisionEncoder(cfg, rngs=nnx.Rngs(0)))
    values = convert(tensors, CLIP_VISION_RULES, flat, component="image encoder (CLIP vision)",
                     ignore=CLIP_VISION_IGNORE)
    return materialize(graphdef, state, values)
