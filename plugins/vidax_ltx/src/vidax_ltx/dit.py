"""LTX-Video 0.9.x diffusion transformer (diffusers ``LTXVideoTransformer3DModel``) in Flax NNX.

Numerics follow the diffusers reference:

* latents are packed tokens ``(B, S, C)`` (diffusers ``_pack_latents``: token order f, h, w, channels last);
  ``proj_in`` maps them to the model width ``dim = heads * head_dim``;
* the timestep ((B,) or per token (B, S), model units 0..1000) goes through PixArt's AdaLN-single
  (:class:`vidax_core.nn.adaln.AdaLayerNormSingle`): a ``6 * dim`` modulation per sample or per token, plus the
  embedded timestep that modulates the output head;
* T5 text states go through ``caption_projection`` (Linear -> gelu(tanh) -> Linear);
* each block: RMSNorm (no gain) + modulation -> self-attention with RoPE, cross-attention to the text under its
  mask (no norm, no gate), RMSNorm + modulation -> gelu(tanh) FFN (4x); q and k are RMS-normalised across all heads
  (with a gain) before the head split;
* RoPE angles come from fractional token coordinates ``rope_coords`` (B, S, 3) = (frame, y, x) already divided by
  the base sizes (20 frames, 2048 px): :func:`vidax_core.nn.rope.ltx_angles`, interleaved pairs over the full width;
  :func:`video_coords` builds them as the single-pass pipelines do (frame index scaled by 8 / frame_rate);
* norms, modulation and residual adds run in float32; the scale-shift tables stay float32 whatever the weight dtype.

The blocks live in ONE parameter tree stacked on a leading ``layers`` axis, run by ``lax.scan``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.io.arch_base import TransformerConfig
from vidax_core.nn import rope as rope_lib
from vidax_core.nn.adaln import AdaLayerNormSingle, gate, modulate, split_modulation
from vidax_core.nn.attention_block import Attention
from vidax_core.nn.feedforward import FeedForward
from vidax_core.nn.layers import Linear, param, scan_blocks, stacked
from vidax_core.nn.norms import layer_norm, rms_norm
from vidax_core.parallel.sharding import constrain

EMBED, HEADS = "embed", "heads"
BATCH, SEQ = "batch", "seq"

BASE_NUM_FRAMES, BASE_HEIGHT, BASE_WIDTH = 20, 2048, 2048  # the reference's RoPE base sizes


@dataclasses.dataclass(frozen=True)
class LTXDiTConfig(TransformerConfig):
    """Field names match diffusers' ``config.json`` for ``LTXVideoTransformer3DModel``; ``dtype`` is the weight
    dtype."""

    in_channels: int = 128
    out_channels: int | None = 128
    patch_size: int = 1
    patch_size_t: int = 1
    num_attention_heads: int = 32
    attention_head_dim: int = 64
    cross_attention_dim: int = 2048
    num_layers: int = 28
    activation_fn: str = "gelu-approximate"
    qk_norm: str = "rms_norm_across_heads"
    norm_elementwise_affine: bool = False
    norm_eps: float = 1e-6
    caption_channels: int = 4096
    attention_bias: bool = True
    attention_out_bias: bool = True
    dtype: Any = jnp.float32
    residual_dtype: Any = jnp.float32

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require("LTX-Video", qk_norm="rms_norm_across_heads", activation_fn="gelu-approximate",
                     norm_elementwise_affine=False)
        if self.cross_attention_dim != self.dim:
            raise ValueError(f"cross_attention_dim={self.cross_attention_dim} must equal heads x head_dim={self.dim} "
                             "(the caption projection outputs the model width)")

    def build_fields(self) -> dict[str, Any]:
        """What the denoiser build reads of this architecture: the (t, h, w) patch of its two patch sizes."""
        p = self.patch_size
        return {"in_channels": self.in_channels, "heads": self.num_attention_heads,
                "patch_size": (self.patch_size_t, p, p), "block_counts": {"blocks": self.num_layers}}


def video_coords(grid: Sequence[int], frame_rate: float, *, temporal_factor: int = 8, spatial_factor: int = 32,
                 patch_size: int = 1, patch_size_t: int = 1) -> np.ndarray:
    """(S, 3) float32 RoPE coordinates of a (f, h, w) token grid as LTXPipeline / LTXImageToVideoPipeline compute
    them (``rope_interpolation_scale = (temporal_factor / frame_rate, spatial_factor, spatial_factor)``), already
    divided by the base sizes; float32 arithmetic in the reference's order."""
    f, h, w = (int(v) for v in grid)
    gf, gh, gw = np.meshgrid(np.arange(f, dtype=np.float32), np.arange(h, dtype=np.float32),
                             np.arange(w, dtype=np.float32), indexing="ij")
    f32 = np.float32
    gf = gf * f32(temporal_factor / frame_rate) * f32(patch_size_t) / f32(BASE_NUM_FRAMES)
    gh = gh * f32(spatial_factor) * f32(patch_size) / f32(BASE_HEIGHT)
    gw = gw * f32(spatial_factor) * f32(patch_size) / f32(BASE_WIDTH)
    return np.stack([gf, gh, gw], axis=-1).reshape(-1, 3).astype(np.float32)


