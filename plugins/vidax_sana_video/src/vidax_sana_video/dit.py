"""SANA-Video's DiT in Flax NNX (diffusers ``SanaVideoTransformer3DModel``), built from the core's blocks.

``model(latents (B, C, F, H, W), timestep (B,) or per latent frame (B, F'), context {"hidden", "mask"})``:

* a conv3d patch embedding (patch (1, 2, 2) at 480p), Wan's 3-D RoPE table (t/h/w split of the head, theta 1e4);
* AdaLN-single: the timestep sinusoid -> MLP -> ``embedded`` and ``linear(silu(embedded))``, six modulation vectors
  per block plus its ``scale_shift_table``; a per-frame timestep (image-to-video: frame 0 at 0) modulates frame by
  frame, which is diffusers' per-token modulation with the tokens of a frame sharing theirs;
* the prompt: Gemma-2's hidden states through ``caption_projection`` (Linear, tanh-GELU, Linear) and an RMS norm;
* ``num_layers`` stacked blocks: modulated LayerNorm -> **linear self-attention** (ReLU kernel, q/k normed across
  heads, RoPE on the numerator only; :meth:`vidax_core.Attention.linear`, kind ``linear``) gated into the residual;
  cross-attention to the prompt under its mask (not normed, not gated); modulated LayerNorm (affine when
  ``norm_elementwise_affine``) -> the **convolutional feed-forward** (:class:`vidax_core.GLUMBConv`: 3x3 depthwise
  per frame, then 3 frames across) gated into the residual;
* the output norm modulated by ``embedded`` and a 2-row table, a projection, unpatchify; a learned-sigma checkpoint
  (``out_channels = 2 in_channels``) returns the first half, as the pipelines keep it.

The forward is split into ``pre`` / ``run_block_group`` / ``post`` for the offload executor; the token grid rides in
the aux as Python ints. Norms, modulation and the residual stream run in float32, matmuls in the parameter dtype.
Sequence parallelism splits the video tokens; neither attention exchanges heads (``attention_kinds = ("linear",
"cross")``), so ``sp`` need only divide the tokens.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from vidax_core import GLUMBConv, Linear, constrain, param, scan_blocks, stacked
from vidax_core.io.arch_base import CheckedConfig, TransformerConfig
from vidax_core.nn import rope as rope_lib
from vidax_core.nn.adaln import AdaLayerNormSingle, gate, modulate, split_modulation
from vidax_core.nn.attention_block import Attention
from vidax_core.nn.norms import RMSNorm, layer_norm
from vidax_core.nn.patchify import unpatchify
from vidax_core.wan_dit.model import patch_tokens

EMBED, BATCH, SEQ = "embed", "batch", "seq"
QK_EPS = 1e-5  # diffusers' Attention eps: its q/k norms
CAPTION_EPS = 1e-5
OUT_EPS = 1e-6  # SanaModulatedNorm
ROPE_THETA = 10000.0
# diffusers' SANA processors norm q and k over the full width, before the head split: the per-head kinds run only
# with one head (where they are the same), fp32_layer_norm not at all
QK_NORMS = ("rms_norm_across_heads", "layer_norm_across_heads", "l2", None)
PER_HEAD_QK_NORMS = ("rms_norm", "layer_norm")
ATTENTION_KINDS = ("linear", "cross")


@dataclasses.dataclass(frozen=True)
class SanaVideoDiTConfig(CheckedConfig, TransformerConfig):
    """Field names are the keys of ``transformer/config.json``; ``dtype`` is the parameter dtype."""

    label = "transformer/config.json (SanaVideoTransformer3DModel)"

    in_channels: int = 16
    out_channels: int | None = 16
    num_attention_heads: int = 20
    attention_head_dim: int = 112
    num_layers: int = 20
    num_cross_attention_heads: int | None = 20
    cross_attention_head_dim: int | None = 112
    cross_attention_dim: int | None = 2240
    caption_channels: int = 2304
    mlp_ratio: float = 2.5
    attention_bias: bool = False
    sample_size: int = 30
    patch_size: tuple[int, int, int] = (1, 2, 2)
    norm_elementwise_affine: bool = False
    norm_eps: float = 1e-6
    guidance_embeds: bool = False
    qk_norm: str | None = "rms_norm_across_heads"
    rope_max_seq_len: int = 1024
    dtype: Any = jnp.float32

    def problems(self) -> list[str]:
        out = []
        if self.guidance_embeds:
            out.append("guidance_embeds=true: the SANA-Video pipelines pass the transformer no guidance, which such a "
                       "model needs (diffusers fails on it too)")
        one_head = self.num_attention_heads == 1 and self.num_cross_attention_heads == 1
        if self.qk_norm in PER_HEAD_QK_NORMS and not one_head:
            out.append(f"qk_norm={self.qk_norm!r} norms each head, but the SANA-Video attention norms q and k before "
                       "splitting the heads (diffusers fails on it with more than one head): use "
                       "rms_norm_across_heads")
        elif self.qk_norm not in QK_NORMS + PER_HEAD_QK_NORMS:
            out.append(f"qk_norm={self.qk_norm!r} is not built: use one of {', '.join(map(str, QK_NORMS))}")
        if self.cross_attention_dim is None or self.num_cross_attention_heads is None or \
                self.cross_attention_head_dim is None:
            out.append("cross_attention_dim, num_cross_attention_heads and cross_attention_head_dim must be set: "
                       "without cross-attention diffusers' block has no norm2 and fails")
        elif self.cross_attention_dim != self.dim or \
                self.num_cross_attention_heads * self.cross_attention_head_dim != self.dim:
            out.append(f"cross-attention of {self.num_cross_attention_heads} x {self.cross_attention_head_dim} over "
                       f"a {self.cross_attention_dim}-wide context: both must equal the model width {self.dim} "
                       "(the caption projection's output)")
        if self.attention_head_dim % 2:
            out.append(f"attention_head_dim={self.attention_head_dim} must be even (RoPE rotates pairs)")
        if self.out_channels not in (self.in_channels, 2 * self.in_channels):
            out.append(f"out_channels={self.out_channels}: the pipelines step in_channels={self.in_channels} latent "
                       f"channels, so it must be {self.in_channels} (or {2 * self.in_channels}, learned sigma)")
        if len(self.patch_size) != 3:
            out.append(f"patch_size={list(self.patch_size)} must give (frames, height, width)")
        return out

    @property
    def hidden(self) -> int:
        """The feed-forward's hidden width: ``int(mlp_ratio * dim)``, as GLUMBTempConv."""
        return int(self.mlp_ratio * self.dim)

    @property
    def rope_dims(self) -> tuple[int, int, int]:
        return rope_lib.split_axes_wan(self.attention_head_dim)


