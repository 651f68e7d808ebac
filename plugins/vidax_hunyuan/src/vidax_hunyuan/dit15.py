"""HunyuanVideo-1.5 video diffusion transformer (diffusers ``HunyuanVideo15Transformer3DModel``) in Flax NNX.

What differs from the 1.0 DiT (:mod:`vidax_hunyuan.dit`), whose pieces it reuses:

* ``num_layers`` double-stream blocks only (1.0's :class:`~vidax_hunyuan.dit.DoubleBlock`, same weights and
  wiring), no single-stream blocks; patch 1 in the published configs, 65 input channels (the noisy latent, a
  conditioning latent and its mask, concatenated by the caller; zeros for text-to-video);
* the modulation ``temb`` is the embedded (float) timestep alone, plus, with ``use_meanflow`` (the step-distilled
  I2V checkpoint), the embedding of a second timestep ``timestep_r``; no guidance or pooled-text embedding;
* the conditioning stream joins three token sets, each tagged by a learned type embedding
  (``cond_type_embed``: 0 Qwen, 1 byT5, 2 SigLIP): the Qwen hidden states through 1.0's token refiner (padded keys
  masked, no always-visible key 0), the byT5 states through an MLP, the SigLIP image tokens through an MLP with
  layer norms. Each sample's tokens are reordered [image | byT5 | Qwen] valid ones first, then the invalid ones
  (padded byT5/Qwen tokens zeroed), so the joint attention's key mask is a prefix of lengths;
* text-to-video: image tokens that are all zero (per sample; the reference tests the whole batch, the same in
  every pipeline call since each CFG branch is its own call) are zeroed and masked out, as the reference; with no
  ``"image"`` in the context they are left out altogether, which gives the same video output (masked keys add
  nothing) over a shorter conditioning stream.

Attention masks are key masks only: the reference also masks padded conditioning *queries*, whose rows never
reach a video token, so the video output is the same.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Mapping

import jax
import jax.numpy as jnp
from flax import nnx

from vidax_core.nn.layers import Linear, param, stacked
from vidax_core.nn.norms import LayerNorm
from vidax_core.nn.timestep import TimestepEmbedding, timestep_embedding
from vidax_core.parallel.sharding import constrain

from .dit import (BATCH, EMBED, MLP, SEQ, DoubleBlock, HunyuanDims, HunyuanStack, TokenRefiner, embed_patches,
                  rope_tables)

BYT5_HIDDEN = 2048  # diffusers' ``HunyuanVideo15ByT5TextProjection`` width (fixed, not in config.json)
PROJ_EPS = 1e-5  # torch LayerNorm default, used by the byT5 and image projections
TYPE_QWEN, TYPE_BYT5, TYPE_IMAGE = 0, 1, 2


@dataclasses.dataclass(frozen=True)
class HunyuanDiT15Config(HunyuanDims):
    """Field names match diffusers' ``config.json``; ``dtype`` is the parameter dtype. ``target_size`` and
    ``task_type`` are pipeline facts the checkpoint carries (kept so ``from_config`` reads the file whole)."""

    in_channels: int = 65
    out_channels: int = 32
    num_attention_heads: int = 16
    attention_head_dim: int = 128
    num_layers: int = 54
    num_refiner_layers: int = 2
    mlp_ratio: float = 4.0
    patch_size: int = 1
    patch_size_t: int = 1
    qk_norm: str = "rms_norm"
    text_embed_dim: int = 3584
    text_embed_2_dim: int = 1472
    image_embed_dim: int = 1152
    rope_theta: float = 256.0
    rope_axes_dim: tuple[int, int, int] = (16, 56, 56)
    target_size: int = 640
    task_type: str = "i2v"
    use_meanflow: bool = False
    dtype: Any = jnp.float32

    family: ClassVar[str] = "HunyuanVideo-1.5"


class ByT5Projection(nnx.Module):
    """diffusers ``HunyuanVideo15ByT5TextProjection``: LayerNorm -> Linear -> GELU -> Linear -> GELU -> Linear."""

    def __init__(self, cfg: HunyuanDiT15Config, *, rngs: nnx.Rngs):
        dt = cfg.dtype
        self.norm = LayerNorm(cfg.text_embed_2_dim, eps=PROJ_EPS)
        self.linear_1 = Linear(cfg.text_embed_2_dim, BYT5_HIDDEN, (None, MLP), dtype=dt, rngs=rngs)
        self.linear_2 = Linear(BYT5_HIDDEN, BYT5_HIDDEN, (MLP, None), dtype=dt, rngs=rngs)
        self.linear_3 = Linear(BYT5_HIDDEN, cfg.dim, (None, EMBED), dtype=dt, rngs=rngs, fp32_out=True)

    def __call__(self, x: jax.Array) -> jax.Array:
        def gelu(h):
            return jax.nn.gelu(h, approximate=False)

        h = gelu(constrain(self.linear_1(self.norm(x.astype(jnp.float32))), (BATCH, None, MLP)))
        return self.linear_3(gelu(constrain(self.linear_2(h), (BATCH, None, None))))


class ImageProjection(nnx.Module):
    """diffusers ``HunyuanVideo15ImageProjection``: LayerNorm -> Linear -> GELU -> Linear -> LayerNorm."""

    def __init__(self, cfg: HunyuanDiT15Config, *, rngs: nnx.Rngs):
        dt, d_in = cfg.dtype, cfg.image_embed_dim
        self.norm_in = LayerNorm(d_in, eps=PROJ_EPS)
        self.linear_1 = Linear(d_in, d_in, (None, MLP), dtype=dt, rngs=rngs)
        self.linear_2 = Linear(d_in, cfg.dim, (MLP, EMBED), dtype=dt, rngs=rngs, fp32_out=True)
        self.norm_out = LayerNorm(cfg.dim, (EMBED,), eps=PROJ_EPS)

    def __call__(self, x: jax.Array) -> jax.Array:
        h = constrain(self.linear_1(self.norm_in(x.astype(jnp.float32))), (BATCH, None, MLP))
        return self.norm_out(self.linear_2(jax.nn.gelu(h, approximate=False)))


def valid_first(tokens: jax.Array, valid: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Per sample, the valid tokens in their order, then the invalid ones in theirs (a stable sort on ``~valid``);
    returns the reordered tokens (B, L, D) and the key mask, now a prefix of ``sum(valid)`` (B, L)."""
    order = jnp.argsort(~valid, axis=1, stable=True)
    tokens = jnp.take_along_axis(tokens, order[:, :, None], axis=1)
    n = jnp.sum(valid, axis=1)
    return tokens, jnp.arange(valid.shape[1])[None, :] < n[:, None]


