"""Wan 2.1 video diffusion transformer (diffusers ``WanTransformer3DModel``) in Flax NNX.

Layout and numerics follow the diffusers reference:

* latents are channels-first ``(B, C, F, H, W)``; a non-overlapping 3-D patch embedding (conv3d with
  stride == kernel) turns them into ``F/pt * H/ph * W/pw`` tokens of width ``dim = heads * head_dim``;
* the timestep goes through a sinusoidal embedding (cos first, shift 0), a SiLU MLP (``temb``) and a
  ``6 * dim`` projection that modulates every block (AdaLN with a learned per-block ``scale_shift_table``);
* text embeddings go through Linear -> gelu(tanh) -> Linear;
* each block: self-attention with 3-D RoPE (head_dim split into t/h/w parts, interleaved pairs), cross-attention
  to the text, gelu(tanh) FFN; q and k are RMS-normalised over the full width (all heads) before the head split;
* layer norms, modulation and residual adds run in float32, matmuls in the parameter dtype.

The ``num_layers`` identical blocks live in ONE parameter tree stacked on a leading ``'layers'`` axis and are
run by :func:`run_blocks` with ``jax.lax.scan``, so compile time does not grow with depth and an offload
executor can call :func:`run_blocks` on any slice of the stacked state.

Parameters carry logical axis names (``out_sharding`` metadata, never eagerly applied): ``'embed'`` (model
width), ``'heads'`` (attention inner width), ``'mlp'`` (FFN hidden) and ``'layers'`` (stacked axis).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core import sequence_parallel
from vidax_core.sharding import constrain

Axes = tuple[str | None, ...]

EMBED, HEADS, MLP, LAYERS = "embed", "heads", "mlp", "layers"
BATCH, SEQ = "batch", "seq"  # activation-only logical axes


# --------------------------------------------------------------------------------------------------------------
# Config
# --------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class WanDiTConfig:
    """Field names match diffusers' ``config.json`` for ``WanTransformer3DModel``; ``dtype`` is the param dtype."""

    patch_size: tuple[int, int, int] = (1, 2, 2)
    num_attention_heads: int = 40
    attention_head_dim: int = 128
    in_channels: int = 16
    out_channels: int = 16
    text_dim: int = 4096
    freq_dim: int = 256
    ffn_dim: int = 13824
    num_layers: int = 40
    cross_attn_norm: bool = True
    qk_norm: str | None = "rms_norm_across_heads"
    eps: float = 1e-6
    image_dim: int | None = None
    added_kv_proj_dim: int | None = None
    rope_max_seq_len: int = 1024
    pos_embed_seq_len: int | None = None
    dtype: Any = jnp.float32

    def __post_init__(self) -> None:
        object.__setattr__(self, "patch_size", tuple(int(p) for p in self.patch_size))
        if self.out_channels is None:  # diffusers: out_channels = out_channels or in_channels
            object.__setattr__(self, "out_channels", self.in_channels)

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> "WanDiTConfig":
        """Build from a diffusers config dict; unknown keys (``_class_name``, ``_diffusers_version``...) are ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in config.items() if k in names}
        kwargs.update(overrides)
        return cls(**kwargs)

    @property
    def dim(self) -> int:
        return self.num_attention_heads * self.attention_head_dim

    @property
    def rope_dims(self) -> tuple[int, int, int]:
        """(t, h, w) split of the head dim, as diffusers' ``WanRotaryPosEmbed``."""
        h = w = 2 * (self.attention_head_dim // 6)
        return self.attention_head_dim - h - w, h, w

    @property
    def is_i2v(self) -> bool:
        return self.image_dim is not None or self.added_kv_proj_dim is not None


# --------------------------------------------------------------------------------------------------------------
# Small layers (own implementations: explicit dtype control and logical axis names)
# --------------------------------------------------------------------------------------------------------------


def _param(value: jax.Array, names: Axes) -> nnx.Param:
    return nnx.Param(value, out_sharding=names, eager_sharding=False)


class Linear(nnx.Module):
    """y = x @ kernel + bias, kernel stored (in, out); matmul in the param dtype, output in the param dtype."""

    def __init__(self, d_in: int, d_out: int, names: Axes, *, dtype: Any, rngs: nnx.Rngs):
        init = nnx.initializers.lecun_normal()
        self.kernel = _param(init(rngs.params(), (d_in, d_out), dtype), names)
        self.bias = _param(jnp.zeros((d_out,), dtype), (names[1],))

    def __call__(self, x: jax.Array) -> jax.Array:
        k = self.kernel[...]
        y = jnp.matmul(x.astype(k.dtype), k, preferred_element_type=jnp.float32) + self.bias[...].astype(jnp.float32)
        return y.astype(k.dtype)


class RMSNorm(nnx.Module):
    """torch.nn.RMSNorm over the last axis (fp32 statistics), output in the input dtype."""

    def __init__(self, dim: int, names: Axes, *, eps: float):
        self.eps = eps
        self.scale = _param(jnp.ones((dim,), jnp.float32), names)

    def __call__(self, x: jax.Array) -> jax.Array:
        xf = x.astype(jnp.float32)
        y = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + self.eps)
        return (y * self.scale[...].astype(jnp.float32)).astype(x.dtype)