def example_inputs(cfg: "LTXDiTConfig", batch: int, grid: Sequence[int], text: int) -> tuple[Any, dict, dict]:
    """``DitBuild.example_inputs``: packed latents (B, S, C), the text context (hidden states + key mask) and the
    RoPE coordinates of the token grid at 25 fps with the 0.9.x VAE's factors."""
    tokens = (grid[0] // cfg.patch_size_t, grid[1] // cfg.patch_size, grid[2] // cfg.patch_size)
    coords = video_coords(tokens, 25.0, patch_size=cfg.patch_size, patch_size_t=cfg.patch_size_t)
    return (((batch, len(coords), cfg.in_channels), "float32"),
            {"hidden": ((batch, text, cfg.caption_channels), cfg.dtype), "mask": ((batch, text), bool)},
            {"rope_coords": np.broadcast_to(coords, (batch,) + coords.shape)})


class LTXBlock(nnx.Module):
    """One LTX-Video block (diffusers ``LTXVideoTransformerBlock``)."""

    def __init__(self, cfg: LTXDiTConfig, *, rngs: nnx.Rngs):
        self.eps = cfg.norm_eps
        self.compute_dtype = cfg.dtype
        dim, heads, dt = cfg.dim, cfg.num_attention_heads, cfg.dtype
        # biases as configured, q/k RMS-normed across all heads (eps 1e-5, with a gain)
        qk = dict(dtype=dt, rngs=rngs, bias=cfg.attention_bias, out_bias=cfg.attention_out_bias,
                  qk_norm="rms_norm_across_heads", qk_eps=1e-5)
        self.attn1 = Attention(dim, heads, **qk)
        self.attn2 = Attention(dim, heads, kv_dim=cfg.cross_attention_dim, **qk)
        self.ff = FeedForward(dim, 4 * dim, dtype=dt, rngs=rngs, activation="gelu-approximate")
        self.scale_shift_table = param(
            jax.random.normal(rngs.params(), (6, cfg.dim), jnp.float32) / cfg.dim**0.5, (None, EMBED)
        )

    def __call__(self, x: jax.Array, ctx: jax.Array, mod: jax.Array, rope: tuple[jax.Array, jax.Array],
                 ctx_mask: jax.Array | None, skip: jax.Array | None = None) -> jax.Array:
        """x (B, S, dim); ctx (B, L, dim) projected text; mod (B, 1, 6 dim) or per token (B, S, 6 dim);
        rope cos/sin (B, S, H, hd/2); ctx_mask (B, L) bool or None; skip (B,) float: skip the self-attention
        (values pass through) where 1."""
        dt, rt = self.compute_dtype, x.dtype
        x = constrain(x, (BATCH, SEQ, EMBED))
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = split_modulation(
            mod, 6, self.scale_shift_table[...])
        h = modulate(rms_norm(x, eps=self.eps, out_dtype=jnp.float32), shift_msa, scale_msa).astype(dt)
        x = (x.astype(jnp.float32) + gate(self.attn1(h, None, rope, skip=skip), gate_msa)).astype(rt)
        a = self.attn2(x.astype(dt), ctx, kv_mask=ctx_mask)
        x = (x.astype(jnp.float32) + a.astype(jnp.float32)).astype(rt)
        h = modulate(rms_norm(x, eps=self.eps, out_dtype=jnp.float32), shift_mlp, scale_mlp).astype(dt)
        return constrain((x.astype(jnp.float32) + gate(self.ff(h), gate_mlp)).astype(rt), (BATCH, SEQ, EMBED))


def run_blocks(graphdef: nnx.GraphDef, state: nnx.State, x: jax.Array, ctx: jax.Array, mod: jax.Array,
               rope: tuple[jax.Array, jax.Array], ctx_mask: jax.Array | None, skip: jax.Array | None = None
               ) -> jax.Array:
    """Run any slice of the stacked blocks with ``lax.scan``; ``skip`` (layers, B) float flags per block."""
    if skip is None:
        return scan_blocks(graphdef, state, x, ctx, mod, rope, ctx_mask)

    def body(h, layer):
        layer_state, flags = layer
        return nnx.merge(graphdef, layer_state)(h, ctx, mod, rope, ctx_mask, flags), None

    x, _ = jax.lax.scan(body, x, (state, skip))
    return x


class LTXDiT(nnx.Module):
    """The LTX-Video DiT::

        model(latents, timestep, context, rope_coords=...) -> (B, S, out_channels) float32

    ``latents`` packed (B, S, in_channels); ``timestep`` (B,) or per token (B, S); ``context`` either a dict
    ``{"hidden": (B, L, caption_channels), "mask": (B, L) bool}`` (what ``encode_prompt`` returns) or a bare array
    (no mask); ``rope_coords`` (B, S, 3) fractional (frame, y, x) coordinates (:func:`video_coords`).

    Spatio-temporal guidance: with ``perturbed=True`` (static) and ``stg_skip`` (B, num_layers) float, the blocks
    flagged 1 skip their self-attention. The carry between block chunks is then ``(x, first layer index)`` so an
    offloaded slice of the stack finds its own flags; other passes ignore ``stg_skip``.
    """

    block_groups = ("blocks",)

    def __init__(self, cfg: LTXDiTConfig, *, rngs: nnx.Rngs):
        if cfg.dim % 6 and (cfg.dim % 6) % 2:
            raise ValueError(f"model width {cfg.dim} does not take LTX RoPE")
        self.cfg = cfg
        dim, dt = cfg.dim, cfg.dtype
        self.proj_in = Linear(cfg.in_channels, dim, (None, EMBED), dtype=dt, rngs=rngs)
        self.time_embed = AdaLayerNormSingle(dim, n=6, dtype=dt, rngs=rngs)
        self.caption_linear_1 = Linear(cfg.caption_channels, dim, (None, EMBED), dtype=dt, rngs=rngs)
        self.caption_linear_2 = Linear(dim, dim, (None, EMBED), dtype=dt, rngs=rngs)
        self.blocks = stacked(lambda r: LTXBlock(cfg, rngs=r), cfg.num_layers, rngs)
        self.proj_out = Linear(dim, cfg.out_channels, (EMBED, None), dtype=dt, rngs=rngs)
        self.scale_shift_table = param(
            jax.random.normal(rngs.params(), (2, dim), jnp.float32) / dim**0.5, (None, EMBED)
        )

    def rope(self, rope_coords: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(B, S, 3) coordinates -> cos/sin (B, S, H, hd/2), sequence-sharded like the tokens."""
        cfg = self.cfg
        ang = rope_lib.ltx_angles(constrain(rope_coords, (BATCH, SEQ, None)), cfg.dim)
        ang = ang.reshape(*ang.shape[:2], cfg.num_attention_heads, cfg.attention_head_dim // 2)
        cos, sin = rope_lib.cos_sin(ang)
        names = (BATCH, SEQ, HEADS, None)
        return constrain(cos, names), constrain(sin, names)

    def pre(self, latents: jax.Array, timestep: jax.Array, context: Any, rope_coords: jax.Array | None = None,
            stg_skip: jax.Array | None = None, perturbed: bool = False):
        cfg = self.cfg
        dt = cfg.dtype
        if rope_coords is None:
            raise ValueError("the LTX DiT needs rope_coords (B, S, 3): see vidax_ltx.dit.video_coords")
        b, s, c = latents.shape
        if c != cfg.in_channels:
            raise ValueError(f"latents have {c} channels, the LTX DiT config has in_channels={cfg.in_channels}")
        if timestep.ndim not in (1, 2) or timestep.shape[0] != b or (timestep.ndim == 2 and timestep.shape[1] != s):
            raise ValueError(f"timestep shape {tuple(timestep.shape)}: expected ({b},) or per token ({b}, {s})")
        if isinstance(context, Mapping):
            hidden, mask = context["hidden"], context.get("mask")
        else:
            hidden, mask = context, None
        x = self.proj_in(constrain(latents, (BATCH, SEQ, None)).astype(dt))
        x = constrain(x.astype(cfg.residual_dtype), (BATCH, SEQ, EMBED))
        t = timestep.astype(jnp.float32)
        if t.ndim == 2:
            t = constrain(t, (BATCH, SEQ))
        mod, emb = self.time_embed(t)
        if t.ndim == 1:
            mod, emb = mod[:, None], emb[:, None]
        else:
            mod, emb = constrain(mod, (BATCH, SEQ, None)), constrain(emb, (BATCH, SEQ, EMBED))
        ctx = self.caption_linear_2(jax.nn.gelu(self.caption_linear_1(hidden.astype(dt)), approximate=True))
        ctx = constrain(ctx.astype(dt), (BATCH, None, EMBED))
        aux = {"ctx": ctx, "mod": mod, "emb": emb, "rope": self.rope(rope_coords)}
        if mask is not None:
            aux["ctx_mask"] = mask.astype(bool)
        if perturbed and stg_skip is not None:
            aux["skip"] = jnp.asarray(stg_skip, jnp.float32).reshape(b, cfg.num_layers)
            return (x, jnp.zeros((), jnp.int32)), aux
        return x, aux

    def teacache_modulated(self, x: jax.Array, aux: dict) -> jax.Array:
        """TeaCache4LTX-Video's signal, float32 (B, S, dim): the first block's normed, modulated self-attention input
        ``norm1(x) * (1 + scale_msa) + shift_msa`` for the block-stack input ``x``."""
        table = self.blocks.scale_shift_table[...][0]
        shift, scale = split_modulation(aux["mod"], 6, table)[:2]
        return modulate(rms_norm(x, eps=self.cfg.norm_eps, out_dtype=jnp.float32), shift, scale)

    @staticmethod
    def run_block_group(name: str, graphdef: nnx.GraphDef, state: nnx.State, x: jax.Array, aux: dict) -> jax.Array:
        if name != "blocks":
            raise KeyError(f"LTX-Video has no block group {name!r}")
        if isinstance(x, tuple):  # perturbed pass: (hidden, index of this slice's first layer)
            h, first = x
            n = jax.tree.leaves(state)[0].shape[0]
            flags = jax.lax.dynamic_slice_in_dim(aux["skip"], first, n, axis=1).T
            h = run_blocks(graphdef, state, h, aux["ctx"], aux["mod"], aux["rope"], aux.get("ctx_mask"), flags)
            return h, first + n
        return run_blocks(graphdef, state, x, aux["ctx"], aux["mod"], aux["rope"], aux.get("ctx_mask"))

    def post(self, x: jax.Array, aux: dict, latent_shape: Sequence[int] = ()) -> jax.Array:
        if isinstance(x, tuple):
            x = x[0]
        table = self.scale_shift_table[...].astype(jnp.float32)
        e = aux["emb"].astype(jnp.float32)
        shift, scale = table[0] + e, table[1] + e
        h = modulate(layer_norm(x, 1e-6), shift, scale).astype(self.cfg.dtype)
        return constrain(self.proj_out(h).astype(jnp.float32), (BATCH, SEQ, None))

    def __call__(self, latents: jax.Array, timestep: jax.Array, context: Any,
                 rope_coords: jax.Array | None = None, stg_skip: jax.Array | None = None,
                 perturbed: bool = False) -> jax.Array:
        x, aux = self.pre(latents, timestep, context, rope_coords, stg_skip, perturbed)
        graphdef, state = nnx.split(self.blocks)
        x = self.run_block_group("blocks", graphdef, state, x, aux)
        return self.post(x, aux)