class HunyuanDiT15(HunyuanStack, nnx.Module):
    """``__call__(latents, timestep, context, timestep_r=None)``: latents (B, C, F, H, W); timestep (B,) float;
    context a dict ``{"hidden": (B, L, text_embed_dim) Qwen states, "mask": (B, L), "hidden_2": (B, L2,
    text_embed_2_dim) byT5 states, "mask_2": (B, L2), "image": (B, N, image_embed_dim) SigLIP tokens (optional;
    all-zero or absent for text-to-video)}``; ``timestep_r`` (B,) the meanflow target timestep (``use_meanflow``
    only; None embeds ``timestep`` alone, as the reference). Returns (B, out_C, F, H, W) float32."""

    block_groups = ("double_blocks",)
    family = "HunyuanVideo-1.5"

    def __init__(self, cfg: HunyuanDiT15Config, *, rngs: nnx.Rngs):
        self.cfg = cfg
        dim = cfg.dim
        self.init_patch_embed(cfg, rngs)
        self.image_embedder = ImageProjection(cfg, rngs=rngs)
        self.refiner = TokenRefiner(cfg, rngs=rngs, first_key_visible=False)
        self.byt5_embedder = ByT5Projection(cfg, rngs=rngs)
        self.timestep_embedder = TimestepEmbedding(256, dim, rngs=rngs)
        self.timestep_embedder_r = TimestepEmbedding(256, dim, rngs=rngs) if cfg.use_meanflow else None
        self.cond_type_embed = param(jax.random.normal(rngs.params(), (3, dim), jnp.float32), (None, EMBED))
        self.double_blocks = stacked(lambda r: DoubleBlock(cfg, rngs=r), cfg.num_layers, rngs)
        self.init_output_head(cfg, rngs)

    # -- conditioning ------------------------------------------------------------------------------------------

    def _temb(self, timestep: jax.Array, timestep_r: jax.Array | None, b: int) -> jax.Array:
        def sin(t):
            return timestep_embedding(t, 256, flip_sin_to_cos=True, downscale_freq_shift=0)

        def as_batch(t):
            return jnp.broadcast_to(jnp.asarray(t, jnp.float32).reshape(-1), (b,))

        temb = self.timestep_embedder(sin(as_batch(timestep)))
        if timestep_r is not None:
            if self.timestep_embedder_r is None:
                raise ValueError("timestep_r was given but this HunyuanVideo-1.5 DiT has no use_meanflow embedding")
            temb = temb + self.timestep_embedder_r(sin(as_batch(timestep_r)))
        return temb

    def _conditioning(self, context: Mapping[str, jax.Array], timestep: jax.Array) -> tuple[jax.Array, jax.Array]:
        """The joint conditioning stream (B, L_all, dim) float32, valid tokens first, and its key mask."""
        type_emb = self.cond_type_embed[...].astype(jnp.float32)
        mask = context["mask"] != 0
        qwen = self.refiner(context["hidden"], timestep, context["mask"]) + type_emb[TYPE_QWEN]
        mask_2 = context["mask_2"] != 0
        byt5 = self.byt5_embedder(context["hidden_2"]) + type_emb[TYPE_BYT5]
        parts = [jnp.where(mask_2[..., None], byt5, 0.0), jnp.where(mask[..., None], qwen, 0.0)]
        valid = [mask_2, mask]
        image = context.get("image")
        if image is not None:
            has_image = jnp.any(image != 0, axis=(1, 2))  # (B,)
            img = jnp.where(has_image[:, None, None], self.image_embedder(image), 0.0) + type_emb[TYPE_IMAGE]
            parts.insert(0, img)
            valid.insert(0, jnp.broadcast_to(has_image[:, None], image.shape[:2]))
        tokens, kv = valid_first(jnp.concatenate(parts, axis=1), jnp.concatenate(valid, axis=1))
        return constrain(tokens, (BATCH, None, EMBED)), kv

    # -- staged forward: pre -> double_blocks -> post ----------------------------------------------------------

    def pre(self, latents: jax.Array, timestep: jax.Array, context: Mapping[str, jax.Array],
            timestep_r: jax.Array | None = None) -> tuple[tuple[jax.Array, jax.Array], dict]:
        b = latents.shape[0]
        vid, grid = embed_patches(self, latents)
        timestep = jnp.broadcast_to(jnp.asarray(timestep, jnp.float32).reshape(-1), (b,))
        txt, kv = self._conditioning(context, timestep)
        cos, sin = rope_tables(self.cfg, grid)
        aux = {"temb": self._temb(timestep, timestep_r, b), "txt_mask": kv,
               "rope": (constrain(cos, (SEQ, None)), constrain(sin, (SEQ, None)))}
        return (vid, txt), aux

    def __call__(self, latents: jax.Array, timestep: jax.Array, context: Mapping[str, jax.Array],
                 timestep_r: jax.Array | None = None) -> jax.Array:
        return self.run(latents, timestep, context, timestep_r)