def layer_norm(x: jax.Array, eps: float, scale: jax.Array | None = None, bias: jax.Array | None = None) -> jax.Array:
    """fp32 LayerNorm over the last axis (diffusers FP32LayerNorm); returns float32."""
    xf = x.astype(jnp.float32)
    mean = jnp.mean(xf, axis=-1, keepdims=True)
    xc = xf - mean
    var = jnp.mean(xc * xc, axis=-1, keepdims=True)
    y = xc * jax.lax.rsqrt(var + eps)
    if scale is not None:
        y = y * scale.astype(jnp.float32)
    if bias is not None:
        y = y + bias.astype(jnp.float32)
    return y


class LayerNorm(nnx.Module):
    """Affine fp32 LayerNorm (diffusers ``FP32LayerNorm(elementwise_affine=True)``)."""

    def __init__(self, dim: int, *, eps: float):
        self.eps = eps
        self.scale = _param(jnp.ones((dim,), jnp.float32), (EMBED,))
        self.bias = _param(jnp.zeros((dim,), jnp.float32), (EMBED,))

    def __call__(self, x: jax.Array) -> jax.Array:
        return layer_norm(x, self.eps, self.scale[...], self.bias[...])


# --------------------------------------------------------------------------------------------------------------
# Positional / time embeddings
# --------------------------------------------------------------------------------------------------------------


def timestep_embedding(t: jax.Array, dim: int, max_period: float = 10000.0) -> jax.Array:
    """Sinusoidal embedding, [cos, sin] order (flip_sin_to_cos=True, downscale_freq_shift=0); float32 (B, dim)."""
    half = dim // 2
    exponent = np.float32(-math.log(max_period)) * jnp.arange(half, dtype=jnp.float32) / np.float32(half)
    args = t.astype(jnp.float32)[:, None] * jnp.exp(exponent)[None, :]
    emb = jnp.concatenate([jnp.cos(args), jnp.sin(args)], axis=-1)
    if dim % 2:
        emb = jnp.pad(emb, ((0, 0), (0, 1)))
    return emb


