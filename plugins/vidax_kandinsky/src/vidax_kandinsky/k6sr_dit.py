"""The Kandinsky 6 video super-resolution transformer (diffusers ``Kandinsky6SRTransformer3DModel``) in Flax NNX.

A text-free DiT that refines one tile of K-VAE latents at a time. Input ``(B, T, H, W, 2 C + 1)`` channel-last:
the noisy latent, an anchor latent and its mask (the released checkpoints are anchor-free: the pipeline gives
zeros); output the velocity ``(B, T, H, W, out_visual_dim)`` (``in_visual_dim``, or ``n_grid`` times it for a
PiFlow-distilled head). The model:

* embeds the timestep (diffusers' sinusoid over ``model_dim`` then an MLP to ``time_dim``, float32) plus
  ``pooled_bias``, the constant the checkpoint conversion folded the empty caption's pooled projection into;
* patchifies the tile (``patch_size``, features ``(pt, ph, pw, C)``) and puts the tokens, and their 3-D RoPE
  (positions divided by the config's ``scale_factor``), in NABLA's fractal order: 8 x 8 patches of one frame;
* runs ``num_visual_blocks`` blocks of modulated self-attention and GELU feed-forward. The self-attention is
  NABLA's block-sparse attention (:func:`vidax_core.attention.nabla.nabla_attention`): per head and query block
  the key blocks holding ``nabla_threshold`` of the block-mean attention map, OR-ed with the sliding-tile prior
  of ``nabla_window`` (frames, block rows, block columns);
* undoes the order and unpatchifies through a modulated LayerNorm and a Linear (features ``(C, pt, ph, pw)``).

Norms, modulation and the residual additions run in float32, the residual stream is rounded to the parameter
dtype after each addition, the q/k RMS norms use ``eps = finfo(float32).eps`` and the time embedding and
modulation layers stay float32 (the reference's ``_keep_in_fp32_modules``). No bfloat16 rounding of q and k
(unlike Kandinsky 5). Offload streams the one block stack ``visual_blocks``; sequence parallelism runs NABLA
after the Ulysses all-to-all, on the whole sequence of each device's heads.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, ClassVar, Mapping

import jax
import jax.numpy as jnp
from flax import nnx

from vidax_core import (CheckedConfig, Linear, TimestepEmbedding, constrain, param, patchify, scan_blocks,
                        self_attention, split_modulation, stacked, timestep_embedding, unpatchify)

from .dit import BATCH, EMBED, FRACTAL, MAX_PERIOD, SEQ, AxesHeads, fractal
from .k6_dit import attention_layer, feed_forward, modulation, normed, residual, visual_rope

ROPE_LIMIT = 128  # Kandinsky6SRRoPE3D's tables: positions per axis


@dataclasses.dataclass(frozen=True)
class Kandinsky6SRDiTConfig(AxesHeads, CheckedConfig):
    """The fields of diffusers' ``Kandinsky6SRTransformer3DModel`` config.json under their names, defaults the
    reference's (the published VSR repos' config.json is in the vendor's older key format: diffusers reads the keys
    it knows and takes these defaults for the rest, and so does this reader); ``dtype`` is the matmul weights'."""

    in_visual_dim: int = 64
    out_visual_dim: int = 640
    time_dim: int = 512
    patch_size: tuple[int, int, int] = (1, 1, 1)
    model_dim: int = 1792
    ff_dim: int = 7168
    num_visual_blocks: int = 32
    axes_dims: tuple[int, int, int] = (16, 24, 24)
    scale_factor: tuple[float, float, float] = (1.0, 2.0, 2.0)
    nabla_threshold: float = 0.8
    nabla_window: tuple[int, int, int] = (11, 7, 7)
    tile_sizes: tuple[tuple[int, int], ...] = ((512, 512), (512, 768), (768, 512))
    dtype: Any = jnp.float32

    label: ClassVar[str] = "transformer/config.json (Kandinsky 6 SR)"

    @property
    def in_channels(self) -> int:
        """The latent, the anchor latent and the anchor mask."""
        return 2 * self.in_visual_dim + 1

    @property
    def n_grid(self) -> int:
        """Predictions per latent channel (a PiFlow-distilled head is this many times wider)."""
        return self.out_visual_dim // self.in_visual_dim

    def problems(self) -> list[str]:
        out = []
        if len(self.axes_dims) != 3 or any(int(a) % 2 for a in self.axes_dims):
            out.append(f"axes_dims {list(self.axes_dims)} must be three even sizes (RoPE rotates pairs)")
        if self.head_dim and self.model_dim % self.head_dim:
            out.append(f"model_dim={self.model_dim} is not a multiple of the head size sum(axes_dims)="
                       f"{self.head_dim}")
        if self.model_dim % 2:
            out.append(f"model_dim={self.model_dim} must be even (the time embedding's sinusoid)")
        if len(self.patch_size) != 3 or len(self.scale_factor) != 3 or len(self.nabla_window) != 3:
            out.append("patch_size, scale_factor and nabla_window need three entries (frames, rows, columns)")
        if self.in_visual_dim <= 0 or self.out_visual_dim % self.in_visual_dim:
            out.append(f"out_visual_dim={self.out_visual_dim} must be a multiple of in_visual_dim="
                       f"{self.in_visual_dim} (1, or a PiFlow grid)")
        if not 0.0 <= self.nabla_threshold <= 1.0:
            out.append(f"nabla_threshold={self.nabla_threshold} must be in [0, 1]")
        if not self.tile_sizes or any(len(t) != 2 or min(t) <= 0 for t in self.tile_sizes):
            out.append(f"tile_sizes {self.tile_sizes!r} must be (height, width) pairs of pixels")
        return out