class SanaVideoBlock(nnx.Module):
    """One ``SanaVideoTransformerBlock``: ``x += g1 * linear_attn(mod(norm1 x)); x += cross_attn(x, text);
    x += g2 * conv_ff(mod(norm2 x))``."""

    def __init__(self, cfg: SanaVideoDiTConfig, *, rngs: nnx.Rngs):
        d, dt = cfg.dim, cfg.dtype
        self.eps, self.dtype = cfg.norm_eps, dt
        self.scale_shift_table = param(jnp.zeros((6, d), jnp.float32), (None, EMBED))
        self.attn1 = Attention(d, cfg.num_attention_heads, dtype=dt, rngs=rngs, bias=cfg.attention_bias,
                               out_bias=True, qk_norm=cfg.qk_norm, qk_eps=QK_EPS)
        self.attn2 = Attention(d, cfg.num_cross_attention_heads, dtype=dt, rngs=rngs, kv_dim=cfg.cross_attention_dim,
                               bias=True, out_bias=True, qk_norm=cfg.qk_norm, qk_eps=QK_EPS)
        affine = cfg.norm_elementwise_affine
        self.norm2_scale = param(jnp.ones((d,), jnp.float32), (EMBED,)) if affine else None
        self.norm2_bias = param(jnp.zeros((d,), jnp.float32), (EMBED,)) if affine else None
        self.ff = GLUMBConv(d, cfg.hidden, temporal_kernel=3, dtype=dt, rngs=rngs)

    def __call__(self, x: jax.Array, mod: jax.Array, ctx: jax.Array, kv_mask: jax.Array, rope: tuple,
                 grid: tuple[int, int, int]) -> jax.Array:
        """x (B, S, dim) float32; mod (B, 6 dim) or per frame (B, F, 6 dim); ctx (B, L, dim) and its (B, L) mask;
        rope (S, head_dim / 2) cos / sin; grid the token grid (Python ints)."""
        per_frame = mod.ndim == 3
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = split_modulation(
            mod, 6, self.scale_shift_table[...])
        h = modulate(layer_norm(x, self.eps), shift_msa, scale_msa, per_frame=per_frame).astype(self.dtype)
        x = x + gate(self.attn1.linear(h, rope), gate_msa, per_frame=per_frame)
        x = x + self.attn2(x.astype(self.dtype), ctx, kv_mask=kv_mask).astype(jnp.float32)
        scale = None if self.norm2_scale is None else self.norm2_scale[...]
        bias = None if self.norm2_bias is None else self.norm2_bias[...]
        h = modulate(layer_norm(x, self.eps, scale, bias), shift_mlp, scale_mlp, per_frame=per_frame)
        x = x + gate(self.ff(h.astype(self.dtype), grid), gate_mlp, per_frame=per_frame)
        return constrain(x, (BATCH, SEQ, EMBED))