def _rope_axis_table(dim: int, n: int, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """cos/sin of pos * theta^(-2i/dim) for pos < n, i < dim/2; computed in float64, returned float32 (n, dim/2)."""
    freqs = 1.0 / (theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
    ang = np.outer(np.arange(n, dtype=np.float64), freqs)
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def rope_tables(cfg: WanDiTConfig, ppf: int, pph: int, ppw: int, theta: float = 10000.0) -> tuple[jax.Array, jax.Array]:
    """3-D RoPE cos/sin for a (ppf, pph, ppw) token grid, shape (S, head_dim/2) float32, one value per pair.

    The per-axis tables are computed on host in float64 (as the reference) and broadcast to the grid on device.
    """
    if max(ppf, pph, ppw) > cfg.rope_max_seq_len:
        raise ValueError(
            f"token grid {(ppf, pph, ppw)} exceeds rope_max_seq_len={cfg.rope_max_seq_len} of the Wan DiT config"
        )
    grid = (ppf, pph, ppw)
    cos_parts, sin_parts = [], []
    for axis, (d, n) in enumerate(zip(cfg.rope_dims, grid)):
        c, s = _rope_axis_table(d, n, theta)
        shape = [1, 1, 1, d // 2]
        shape[axis] = n
        cos_parts.append(jnp.broadcast_to(jnp.asarray(c).reshape(shape), grid + (d // 2,)))
        sin_parts.append(jnp.broadcast_to(jnp.asarray(s).reshape(shape), grid + (d // 2,)))
    n_tok = ppf * pph * ppw
    cos = jnp.concatenate(cos_parts, axis=-1).reshape(n_tok, -1)
    sin = jnp.concatenate(sin_parts, axis=-1).reshape(n_tok, -1)
    return cos, sin


def apply_rope(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """Rotate interleaved pairs (x[2i], x[2i+1]) of (B, S, H, D) by (S, D/2) angles; fp32 math, input dtype out."""
    xf = x.astype(jnp.float32).reshape(*x.shape[:-1], x.shape[-1] // 2, 2)
    x1, x2 = xf[..., 0], xf[..., 1]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    out = jnp.stack([x1 * c - x2 * s, x1 * s + x2 * c], axis=-1)
    return out.reshape(x.shape).astype(x.dtype)


# --------------------------------------------------------------------------------------------------------------
# Transformer block
# --------------------------------------------------------------------------------------------------------------


class Attention(nnx.Module):
    """Wan attention: q/k/v/out projections, RMS norm on q and k across all heads (before the head split)."""

    def __init__(self, cfg: WanDiTConfig, *, rngs: nnx.Rngs):
        dim, dt = cfg.dim, cfg.dtype
        self.heads = cfg.num_attention_heads
        self.to_q = Linear(dim, dim, (EMBED, HEADS), dtype=dt, rngs=rngs)
        self.to_k = Linear(dim, dim, (EMBED, HEADS), dtype=dt, rngs=rngs)
        self.to_v = Linear(dim, dim, (EMBED, HEADS), dtype=dt, rngs=rngs)
        self.to_out = Linear(dim, dim, (HEADS, EMBED), dtype=dt, rngs=rngs)
        self.norm_q = RMSNorm(dim, (HEADS,), eps=cfg.eps)
        self.norm_k = RMSNorm(dim, (HEADS,), eps=cfg.eps)

    def __call__(self, x: jax.Array, kv: jax.Array | None = None, rope: tuple[jax.Array, jax.Array] | None = None):
        """Self-attention when ``kv`` is None (tokens sharded over sp: Ulysses all-to-all around the attention),
        else cross-attention of the (sequence-sharded) tokens against the replicated ``kv`` sequence."""
        is_self = kv is None
        kv = x if is_self else kv
        kv_names = (BATCH, SEQ if is_self else None, HEADS)
        # Column-parallel projections: outputs sharded over heads (tp); the RMS norm over the full width reduces
        # across the tp shards (partial sum + all-reduce), so it stays exact.
        q = constrain(self.norm_q(constrain(self.to_q(x), (BATCH, SEQ, HEADS))), (BATCH, SEQ, HEADS))
        k = constrain(self.norm_k(constrain(self.to_k(kv), kv_names)), kv_names)
        v = constrain(self.to_v(kv), kv_names)
        b, sq, _ = q.shape
        sk = k.shape[1]
        q = q.reshape(b, sq, self.heads, -1)
        k = k.reshape(b, sk, self.heads, -1)
        v = v.reshape(b, sk, self.heads, -1)
        if rope is not None:
            q = apply_rope(q, *rope)
            k = apply_rope(k, *rope)
        if is_self:
            o = sequence_parallel.self_attention(q, k, v)
        else:
            o = sequence_parallel.cross_attention(q, k, v)
        o = constrain(o.reshape(b, sq, -1), (BATCH, SEQ, HEADS))
        # Row-parallel output projection: contraction over the tp-sharded width, one all-reduce, then the bias.
        return constrain(self.to_out(o), (BATCH, SEQ, EMBED))


class FeedForward(nnx.Module):
    def __init__(self, cfg: WanDiTConfig, *, rngs: nnx.Rngs):
        self.proj_in = Linear(cfg.dim, cfg.ffn_dim, (EMBED, MLP), dtype=cfg.dtype, rngs=rngs)
        self.proj_out = Linear(cfg.ffn_dim, cfg.dim, (MLP, EMBED), dtype=cfg.dtype, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        h = constrain(self.proj_in(x), (BATCH, SEQ, MLP))  # column-parallel
        return constrain(self.proj_out(jax.nn.gelu(h, approximate=True)), (BATCH, SEQ, EMBED))  # row-parallel


class WanBlock(nnx.Module):
    """One Wan transformer block (self-attn with RoPE, cross-attn to text, FFN; AdaLN-modulated)."""

    def __init__(self, cfg: WanDiTConfig, *, rngs: nnx.Rngs):
        if cfg.added_kv_proj_dim is not None:
            raise NotImplementedError("Wan I2V blocks (added_kv_proj_dim) are not implemented yet")
        self.eps = cfg.eps
        self.attn1 = Attention(cfg, rngs=rngs)
        self.attn2 = Attention(cfg, rngs=rngs)
        self.norm2 = LayerNorm(cfg.dim, eps=cfg.eps) if cfg.cross_attn_norm else None
        self.ffn = FeedForward(cfg, rngs=rngs)
        self.scale_shift_table = _param(
            jax.random.normal(rngs.params(), (6, cfg.dim), jnp.float32) / cfg.dim**0.5, (None, EMBED)
        )

    def __call__(self, x: jax.Array, ctx: jax.Array, tproj: jax.Array, rope: tuple[jax.Array, jax.Array]) -> jax.Array:
        """x (B, S, dim) in the param dtype; ctx (B, L, dim) embedded text; rope (S, hd/2) x2; tproj (B, 6, dim)
        per sample, or (B, S, 6, dim) per token (then split over sp exactly like the tokens)."""
        dt = x.dtype
        x = constrain(x, (BATCH, SEQ, EMBED))
        table = self.scale_shift_table[...].astype(jnp.float32)
        if tproj.ndim == 4:  # per-token modulation: (B, S, 6, dim), sequence-sharded like x
            mod = constrain(table[None, None] + tproj.astype(jnp.float32), (BATCH, SEQ, None, EMBED))
            parts = [mod[:, :, i] for i in range(6)]
        else:
            mod = table[None] + tproj.astype(jnp.float32)
            parts = [mod[:, i : i + 1] for i in range(6)]
        shift_msa, scale_msa, gate_msa, c_shift, c_scale, c_gate = parts

        h = (layer_norm(x, self.eps) * (1 + scale_msa) + shift_msa).astype(dt)
        a = self.attn1(h, None, rope)
        x = (x.astype(jnp.float32) + a.astype(jnp.float32) * gate_msa).astype(dt)

        h = (self.norm2(x) if self.norm2 is not None else x.astype(jnp.float32)).astype(dt)
        a = self.attn2(h, ctx)
        x = (x.astype(jnp.float32) + a.astype(jnp.float32)).astype(dt)

        h = (layer_norm(x, self.eps) * (1 + c_scale) + c_shift).astype(dt)
        f = self.ffn(h)
        return constrain((x.astype(jnp.float32) + f.astype(jnp.float32) * c_gate).astype(dt), (BATCH, SEQ, EMBED))


def run_blocks(
    block_graphdef: nnx.GraphDef,
    stacked_block_state: nnx.State,
    x: jax.Array,
    ctx: jax.Array,
    tproj: jax.Array,
    rope: tuple[jax.Array, jax.Array],
) -> jax.Array:
    """Run the blocks whose params are stacked on the leading axis of ``stacked_block_state`` with ``lax.scan``.

    ``stacked_block_state`` may be any slice ``[i:j]`` of the model's stacked block state (offload executors run a
    few layers at a time). ``block_graphdef`` is the graphdef of a single ``WanBlock``
    (see :meth:`WanDiT.split_blocks`).
    """

    def body(h, layer_state):
        block = nnx.merge(block_graphdef, layer_state)
        return block(h, ctx, tproj, rope), None

    x, _ = jax.lax.scan(body, x, stacked_block_state)
    return x


def _make_stacked_blocks(cfg: WanDiTConfig, rngs: nnx.Rngs) -> WanBlock:
    @nnx.split_rngs(splits=cfg.num_layers)
    @nnx.vmap(in_axes=(0,), out_axes=0, transform_metadata={nnx.PARTITION_NAME: LAYERS})
    def make(r: nnx.Rngs) -> WanBlock:
        return WanBlock(cfg, rngs=r)

    return make(rngs)


# --------------------------------------------------------------------------------------------------------------
# Full model
# --------------------------------------------------------------------------------------------------------------


class WanDiT(nnx.Module):
    def __init__(self, cfg: WanDiTConfig, *, rngs: nnx.Rngs):
        if cfg.is_i2v:
            raise NotImplementedError("Wan I2V (image_dim / added_kv_proj_dim) is not implemented yet; T2V only")
        if cfg.attention_head_dim % 2 or any(d % 2 for d in cfg.rope_dims):
            raise ValueError(f"attention_head_dim={cfg.attention_head_dim} does not split into even t/h/w RoPE parts")
        self.cfg = cfg
        dim, dt = cfg.dim, cfg.dtype
        pt, ph, pw = cfg.patch_size
        init = nnx.initializers.lecun_normal(in_axis=(0, 1, 2, 3), out_axis=4)
        # Patch embedding: conv3d kernel (pt, ph, pw, C_in, dim), applied as reshape + matmul.
        self.patch_kernel = _param(
            init(rngs.params(), (pt, ph, pw, cfg.in_channels, dim), dt),
            (None, None, None, None, EMBED),
        )
        self.patch_bias = _param(jnp.zeros((dim,), dt), (EMBED,))
        # Condition embedder. The time MLP stays fp32 (diffusers keeps time_embedder in fp32).
        self.time_linear_1 = Linear(cfg.freq_dim, dim, (None, EMBED), dtype=jnp.float32, rngs=rngs)
        self.time_linear_2 = Linear(dim, dim, (None, EMBED), dtype=jnp.float32, rngs=rngs)
        self.time_proj = Linear(dim, 6 * dim, (None, EMBED), dtype=dt, rngs=rngs)
        self.text_linear_1 = Linear(cfg.text_dim, dim, (None, EMBED), dtype=dt, rngs=rngs)
        self.text_linear_2 = Linear(dim, dim, (None, EMBED), dtype=dt, rngs=rngs)
        # Blocks, stacked on a leading 'layers' axis.
        self.blocks = _make_stacked_blocks(cfg, rngs)
        # Output head.
        self.proj_out = Linear(dim, cfg.out_channels * pt * ph * pw, (EMBED, None), dtype=dt, rngs=rngs)
        self.scale_shift_table = _param(
            jax.random.normal(rngs.params(), (2, dim), jnp.float32) / dim**0.5, (None, EMBED)
        )

    # -- pieces an executor may call separately ------------------------------------------------------------------

    def split_blocks(self) -> tuple[nnx.GraphDef, nnx.State]:
        """(graphdef of ONE block, stacked state with leading layer axis) for :func:`run_blocks`."""
        graphdef, state = nnx.split(self.blocks)
        return graphdef, state

    def embed(self, latents: jax.Array, timestep: jax.Array, context: jax.Array):
        """Patchify + condition embeddings. Returns (x, ctx, temb, tproj, rope, grid)."""
        cfg = self.cfg
        dt = cfg.dtype
        if timestep.ndim != 1:
            raise NotImplementedError("per-token timesteps (Wan 2.2 TI2V) are not implemented; pass timestep (B,)")
        b, c, f, hh, ww = latents.shape
        pt, ph, pw = cfg.patch_size
        if f % pt or hh % ph or ww % pw:
            raise ValueError(f"latent shape {(f, hh, ww)} is not divisible by patch_size {cfg.patch_size}")
        grid = (f // pt, hh // ph, ww // pw)
        # (B, C, F, H, W) -> (B, f, h, w, pt, ph, pw, C) -> (B, S, pt*ph*pw*C)
        p = latents.reshape(b, c, grid[0], pt, grid[1], ph, grid[2], pw)
        p = p.transpose(0, 2, 4, 6, 3, 5, 7, 1).reshape(b, grid[0] * grid[1] * grid[2], pt * ph * pw * c)
        k = self.patch_kernel[...]
        x = jnp.matmul(p.astype(k.dtype), k.reshape(-1, k.shape[-1]), preferred_element_type=jnp.float32)
        x = constrain((x + self.patch_bias[...].astype(jnp.float32)).astype(dt), (BATCH, SEQ, EMBED))

        t_freq = timestep_embedding(timestep, cfg.freq_dim)
        temb = self.time_linear_2(jax.nn.silu(self.time_linear_1(t_freq)))
        temb = temb.astype(dt)  # diffusers: temb.type_as(encoder_hidden_states)
        tproj = self.time_proj(jax.nn.silu(temb)).reshape(b, 6, -1)

        ctx = self.text_linear_1(context.astype(dt))
        ctx = self.text_linear_2(jax.nn.gelu(ctx, approximate=True))
        ctx = constrain(ctx, (BATCH, None, EMBED))
        cos, sin = rope_tables(cfg, *grid)
        rope = (constrain(cos, (SEQ, None)), constrain(sin, (SEQ, None)))
        return x, ctx, temb, tproj, rope, grid

    def head(self, x: jax.Array, temb: jax.Array, grid: Sequence[int]) -> jax.Array:
        """Output norm + modulation + projection + unpatchify -> (B, out_C, F, H, W) float32."""
        cfg = self.cfg
        mod = self.scale_shift_table[...].astype(jnp.float32)[None] + temb.astype(jnp.float32)[:, None]
        shift, scale = mod[:, 0:1], mod[:, 1:2]
        h = (layer_norm(x, cfg.eps) * (1 + scale) + shift).astype(x.dtype)
        y = self.proj_out(h).astype(jnp.float32)
        b = y.shape[0]
        pt, ph, pw = cfg.patch_size
        f, hh, ww = grid
        y = y.reshape(b, f, hh, ww, pt, ph, pw, -1)
        y = y.transpose(0, 7, 1, 4, 2, 5, 3, 6)
        return y.reshape(b, y.shape[1], f * pt, hh * ph, ww * pw)

    # -- the staged forward an offload executor drives: pre -> block groups -> post ----------------------------

    block_groups = ("blocks",)

    def pre(self, latents: jax.Array, timestep: jax.Array, context: jax.Array) -> tuple[jax.Array, dict]:
        """Everything before the blocks: (x, aux) where aux holds what the blocks and :meth:`post` read."""
        x, ctx, temb, tproj, rope, _ = self.embed(latents, timestep, context)
        return x, {"ctx": ctx, "temb": temb, "tproj": tproj, "rope": rope}

    @staticmethod
    def run_block_group(name: str, graphdef: nnx.GraphDef, state: nnx.State, x: jax.Array, aux: dict) -> jax.Array:
        """Run any slice of the stacked group ``name`` (Wan has one, ``blocks``)."""
        if name != "blocks":
            raise KeyError(f"Wan has no block group {name!r}")
        return run_blocks(graphdef, state, x, aux["ctx"], aux["tproj"], aux["rope"])

    def post(self, x: jax.Array, aux: dict, latent_shape: Sequence[int]) -> jax.Array:
        pt, ph, pw = self.cfg.patch_size
        f, hh, ww = latent_shape[-3:]
        return self.head(x, aux["temb"], (f // pt, hh // ph, ww // pw))

    def __call__(self, latents: jax.Array, timestep: jax.Array, context: jax.Array) -> jax.Array:
        """latents (B, C, F, H, W), timestep (B,), context (B, L, text_dim) -> (B, out_C, F, H, W) float32."""
        x, ctx, temb, tproj, rope, grid = self.embed(latents, timestep, context)
        graphdef, state = self.split_blocks()
        x = run_blocks(graphdef, state, x, ctx, tproj, rope)
        return self.head(x, temb, grid)