class SRBlock(nnx.Module):
    """``Kandinsky6SRTransformerBlock``: modulated NABLA self-attention and feed-forward over the tile's tokens
    (in fractal order). The block grid travels in ``aux["nabla_grid"]``, a zero-size array whose shape is
    (frames, block rows, block columns)."""

    def __init__(self, cfg: Kandinsky6SRDiTConfig, *, rngs: nnx.Rngs):
        d = cfg.model_dim
        self.window, self.threshold = tuple(int(w) for w in cfg.nabla_window), float(cfg.nabla_threshold)
        self.visual_modulation = modulation(cfg.time_dim, 6 * d, rngs)
        self.self_attention = attention_layer(d, cfg.heads, cfg.dtype, rngs)
        self.feed_forward = feed_forward(d, cfg.ff_dim, cfg.dtype, rngs)

    def __call__(self, x: jax.Array, aux: Mapping[str, Any]) -> jax.Array:
        from vidax_core.attention.nabla import nabla_attention

        sh, sc, g, ff_sh, ff_sc, ff_g = split_modulation(self.visual_modulation(jax.nn.silu(aux["temb"])), 6)
        q, k, v = self.self_attention.qkv(normed(x, sh, sc), SEQ, aux["rope"])
        fn = functools.partial(nabla_attention, grid=aux["nabla_grid"].shape[:3], window=self.window,
                               threshold=self.threshold)
        x = residual(x, self.self_attention.out(self_attention(q, k, v, fn=fn)), g)
        x = residual(x, self.feed_forward(normed(x, ff_sh, ff_sc)), ff_g)
        return constrain(x, (BATCH, SEQ, EMBED))


