"""The SkyReels-V2 DiT (diffusers ``SkyReelsV2Transformer3DModel``): the core's Wan DiT plus what SkyReels adds.

* Diffusion forcing: ``timestep`` (B, F) holds one timestep per latent frame; the time embedding and the blocks'
  and head's modulation are then per frame (the core's per-frame path, broadcast over each frame's tokens).
* Causal frame blocks (``num_frame_per_block`` > 1, diffusers' ``_set_ar_attention``): block-causal
  self-attention over blocks of that many latent frames.
* The fps embedding (``inject_sample_info``): ``fps`` (B,) indexes a 2-row table (0 for 16 fps, 1 otherwise),
  projected by Linear -> SiLU -> Linear to the 6-way modulation and added to every frame's.

The time sinusoid is diffusers' ``get_1d_sincos_pos_embed_from_grid`` (cos first), evaluated in float32 here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from vidax_core.nn.layers import Linear, param
from vidax_core.wan_dit.model import EMBED, WanBlock, WanDiT, WanDiTConfig, run_blocks


@dataclasses.dataclass(frozen=True)
class SkyReelsDiTConfig(WanDiTConfig):
    """Field names match diffusers' ``config.json`` for ``SkyReelsV2Transformer3DModel``."""

    inject_sample_info: bool = False


class SkyReelsBlock(WanBlock):
    """The Wan block whose 4-D modulation is per latent frame (never per token: SkyReels' timesteps are per
    frame), whatever the frame and token counts."""

    frame_modulation = True


class SkyReelsDiT(WanDiT):
    """``model(latents, timestep, context, image_context=None, fps=None)``: ``timestep`` (B,) per sample or (B, F)
    per latent frame (diffusion forcing); ``fps`` (B,) int, the fps table row, required with
    ``inject_sample_info``."""

    block_type = SkyReelsBlock

    def __init__(self, cfg: SkyReelsDiTConfig, *, rngs: nnx.Rngs):
        super().__init__(cfg, rngs=rngs)
        dim, dt = cfg.dim, cfg.dtype
        if cfg.inject_sample_info:
            self.fps_embedding = param(jax.random.normal(rngs.params(), (2, dim), jnp.float32).astype(dt),
                                       (None, EMBED))
            self.fps_linear_1 = Linear(dim, dim, (None, EMBED), dtype=dt, rngs=rngs)
            self.fps_linear_2 = Linear(dim, 6 * dim, (None, EMBED), dtype=dt, rngs=rngs)
        else:
            self.fps_embedding = self.fps_linear_1 = self.fps_linear_2 = None

    def fps_modulation(self, fps: jax.Array | None, batch: int) -> jax.Array | None:
        """(B, 6, dim) added to the time modulation, or None without the fps embedding."""
        if self.fps_embedding is None:
            return None
        if fps is None:
            raise ValueError("this SkyReels-V2 DiT embeds the fps (inject_sample_info): pass fps=(B,) table rows")
        e = jnp.take(self.fps_embedding[...], jnp.asarray(fps, jnp.int32).reshape(-1), axis=0)
        out = self.fps_linear_2(jax.nn.silu(self.fps_linear_1(e)))
        return jnp.broadcast_to(out.reshape(-1, 6, out.shape[-1] // 6), (batch, 6, out.shape[-1] // 6))

    def embed(self, latents: jax.Array, timestep: jax.Array, context: jax.Array, fps: jax.Array | None = None):
        """Patchify + time/text embeddings: (x, ctx, temb, tproj, rope, grid); temb (B[, F], dim) and tproj
        (B[, F], 6, dim), per frame when the timesteps are (or the causal blocks need them)."""
        x, grid = self.patch_embed(latents)
        b = latents.shape[0]
        if timestep.ndim == 2 and timestep.shape != (b, grid[0]):
            raise ValueError(f"per-frame timesteps must be ({b}, {grid[0]}), got {tuple(timestep.shape)}")
        temb, tproj = self.time_embed(timestep)
        extra = self.fps_modulation(fps, b)
        if extra is not None:
            tproj = tproj + (extra[:, None] if tproj.ndim == 4 else extra).astype(tproj.dtype)
        if timestep.ndim == 1 and self.cfg.num_frame_per_block > 1:  # the causal blocks read frames from it
            temb = jnp.broadcast_to(temb[:, None], (b, grid[0]) + temb.shape[1:])
            tproj = jnp.broadcast_to(tproj[:, None], (b, grid[0]) + tproj.shape[1:])
        return x, self.text_embed(context), temb, tproj, self.rope(grid), grid

    def pre(self, latents: jax.Array, timestep: jax.Array, context: jax.Array, image_context: jax.Array | None = None,
            fps: jax.Array | None = None) -> tuple[jax.Array, dict]:
        x, ctx, temb, tproj, rope, _ = self.embed(latents, timestep, context, fps)
        aux = {"ctx": ctx, "temb": temb, "tproj": tproj, "rope": rope}
        img_ctx = self.embed_image(image_context)
        if img_ctx is not None:
            aux["img_ctx"] = img_ctx
        return x, aux

    def __call__(self, latents: jax.Array, timestep: jax.Array, context: jax.Array,
                 image_context: jax.Array | None = None, fps: jax.Array | None = None) -> jax.Array:
        x, ctx, temb, tproj, rope, grid = self.embed(latents, timestep, context, fps)
        img_ctx = self.embed_image(image_context)
        graphdef, state = self.split_blocks()
        x = run_blocks(graphdef, state, x, ctx, tproj, rope, img_ctx)
        return self.head(x, temb, grid)


def config_for_run(config: dict, run: Any = None, **overrides: Any) -> SkyReelsDiTConfig:
    """The DiT config of a checkpoint's ``config.json`` for a run: ``options.causal_block_size`` (the pipeline's
    ``_set_ar_attention``) sets ``num_frame_per_block`` when given."""
    cbs = (dict(run.options or {}).get("causal_block_size") if run is not None else None)
    if cbs is not None:
        overrides["num_frame_per_block"] = int(cbs)
    return SkyReelsDiTConfig.from_config(config, **overrides)


def example_inputs(cfg: SkyReelsDiTConfig, ckpt: Any, batch: int, grid: Any, text: int) -> tuple[Any, Any, dict]:
    """``DitBuild.example_inputs``: Wan2.1's (the text context; for image-to-video the condition channels and the
    CLIP tokens) and, with the fps embedding, the fps rows."""
    from vidax_core.wan_dit.conditioning import example_inputs as wan_inputs

    if cfg.is_i2v or cfg.in_channels != cfg.out_channels:
        latents, context, kwargs = wan_inputs(cfg, ckpt, batch, grid, text)
    else:
        latents, context, kwargs = None, ((batch, text, cfg.text_dim), cfg.dtype), {}
    return latents, context, {**kwargs, **({"fps": ((batch,), "int32")} if cfg.inject_sample_info else {})}
