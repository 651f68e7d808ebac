"""Cosmos-Predict2.5 video diffusion transformer (diffusers ``CosmosTransformer3DModel``, 2.5 flags) in Flax NNX.

Layout and numerics follow the diffusers reference:

* latents ``(B, C, F, H, W)``; the condition mask ``(B, 1, F, H, W)`` and the padding mask (one ``(B, 1, H, W)``
  map at latent resolution, repeated over frames) are concatenated as extra input channels, then a linear patch
  embedding (no bias; patch features in ``c t h w`` order) gives ``F/pt * H/ph * W/pw`` tokens;
* the timestep (sigma in [0, 1], one per latent frame) goes through a sinusoid of width ``dim`` (cos first) into
  a two-layer MLP (``temb``, ``3 * dim``: the term every block's AdaLN-LoRA shares) and an RMSNorm of the sinusoid
  (``embedded``, what each block's low-rank modulation reads);
* every block: self-attention with per-head q/k RMSNorm and rotate-half 3-D RoPE with per-axis NTK scaling,
  cross-attention to the text (per-head q/k RMSNorm), GELU MLP; each sub-layer is AdaLN-LoRA modulated and gated;
* the text is the encoder's concatenated hidden layers, projected to the cross-attention width by Linear + GELU
  (``use_crossattn_projection``);
* output head: AdaLN-LoRA (shift, scale) + linear, unpatchified from ``h w t c`` feature order; given
  ``condition_velocity``, the output on the conditioning frames is replaced by it, as ``Cosmos2_5_PredictBasePipeline``
  does after every transformer call.

Norms, modulation, gates and the residual stream run in float32; matmuls in the parameter dtype.
Blocks live in ONE stacked tree (leading ``layers`` axis) run with ``lax.scan``; ``pre`` / ``run_block_group`` /
``post`` are the staged forward the offload executor drives. Logical axes: ``embed``, ``heads``, ``mlp``,
``layers`` (parameters); ``batch``, ``seq`` (activations).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import jax
import jax.numpy as jnp
from flax import nnx

from vidax_core.io.arch_base import TransformerConfig
from vidax_core.nn import rope as rope_lib
from vidax_core.nn.adaln import AdaLNLoRA, gate
from vidax_core.nn.attention_block import Attention
from vidax_core.nn.feedforward import FeedForward
from vidax_core.nn.layers import Linear, scan_blocks, stacked
from vidax_core.nn.norms import RMSNorm
from vidax_core.nn.patchify import patchify, unpatchify
from vidax_core.nn.timestep import timestep_embedding
from vidax_core.parallel.sharding import constrain

EMBED = "embed"
BATCH, SEQ = "batch", "seq"


@dataclasses.dataclass(frozen=True)
class CosmosDiTConfig(TransformerConfig):
    """Field names match diffusers' ``config.json`` for ``CosmosTransformer3DModel``; ``dtype`` is the param dtype.

    ``in_channels`` counts the condition-mask channel (17 for 16 latent channels), as the diffusers config does."""

    in_channels: int = 17
    out_channels: int = 16
    num_attention_heads: int = 16
    attention_head_dim: int = 128
    num_layers: int = 28
    mlp_ratio: float = 4.0
    text_embed_dim: int = 1024
    adaln_lora_dim: int = 256
    max_size: tuple[int, int, int] = (128, 240, 240)
    patch_size: tuple[int, int, int] = (1, 2, 2)
    rope_scale: tuple[float, float, float] = (1.0, 3.0, 3.0)
    concat_padding_mask: bool = True
    extra_pos_embed_type: str | None = None
    use_crossattn_projection: bool = True
    crossattn_proj_in_channels: int = 100352
    encoder_hidden_states_channels: int = 1024
    controlnet_block_every_n: int | None = None
    img_context_dim_in: int | None = None
    dtype: Any = jnp.float32

    def __post_init__(self) -> None:
        object.__setattr__(self, "patch_size", tuple(int(p) for p in self.patch_size))
        object.__setattr__(self, "max_size", tuple(int(p) for p in self.max_size))
        object.__setattr__(self, "rope_scale", tuple(float(p) for p in self.rope_scale))
        if self.extra_pos_embed_type is not None:
            raise ValueError("extra_pos_embed_type must be null for Cosmos-Predict2.5 (learnable positions are "
                             "Cosmos-1.0's)")
        if self.img_context_dim_in or self.controlnet_block_every_n:
            raise ValueError("image-context and ControlNet inputs (Cosmos-Transfer) are not supported")
        if any(d % 2 or d < 4 for d in self.rope_dims):
            raise ValueError(f"attention_head_dim={self.attention_head_dim} does not split into even t/h/w RoPE "
                             "parts: fix or re-download the checkpoint")

    @property
    def ffn_dim(self) -> int:
        return int(self.dim * self.mlp_ratio)

    @property
    def rope_dims(self) -> tuple[int, int, int]:
        return rope_lib.split_axes_wan(self.attention_head_dim)

    @property
    def context_dim(self) -> int:
        """Width of the text context the model takes (before the cross-attention projection)."""
        return self.crossattn_proj_in_channels if self.use_crossattn_projection else self.text_embed_dim


def rope_tables(cfg: CosmosDiTConfig, grid: Sequence[int]) -> tuple[jax.Array, jax.Array]:
    """(S, head_dim/2) cos/sin of the 3-D RoPE: per-axis theta ``10000 * r ** (d / (d - 2))`` (NTK scaling by
    ``rope_scale``), pair table ``[t | h | w]``, no fps rescaling (the 2.5 pipeline passes none)."""
    ntk = [r ** (d / (d - 2)) for r, d in zip(cfg.rope_scale, cfg.rope_dims)]
    limit = [m // p for m, p in zip(cfg.max_size, cfg.patch_size)]
    if any(g > max(limit) for g in grid):
        raise ValueError(f"token grid {tuple(grid)} exceeds max_size {cfg.max_size} of the Cosmos DiT config")
    return rope_lib.cos_sin(rope_lib.grid_angles(list(grid), cfg.rope_dims, 10000.0, ntk_factors=ntk))


class CosmosBlock(nnx.Module):
    """Self-attention (RoPE), cross-attention to text, MLP; each AdaLN-LoRA modulated and gated per frame."""

    def __init__(self, cfg: CosmosDiTConfig, *, rngs: nnx.Rngs):
        dim, lora, dt = cfg.dim, cfg.adaln_lora_dim, cfg.dtype
        self.compute_dtype = dt
        self.norm1 = AdaLNLoRA(dim, lora, n=3, dtype=dt, rngs=rngs)
        # no biases, per-head q/k RMSNorm (eps 1e-5), rotate-half RoPE
        qk = dict(dtype=dt, rngs=rngs, bias=False, qk_norm="rms_norm", qk_eps=1e-5, rope="rotate_half")
        self.attn1 = Attention(dim, cfg.num_attention_heads, **qk)
        self.norm2 = AdaLNLoRA(dim, lora, n=3, dtype=dt, rngs=rngs)
        self.attn2 = Attention(dim, cfg.num_attention_heads, kv_dim=cfg.text_embed_dim, **qk)
        self.norm3 = AdaLNLoRA(dim, lora, n=3, dtype=dt, rngs=rngs)
        self.ff = FeedForward(dim, cfg.ffn_dim, dtype=dt, rngs=rngs, bias=False, activation="gelu")

    def __call__(self, x, ctx, emb, temb, rope):
        """x (B, S, dim) float32 residual; ctx (B, L, text_embed_dim); emb (B, F, dim) / temb (B, F, 3 dim) per
        latent frame; rope (S, hd/2) x2."""
        dt = self.compute_dtype
        x = constrain(x, (BATCH, SEQ, EMBED))
        h, g = self.norm1(x, emb, temb, per_frame=True)
        x = x + gate(self.attn1(h.astype(dt), None, rope), g, per_frame=True)
        h, g = self.norm2(x, emb, temb, per_frame=True)
        x = x + gate(self.attn2(h.astype(dt), ctx), g, per_frame=True)
        h, g = self.norm3(x, emb, temb, per_frame=True)
        x = x + gate(self.ff(h.astype(dt)), g, per_frame=True)
        return constrain(x, (BATCH, SEQ, EMBED))


class CosmosDiT(nnx.Module):
    """The Cosmos-Predict2.5 denoiser: ``(latents, timestep, context, condition_mask=, padding_mask=,
    condition_velocity=)`` -> velocity ``(B, out_channels, F, H, W)`` float32.

    ``timestep`` is (B,) or one value per latent frame (B, F) (diffusers' (B, 1, F, 1, 1) is accepted too);
    ``context`` (B, L, context_dim); ``condition_mask`` (B, 1, F, H, W) (zeros when None, for configs with the
    extra channel); ``padding_mask`` (B, 1, H, W) at latent resolution (zeros when None).

    ``condition_velocity`` (B, out_channels, F, H, W): the velocity of the conditioning frames (zero elsewhere), which
    replaces the prediction where ``condition_mask`` is 1 (``condition_velocity + out * (1 - condition_mask)``, what
    ``Cosmos2_5_PredictBasePipeline`` does to the transformer's output with its ``gt_velocity``). None = the
    transformer's output as it is (diffusers' ``CosmosTransformer3DModel``)."""

    block_groups = ("blocks",)

    def __init__(self, cfg: CosmosDiTConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        dim, dt = cfg.dim, cfg.dtype
        pt, ph, pw = cfg.patch_size
        in_feat = (cfg.in_channels + int(cfg.concat_padding_mask)) * pt * ph * pw
        self.patch_embed = Linear(in_feat, dim, (None, EMBED), dtype=dt, rngs=rngs, bias=False)
        self.time_linear_1 = Linear(dim, dim, (None, EMBED), dtype=dt, rngs=rngs, bias=False, fp32_out=True)
        self.time_linear_2 = Linear(dim, 3 * dim, (None, EMBED), dtype=dt, rngs=rngs, bias=False, fp32_out=True)
        self.time_norm = RMSNorm(dim, (EMBED,), eps=1e-6, out_dtype=jnp.float32)
        if cfg.use_crossattn_projection:
            self.crossattn_proj = Linear(cfg.crossattn_proj_in_channels, cfg.encoder_hidden_states_channels,
                                         (None, EMBED), dtype=dt, rngs=rngs)
        else:
            self.crossattn_proj = None
        self.blocks = stacked(lambda r: CosmosBlock(cfg, rngs=r), cfg.num_layers, rngs)
        self.norm_out = AdaLNLoRA(dim, cfg.adaln_lora_dim, n=2, dtype=dt, rngs=rngs)
        self.proj_out = Linear(dim, cfg.out_channels * pt * ph * pw, (EMBED, None), dtype=dt, rngs=rngs, bias=False)

    # -- pieces ---------------------------------------------------------------------------------------------------

    def _inputs(self, latents, condition_mask, padding_mask):
        cfg = self.cfg
        b, c, f, hh, ww = latents.shape
        parts = [latents.astype(jnp.float32)]
        n_cond = cfg.in_channels - c
        if n_cond not in (0, 1):
            raise ValueError(f"latents have {c} channels; the Cosmos DiT takes {cfg.in_channels - 1} latent "
                             f"channels plus the condition mask (in_channels={cfg.in_channels})")
        if n_cond:
            m = jnp.zeros((b, 1, f, hh, ww), jnp.float32) if condition_mask is None else condition_mask
            parts.append(jnp.broadcast_to(m.astype(jnp.float32), (b, 1, f, hh, ww)))
        if cfg.concat_padding_mask:
            p = jnp.zeros((b, 1, hh, ww), jnp.float32) if padding_mask is None else padding_mask.astype(jnp.float32)
            parts.append(jnp.broadcast_to(p[:, :, None], (b, 1, f, hh, ww)))
        return jnp.concatenate(parts, axis=1)

    def _time(self, timestep, b, f):
        t = jnp.asarray(timestep, jnp.float32)
        if t.ndim == 5:
            t = t.reshape(t.shape[0], -1)
        if t.ndim == 1:
            t = jnp.broadcast_to(t[:, None], (t.shape[0], f))
        if t.shape != (b, f):
            raise ValueError(f"timestep shape {tuple(jnp.shape(timestep))}: expected ({b},) or per frame ({b}, {f})")
        proj = timestep_embedding(t, self.cfg.dim, flip_sin_to_cos=True, downscale_freq_shift=0)
        temb = self.time_linear_2(jax.nn.silu(self.time_linear_1(proj)))
        return self.time_norm(proj), temb

    def embed(self, latents, timestep, context, condition_mask=None, padding_mask=None, condition_velocity=None):
        """Patchify + time/text embeddings -> (x, aux) with aux = ctx, emb, temb, rope (and, with
        ``condition_velocity``, it and the condition mask, for :meth:`post`)."""
        cfg = self.cfg
        b, _, f, hh, ww = latents.shape
        pt, ph, pw = cfg.patch_size
        if cfg.patch_size[0] != 1:
            raise ValueError("per-frame timesteps need patch_size[0] == 1")
        x_in = self._inputs(latents, condition_mask, padding_mask)
        p, grid = patchify(x_in, cfg.patch_size, order="cthw")
        x = constrain(self.patch_embed(p).astype(jnp.float32), (BATCH, SEQ, EMBED))
        emb, temb = self._time(timestep, b, f // pt)
        ctx = context.astype(cfg.dtype)
        if self.crossattn_proj is not None:
            ctx = jax.nn.gelu(self.crossattn_proj(ctx), approximate=False)
        ctx = constrain(ctx, (BATCH, None, EMBED))
        cos, sin = rope_tables(cfg, grid)
        rope = (constrain(cos, (SEQ, None)), constrain(sin, (SEQ, None)))
        aux = {"ctx": ctx, "emb": emb, "temb": temb, "rope": rope}
        if condition_velocity is not None:
            if condition_mask is None:
                raise ValueError("condition_velocity replaces the velocity where condition_mask is 1: pass both")
            aux["condition_velocity"] = jnp.asarray(condition_velocity, jnp.float32)
            aux["condition_mask"] = jnp.asarray(condition_mask, jnp.float32)
        return x, aux

    def head(self, x, aux, grid):
        h = self.norm_out(x, aux["emb"], aux["temb"], per_frame=True)
        y = self.proj_out(h.astype(self.cfg.dtype)).astype(jnp.float32)
        return unpatchify(y, grid, self.cfg.patch_size, order="hwtc")

    # -- staged forward (offload) ---------------------------------------------------------------------------------

    def pre(self, latents, timestep, context, condition_mask=None, padding_mask=None, condition_velocity=None):
        return self.embed(latents, timestep, context, condition_mask, padding_mask, condition_velocity)

    @staticmethod
    def run_block_group(name, graphdef, state, x, aux):
        if name != "blocks":
            raise KeyError(f"Cosmos has no block group {name!r}")
        return scan_blocks(graphdef, state, x, aux["ctx"], aux["emb"], aux["temb"], aux["rope"])

    def post(self, x, aux, latent_shape):
        pt, ph, pw = self.cfg.patch_size
        f, hh, ww = latent_shape[-3:]
        out = self.head(x, aux, (f // pt, hh // ph, ww // pw))
        if "condition_velocity" in aux:
            out = aux["condition_velocity"] + out * (1.0 - aux["condition_mask"])
        return out

    def __call__(self, latents, timestep, context, condition_mask=None, padding_mask=None, condition_velocity=None):
        x, aux = self.embed(latents, timestep, context, condition_mask, padding_mask, condition_velocity)
        graphdef, state = nnx.split(self.blocks)
        x = self.run_block_group("blocks", graphdef, state, x, aux)
        return self.post(x, aux, latents.shape)