class Kandinsky6SRDiT(nnx.Module):
    """``Kandinsky6SRTransformer3DModel`` (module docstring): ``pre`` -> ``visual_blocks`` -> ``post``.
    ``__call__(latents, timestep, context=None)``: the context is unused (the model takes no text)."""

    block_groups = ("visual_blocks",)

    def __init__(self, cfg: Kandinsky6SRDiTConfig, *, rngs: nnx.Rngs):
        cfg.check_supported()
        self.cfg = cfg
        d, p = cfg.model_dim, math.prod(cfg.patch_size)
        self.time_embeddings = TimestepEmbedding(d, cfg.time_dim, rngs=rngs)  # float32 (_keep_in_fp32_modules)
        self.pooled_bias = param(jnp.zeros((cfg.time_dim,), jnp.float32), (None,))
        self.visual_embeddings = Linear(p * cfg.in_channels, d, (None, EMBED), dtype=cfg.dtype, rngs=rngs)
        self.visual_blocks = stacked(lambda r: SRBlock(cfg, rngs=r), cfg.num_visual_blocks, rngs)
        self.out_modulation = modulation(cfg.time_dim, 2 * d, rngs)
        self.out_layer = Linear(d, p * cfg.out_visual_dim, (EMBED, None), dtype=cfg.dtype, rngs=rngs)

    def grid(self, latent_shape: tuple[int, ...]) -> tuple[int, int, int]:
        """The patch grid (T', H', W') of channel-last latents (B, T, H, W, C)."""
        return tuple(n // p for n, p in zip(latent_shape[1:4], self.cfg.patch_size))

    def pre(self, latents: jax.Array, timestep: jax.Array, context: Any = None) -> tuple[jax.Array, dict]:
        cfg = self.cfg
        b = latents.shape[0]
        t = jnp.broadcast_to(jnp.asarray(timestep, jnp.float32).reshape(-1), (b,))
        temb = self.time_embeddings(timestep_embedding(t, cfg.model_dim, flip_sin_to_cos=True,
                                                       downscale_freq_shift=0, max_period=MAX_PERIOD))
        temb = temb + self.pooled_bias[...].astype(jnp.float32)
        tokens, _ = patchify(latents.astype(cfg.dtype), cfg.patch_size, order="thwc", layout="fhwc")
        x = self.visual_embeddings(tokens)
        grid = self.grid(latents.shape)
        if grid[1] % FRACTAL or grid[2] % FRACTAL:
            raise ValueError(f"NABLA needs the tile's token rows and columns in multiples of {FRACTAL}, got {grid}")
        cos, sin = visual_rope(jnp.arange(grid[0]), grid[1], grid[2], cfg.axes_dims, cfg.scale_factor)
        x, cos, sin = fractal(x, grid, 1), fractal(cos, grid, 0), fractal(sin, grid, 0)
        aux = {"temb": temb, "rope": (constrain(cos, (SEQ, None)), constrain(sin, (SEQ, None))),
               # a zero-size array carries the block grid through jit and scan as its (static) shape
               "nabla_grid": jnp.zeros((grid[0], grid[1] // FRACTAL, grid[2] // FRACTAL, 0), jnp.float32)}
        return constrain(x, (BATCH, SEQ, EMBED)), aux

    @staticmethod
    def run_block_group(name: str, graphdef: nnx.GraphDef, state: nnx.State, x: Any, aux: dict) -> Any:
        """Run the stacked blocks of ``name`` in ``state`` (all of them, or any slice) with lax.scan."""
        if name not in Kandinsky6SRDiT.block_groups:
            raise KeyError(f"Kandinsky6SRDiT has no block group {name!r}")
        return scan_blocks(graphdef, state, x, aux)

    def post(self, x: jax.Array, aux: dict, latent_shape: tuple[int, ...]) -> jax.Array:
        cfg = self.cfg
        grid = self.grid(latent_shape)
        shift, scale = split_modulation(self.out_modulation(jax.nn.silu(aux["temb"])), 2)
        y = self.out_layer(normed(fractal(x, grid, 1, inverse=True), shift, scale))
        return unpatchify(y.astype(jnp.float32), grid, cfg.patch_size, order="cthw", layout="fhwc")

    def __call__(self, latents: jax.Array, timestep: jax.Array, context: Any = None) -> jax.Array:
        x, aux = self.pre(latents, timestep, context)
        graphdef, state = nnx.split(self.visual_blocks)
        x = self.run_block_group("visual_blocks", graphdef, state, x, aux)
        return self.post(x, aux, latents.shape)


def example_inputs(cfg: Kandinsky6SRDiTConfig, batch: int, grid, text: int):
    """``DitBuild.example_inputs``: a channel-last tile with the DiT's input channels; no text context."""
    f, h, w = (int(v) for v in grid)
    return ((batch, f, h, w, cfg.in_channels), "float32"), {}, {}


def token_grid_problems(cfg: Kandinsky6SRDiTConfig, grid) -> list[str]:
    """The tile's latent grid against the patch, NABLA's 8 x 8 blocks and the RoPE tables (one phrase each)."""
    f, h, w = (int(v) for v in grid)
    pt, ph, pw = cfg.patch_size
    out = []
    if f % pt or h % ph or w % pw:
        out.append(f"the tile's latent grid {f}x{h}x{w} is not a multiple of patch_size {tuple(cfg.patch_size)}")
    elif (h // ph) % FRACTAL or (w // pw) % FRACTAL:
        out.append(f"NABLA needs the tile's token rows and columns ({h // ph}, {w // pw}) in multiples of {FRACTAL}")
    if max(f // pt, h // ph, w // pw) > ROPE_LIMIT:
        out.append(f"the tile's token grid {f // pt}x{h // ph}x{w // pw} exceeds the RoPE's {ROPE_LIMIT} positions")
    return out