class SanaVideoDiT(nnx.Module):
    """``model(latents, timestep, context)`` -> the flow prediction (B, in_channels, F, H, W) float32."""

    block_groups = ("blocks",)

    def __init__(self, cfg: SanaVideoDiTConfig, *, rngs: nnx.Rngs):
        cfg.check_supported()
        self.cfg = cfg
        d, dt = cfg.dim, cfg.dtype
        pt, ph, pw = cfg.patch_size
        self.patch_kernel = param(jnp.zeros((pt, ph, pw, cfg.in_channels, d), dt), (None, None, None, None, EMBED))
        self.patch_bias = param(jnp.zeros((d,), dt), (EMBED,))
        self.time_embed = AdaLayerNormSingle(d, n=6, dtype=dt, rngs=rngs)
        self.caption_linear_1 = Linear(cfg.caption_channels, d, (None, EMBED), dtype=dt, rngs=rngs)
        self.caption_linear_2 = Linear(d, d, (None, EMBED), dtype=dt, rngs=rngs)
        self.caption_norm = RMSNorm(d, (EMBED,), eps=CAPTION_EPS)
        self.blocks = stacked(lambda r: SanaVideoBlock(cfg, rngs=r), cfg.num_layers, rngs)
        self.scale_shift_table = param(jnp.zeros((2, d), jnp.float32), (None, EMBED))
        self.proj_out = Linear(d, pt * ph * pw * cfg.out_channels, (EMBED, None), dtype=dt, rngs=rngs)

    def rope(self, grid: tuple[int, int, int]) -> tuple[jax.Array, jax.Array]:
        """Wan's 3-D RoPE table of a (f, h, w) token grid, (S, head_dim / 2) each, sequence-sharded."""
        cos, sin = rope_lib.cos_sin(rope_lib.grid_angles(list(grid), self.cfg.rope_dims, ROPE_THETA))
        return constrain(cos, (SEQ, None)), constrain(sin, (SEQ, None))

    def pre(self, latents: jax.Array, timestep: jax.Array, context: dict) -> tuple[jax.Array, dict]:
        """Patch, time and prompt embeddings: (tokens (B, S, dim) float32, aux)."""
        cfg = self.cfg
        x, grid = patch_tokens(latents, self.patch_kernel[...], self.patch_bias[...], cfg.patch_size)
        x = constrain(x, (BATCH, SEQ, EMBED))
        mod, embedded = self.time_embed(timestep)  # (B[, F'], 6 dim), (B[, F'], dim)
        hidden = context["hidden"].astype(cfg.dtype)
        ctx = self.caption_linear_2(jax.nn.gelu(self.caption_linear_1(hidden), approximate=True))
        ctx = constrain(self.caption_norm(ctx).astype(cfg.dtype), (BATCH, None, EMBED))
        aux = {"mod": mod, "embedded": embedded, "ctx": ctx, "kv_mask": context["mask"] > 0,
               "rope": self.rope(grid), "grid": tuple(int(g) for g in grid)}
        return x, aux

    @staticmethod
    def run_block_group(name: str, graphdef: nnx.GraphDef, state: nnx.State, x: jax.Array, aux: dict) -> jax.Array:
        if name != "blocks":
            raise KeyError(f"SanaVideoDiT has no block group {name!r}")
        return scan_blocks(graphdef, state, x, aux["mod"], aux["ctx"], aux["kv_mask"], aux["rope"], aux["grid"])

    def post(self, x: jax.Array, aux: dict, latent_shape: tuple[int, ...]) -> jax.Array:
        """The output norm modulated by the time embedding, the projection, unpatchify (a learned-sigma checkpoint's
        first half)."""
        cfg = self.cfg
        emb = aux["embedded"].astype(jnp.float32)
        table = self.scale_shift_table[...].astype(jnp.float32)
        per_frame = emb.ndim == 3
        shift, scale = table[0] + emb, table[1] + emb
        h = modulate(layer_norm(x, OUT_EPS), shift, scale, per_frame=per_frame).astype(cfg.dtype)
        y = self.proj_out(h).astype(jnp.float32)
        out = unpatchify(y, aux["grid"], cfg.patch_size, order="thwc")
        return out[:, :cfg.in_channels] if cfg.out_channels != cfg.in_channels else out

    def __call__(self, latents: jax.Array, timestep: jax.Array, context: dict) -> jax.Array:
        x, aux = self.pre(latents, timestep, context)
        graphdef, state = nnx.split(self.blocks)
        x = self.run_block_group("blocks", graphdef, state, x, aux)
        return self.post(x, aux, latents.shape)


def example_inputs(cfg: SanaVideoDiTConfig, batch: int, grid, text: int):
    """``DitBuild.example_inputs``: the latents, Gemma-2's hidden states with an all-valid mask."""
    context = {"hidden": ((batch, text, cfg.caption_channels), cfg.dtype), "mask": ((batch, text), "int32")}
    return None, context, {}


__all__ = ["ATTENTION_KINDS", "SanaVideoBlock", "SanaVideoDiT", "SanaVideoDiTConfig", "example_inputs"]
