"""Wan 2.1 / 2.2 video diffusion transformer (diffusers ``WanTransformer3DModel``) in Flax NNX.

The core holds it because more than one family is built on it: Wan itself, SkyReels-V2 (the same DiT with
per-frame timesteps, block-causal attention and an fps embedding, :mod:`vidax_skyreels`) and Helios (its
embedders and blocks' parts).

Layout and numerics follow the diffusers reference:

* latents are channels-first ``(B, C, F, H, W)``; a non-overlapping 3-D patch embedding (conv3d with
  stride == kernel) turns them into ``F/pt * H/ph * W/pw`` tokens of width ``dim = heads * head_dim``;
* the timestep goes through a sinusoidal embedding (cos first, shift 0), a SiLU MLP (``temb``) and a
  ``6 * dim`` projection that modulates every block (AdaLN with a learned per-block ``scale_shift_table``);
* text embeddings go through Linear -> gelu(tanh) -> Linear;
* each block: self-attention with 3-D RoPE (head_dim split into t/h/w parts, interleaved pairs), cross-attention
  to the text, gelu(tanh) FFN; q and k are RMS-normalised over the full width (all heads) before the head split;
* layer norms, modulation and residual adds run in float32, matmuls in the parameter dtype.

Image-to-video (Wan 2.1 I2V / FLF2V; config ``image_dim`` / ``added_kv_proj_dim`` / ``pos_embed_seq_len``):

* the CLIP image tokens are an explicit ``image_context`` argument (diffusers instead concatenates them in front of
  the 512 text tokens and splits them off again inside attention). They go through the image embedder (fp32
  LayerNorm -> Linear -> gelu -> Linear -> fp32 LayerNorm; FLF2V adds a learned ``pos_embed`` first) and every
  block's cross-attention gets a second, image key/value attention (``add_k_proj`` / ``add_v_proj``, RMS-normed
  keys ``norm_added_k``) with the same (sequence-sharded) queries; the two attention outputs are summed before
  ``to_out``. Without ``image_context`` the image branch is skipped (what diffusers computes for zero image tokens).
* the DiT is oblivious to the I2V condition channels: the caller concatenates the mask + VAE-encoded condition
  latents to the noisy latents on the channel axis (``in_channels`` = 36 for Wan 2.1 I2V), as diffusers' pipeline.

Per-token timesteps (Wan 2.2 TI2V, diffusers ``expand_timesteps``): ``timestep`` may be ``(B, S)`` with one value
per token (S = F/pt * H/ph * W/pw, token order f, h, w); then the time embedding is ``(B, S, dim)`` and the
modulation ``(B, S, 6, dim)``, both sequence-sharded like the tokens, and the output head shifts/scales per token.
The blocks and the head also take a modulation per latent frame, ``(B, F, 6, dim)`` and ``(B, F, dim)``, broadcast
over each frame's tokens without a per-token copy (SkyReels-V2's diffusion forcing): a model whose block type sets
``frame_modulation`` reads 4-D modulations so, never by comparing F with S (a 16x16 video has one token a frame).

Block-causal attention (``num_frame_per_block`` > 1, SkyReels-V2): the tokens of a block of that many latent
frames attend to their own block and the blocks before it (:func:`vidax_core.attention.attention`'s
``causal_block``); the blocks read the frame count from a per-frame modulation.

The ``num_layers`` identical blocks live in ONE parameter tree stacked on a leading ``'layers'`` axis and are
run by :func:`run_blocks` with ``jax.lax.scan``, so compile time does not grow with depth and an offload
executor can call :func:`run_blocks` on any slice of the stacked state.

Parameters carry logical axis names (``out_sharding`` metadata, never eagerly applied): ``'embed'`` (model
width), ``'heads'`` (attention inner width), ``'mlp'`` (FFN hidden) and ``'layers'`` (stacked axis).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import jax
import jax.numpy as jnp
from flax import nnx

from vidax_core.io.arch_base import TransformerConfig
from vidax_core.nn import rope as rope_lib
from vidax_core.nn.adaln import gate, modulate
from vidax_core.nn.attention_block import Attention
from vidax_core.nn.feedforward import FeedForward
from vidax_core.nn.layers import Linear, param, scan_blocks, stacked
from vidax_core.nn.norms import LayerNorm, layer_norm
from vidax_core.nn.patchify import patchify, unpatchify
from vidax_core.nn.timestep import timestep_embedding
from vidax_core.parallel.sharding import constrain

EMBED = "embed"
BATCH, SEQ = "batch", "seq"  # activation-only logical axes


# --------------------------------------------------------------------------------------------------------------
# Config
# --------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class WanDiTConfig(TransformerConfig):
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
    num_frame_per_block: int = 1  # latent frames per causal attention block; 1 = full attention
    dtype: Any = jnp.float32
    # The residual stream between blocks. The original Wan code keeps it in fp32 whatever the weight dtype (it
    # matters at long token counts); diffusers casts it to the weight dtype. Matmul inputs use ``dtype``.
    residual_dtype: Any = jnp.float32

    def __post_init__(self) -> None:
        object.__setattr__(self, "patch_size", tuple(int(p) for p in self.patch_size))
        super().__post_init__()
        if self.attention_head_dim % 2 or any(d % 2 for d in self.rope_dims):
            raise ValueError(f"attention_head_dim={self.attention_head_dim} does not split into even t/h/w RoPE "
                             "parts: fix or re-download the checkpoint")
        if self.pos_embed_seq_len is not None and self.image_dim is None:
            raise ValueError("pos_embed_seq_len (FLF2V image position embedding) needs image_dim")

    @property
    def rope_dims(self) -> tuple[int, int, int]:
        """(t, h, w) split of the head dim, as diffusers' ``WanRotaryPosEmbed``."""
        return rope_lib.split_axes_wan(self.attention_head_dim)

    @property
    def is_i2v(self) -> bool:
        return self.image_dim is not None or self.added_kv_proj_dim is not None


# --------------------------------------------------------------------------------------------------------------
# Positional embeddings (norms, AdaLN modulation, timestep sinusoid, RoPE and patchify come from vidax_core.nn)
# --------------------------------------------------------------------------------------------------------------


def rope_tables(cfg: WanDiTConfig, ppf: int, pph: int, ppw: int, theta: float = 10000.0) -> tuple[jax.Array, jax.Array]:
    """3-D RoPE cos/sin for a (ppf, pph, ppw) token grid, shape (S, head_dim/2) float32, one value per pair.

    The angles are computed on the host in float64 (as the reference) and rounded once to float32.
    """
    if max(ppf, pph, ppw) > cfg.rope_max_seq_len:
        raise ValueError(
            f"token grid {(ppf, pph, ppw)} exceeds rope_max_seq_len={cfg.rope_max_seq_len} of the Wan DiT config"
        )
    return rope_lib.cos_sin(rope_lib.grid_angles([ppf, pph, ppw], cfg.rope_dims, theta))


# --------------------------------------------------------------------------------------------------------------
# Transformer block
# --------------------------------------------------------------------------------------------------------------


class WanBlock(nnx.Module):
    """One Wan transformer block (self-attn with RoPE, cross-attn to text, FFN; AdaLN-modulated).

    ``frame_modulation`` says what a 4-D modulation ``(B, N, 6, dim)`` holds: one row per token (False, Wan 2.2
    TI2V's per-token timesteps) or one per latent frame (True, SkyReels-V2's diffusion forcing). It is the model's
    to say, not the shapes': when each latent frame is one token (a 16x16 video) N is both."""

    frame_modulation = False

    def __init__(self, cfg: WanDiTConfig, *, rngs: nnx.Rngs):
        self.eps = cfg.eps
        self.compute_dtype = cfg.dtype
        self.frames_per_block = int(cfg.num_frame_per_block)
        dim, heads, dt = cfg.dim, cfg.num_attention_heads, cfg.dtype
        # q/k RMS-normed across all heads (diffusers' "rms_norm_across_heads", the only Wan qk_norm)
        qk = dict(dtype=dt, rngs=rngs, qk_norm="rms_norm_across_heads", qk_eps=cfg.eps)
        self.attn1 = Attention(dim, heads, **qk)
        self.attn2 = Attention(dim, heads, added_kv_dim=cfg.added_kv_proj_dim, **qk)
        self.norm2 = LayerNorm(cfg.dim, (EMBED,), eps=cfg.eps) if cfg.cross_attn_norm else None
        self.ffn = FeedForward(dim, cfg.ffn_dim, dtype=dt, rngs=rngs, activation="gelu-approximate")
        self.scale_shift_table = param(
            jax.random.normal(rngs.params(), (6, cfg.dim), jnp.float32) / cfg.dim**0.5, (None, EMBED)
        )

    def __call__(
        self,
        x: jax.Array,
        ctx: jax.Array,
        tproj: jax.Array,
        rope: tuple[jax.Array, jax.Array],
        img_ctx: jax.Array | None = None,
        kv: Any = None,
    ) -> Any:
        """x (B, S, dim) in the param dtype; ctx (B, L, dim) embedded text; rope (S, hd/2) x2; tproj (B, 6, dim)
        per sample, (B, S, 6, dim) per token (then split over sp exactly like the tokens) or (B, F, 6, dim) per
        latent frame (F < S); img_ctx (B, Li, dim) embedded image tokens (I2V) or None. ``kv``: (cache, layer) of
        a causal call (:mod:`vidax_core.causal`): the self-attention reads the cached past and, in a writing call,
        stores x's keys and values; the block then returns ``(x, cache)``."""
        dt, rt = self.compute_dtype, x.dtype  # matmul inputs / residual stream
        x = constrain(x, (BATCH, SEQ, EMBED))
        table = self.scale_shift_table[...].astype(jnp.float32)
        per_frame = tproj.ndim == 4 and self.frame_modulation
        if per_frame:  # (B, F, 6, dim): broadcast over each frame's tokens inside modulate / gate
            mod = table[None, None] + tproj.astype(jnp.float32)
            parts = [mod[:, :, i] for i in range(6)]
        elif tproj.ndim == 4:  # per-token modulation: (B, S, 6, dim), sequence-sharded like x
            mod = constrain(table[None, None] + tproj.astype(jnp.float32), (BATCH, SEQ, None, EMBED))
            parts = [mod[:, :, i] for i in range(6)]
        else:
            mod = table[None] + tproj.astype(jnp.float32)
            parts = [mod[:, i : i + 1] for i in range(6)]
        shift_msa, scale_msa, gate_msa, c_shift, c_scale, c_gate = parts
        causal = None
        if self.frames_per_block > 1:
            if not per_frame:
                raise ValueError("block-causal attention (num_frame_per_block > 1) needs a per-frame modulation "
                                 "(B, F, 6, dim): the blocks take the frame count from it")
            causal = self.frames_per_block * (x.shape[1] // tproj.shape[1])

        h = modulate(layer_norm(x, self.eps), shift_msa, scale_msa, per_frame=per_frame).astype(dt)
        if kv is None:
            a = self.attn1(h, None, rope, causal_block=causal)
        else:
            from vidax_core.causal.blocks import attend

            a, cache = attend(self.attn1, h, rope, kv)
        x = (x.astype(jnp.float32) + gate(a, gate_msa, per_frame=per_frame)).astype(rt)

        h = (self.norm2(x) if self.norm2 is not None else x.astype(jnp.float32)).astype(dt)
        a = self.attn2(h, ctx, added_kv=img_ctx)
        x = (x.astype(jnp.float32) + a.astype(jnp.float32)).astype(rt)

        h = modulate(layer_norm(x, self.eps), c_shift, c_scale, per_frame=per_frame).astype(dt)
        f = self.ffn(h)
        x = constrain((x.astype(jnp.float32) + gate(f, c_gate, per_frame=per_frame)).astype(rt), (BATCH, SEQ, EMBED))
        return x if kv is None else (x, cache)


def patch_tokens(latents: jax.Array, kernel: jax.Array, bias: jax.Array, patch: Sequence[int]
                 ) -> tuple[jax.Array, tuple[int, int, int]]:
    """A non-overlapping conv3d patch embedding (stride == kernel ``patch``) as patchify + one matmul: latents
    (B, C, F, H, W) -> float32 tokens (B, F/pt * H/ph * W/pw, D) in (f, h, w) order and the token grid. ``kernel``
    is (pt, ph, pw, C, D) (the conv kernel channel-last), ``bias`` (D,)."""
    f, hh, ww = latents.shape[2:]
    pt, ph, pw = patch
    if f % pt or hh % ph or ww % pw:
        raise ValueError(f"latent shape {(f, hh, ww)} is not divisible by patch_size {tuple(patch)}")
    p, _ = patchify(latents, tuple(patch), order="thwc")
    x = jnp.matmul(p.astype(kernel.dtype), kernel.reshape(-1, kernel.shape[-1]), preferred_element_type=jnp.float32)
    return x + bias.astype(jnp.float32), (f // pt, hh // ph, ww // pw)


def run_blocks(block_graphdef: nnx.GraphDef, stacked_block_state: nnx.State, x: jax.Array, *inputs: Any) -> jax.Array:
    """Run the blocks whose params are stacked on the leading axis of ``stacked_block_state`` with ``lax.scan``;
    ``inputs`` are :meth:`WanBlock.__call__`'s after ``x`` (``ctx, tproj, rope[, img_ctx]``), the same every layer.

    ``stacked_block_state`` may be any slice ``[i:j]`` of the model's stacked block state (offload executors run a
    few layers at a time). ``block_graphdef`` is the graphdef of a single ``WanBlock``
    (see :meth:`WanDiT.split_blocks`).
    """
    return scan_blocks(block_graphdef, stacked_block_state, x, *inputs)


# --------------------------------------------------------------------------------------------------------------
# Full model
# --------------------------------------------------------------------------------------------------------------


class WanDiT(nnx.Module):
    """The Wan DiT. Call signature::

        model(latents, timestep, context, image_context=None) -> (B, out_channels, F, H, W) float32

    ``latents`` (B, in_channels, F, H, W) — for I2V the caller has already concatenated the condition channels;
    ``timestep`` (B,) or per token (B, S); ``context`` (B, L, text_dim) text embeddings; ``image_context``
    (B, Li, image_dim) CLIP image tokens for I2V configs (FLF2V: first- and last-frame tokens concatenated on the
    sequence axis, Li = ``pos_embed_seq_len``; diffusers' (2B, Li/2, image_dim) layout is accepted too).
    """

    block_type = WanBlock  # a family built on this DiT may stack its own block (Helios)

    def __init__(self, cfg: WanDiTConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        dim, dt = cfg.dim, cfg.dtype
        pt, ph, pw = cfg.patch_size
        init = nnx.initializers.lecun_normal(in_axis=(0, 1, 2, 3), out_axis=4)
        # Patch embedding: conv3d kernel (pt, ph, pw, C_in, dim), applied as reshape + matmul.
        self.patch_kernel = param(
            init(rngs.params(), (pt, ph, pw, cfg.in_channels, dim), dt),
            (None, None, None, None, EMBED),
        )
        self.patch_bias = param(jnp.zeros((dim,), dt), (EMBED,))
        # Condition embedder. The time MLP stays fp32 (diffusers keeps time_embedder in fp32).
        self.time_linear_1 = Linear(cfg.freq_dim, dim, (None, EMBED), dtype=jnp.float32, rngs=rngs)
        self.time_linear_2 = Linear(dim, dim, (None, EMBED), dtype=jnp.float32, rngs=rngs)
        self.time_proj = Linear(dim, 6 * dim, (None, EMBED), dtype=dt, rngs=rngs)
        self.text_linear_1 = Linear(cfg.text_dim, dim, (None, EMBED), dtype=dt, rngs=rngs)
        self.text_linear_2 = Linear(dim, dim, (None, EMBED), dtype=dt, rngs=rngs)
        # I2V image embedder (diffusers WanImageEmbedding): fp32 LayerNorm (eps 1e-5) -> Linear -> gelu (erf) ->
        # Linear -> fp32 LayerNorm; FLF2V adds a learned position embedding first.
        if cfg.image_dim is not None:
            idim = cfg.image_dim
            self.image_norm1 = LayerNorm(idim, eps=1e-5, names=(None,))
            self.image_linear_1 = Linear(idim, idim, (None, None), dtype=dt, rngs=rngs)
            self.image_linear_2 = Linear(idim, dim, (None, EMBED), dtype=dt, rngs=rngs)
            self.image_norm2 = LayerNorm(dim, (EMBED,), eps=1e-5)
            if cfg.pos_embed_seq_len is not None:
                self.image_pos_embed = param(jnp.zeros((cfg.pos_embed_seq_len, idim), dt), (None, None))
            else:
                self.image_pos_embed = None
        else:
            self.image_norm1 = self.image_linear_1 = self.image_linear_2 = self.image_norm2 = None
            self.image_pos_embed = None
        # Blocks, stacked on a leading 'layers' axis.
        self.blocks = stacked(lambda r: self.block_type(cfg, rngs=r), cfg.num_layers, rngs)
        # Output head.
        self.proj_out = Linear(dim, cfg.out_channels * pt * ph * pw, (EMBED, None), dtype=dt, rngs=rngs)
        self.scale_shift_table = param(
            jax.random.normal(rngs.params(), (2, dim), jnp.float32) / dim**0.5, (None, EMBED)
        )

    # -- pieces an executor may call separately ------------------------------------------------------------------

    def split_blocks(self) -> tuple[nnx.GraphDef, nnx.State]:
        """(graphdef of ONE block, stacked state with leading layer axis) for :func:`run_blocks`."""
        graphdef, state = nnx.split(self.blocks)
        return graphdef, state

    def embed(self, latents: jax.Array, timestep: jax.Array, context: jax.Array):
        """Patchify + time/text embeddings. Returns (x, ctx, temb, tproj, rope, grid).

        ``timestep`` (B,) gives temb (B, dim) and tproj (B, 6, dim); per token (B, S) gives temb (B, S, dim) and
        tproj (B, S, 6, dim), sequence-sharded like x. Image tokens are embedded by :meth:`embed_image`.
        """
        x, grid = self.patch_embed(latents)
        b = latents.shape[0]
        n_tok = grid[0] * grid[1] * grid[2]
        per_token = timestep.ndim == 2
        if timestep.ndim not in (1, 2) or timestep.shape[0] != b or (per_token and timestep.shape[1] != n_tok):
            raise ValueError(
                f"timestep shape {tuple(timestep.shape)}: expected ({b},) or per token ({b}, {n_tok})"
            )
        if per_token:  # the per-token timesteps follow the tokens' sequence sharding
            timestep = constrain(timestep, (BATCH, SEQ))
        temb, tproj = self.time_embed(timestep)
        if per_token:
            temb = constrain(temb, (BATCH, SEQ, EMBED))
            tproj = constrain(tproj, (BATCH, SEQ, None, EMBED))
        ctx, rope = self.text_embed(context), self.rope(grid)
        return x, ctx, temb, tproj, rope, grid

    def time_embed(self, timestep: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Timesteps of any shape (...) -> (temb (..., dim) in the param dtype, tproj (..., 6, dim)): the
        sinusoid (cos first, shift 0), the fp32 SiLU MLP and the modulation projection."""
        cfg = self.cfg
        t_freq = timestep_embedding(timestep, cfg.freq_dim, flip_sin_to_cos=True, downscale_freq_shift=0)
        temb = self.time_linear_2(jax.nn.silu(self.time_linear_1(t_freq)))
        temb = temb.astype(cfg.dtype)  # diffusers: temb.type_as(encoder_hidden_states)
        tproj = self.time_proj(jax.nn.silu(temb))
        return temb, tproj.reshape(*tproj.shape[:-1], 6, -1)

    def text_embed(self, context: jax.Array) -> jax.Array:
        """Text context (B, L, text_dim) -> (B, L, dim): Linear -> gelu(tanh) -> Linear, replicated over sp."""
        ctx = self.text_linear_1(context.astype(self.cfg.dtype))
        ctx = self.text_linear_2(jax.nn.gelu(ctx, approximate=True))
        return constrain(ctx, (BATCH, None, EMBED))

    def rope(self, grid: Sequence[int]) -> tuple[jax.Array, jax.Array]:
        """The 3-D RoPE tables of a (f, h, w) token grid, sequence-sharded like the tokens."""
        cos, sin = rope_tables(self.cfg, *grid)
        return constrain(cos, (SEQ, None)), constrain(sin, (SEQ, None))

    def patch_embed(self, latents: jax.Array) -> tuple[jax.Array, tuple[int, int, int]]:
        """(B, C, F, H, W) latents -> tokens (B, S, dim) in the residual dtype and the token grid (f, h, w)."""
        cfg = self.cfg
        b, c, f, hh, ww = latents.shape
        if c != cfg.in_channels:
            raise ValueError(
                f"latents have {c} channels but the Wan DiT config has in_channels={cfg.in_channels}"
                + (" (I2V: concatenate the mask + condition latents to the noisy latents first)"
                   if c < cfg.in_channels else "")
            )
        x, grid = patch_tokens(latents, self.patch_kernel[...], self.patch_bias[...], cfg.patch_size)
        return constrain(x.astype(cfg.residual_dtype), (BATCH, SEQ, EMBED)), grid

    def embed_image(self, image_context: jax.Array | None) -> jax.Array | None:
        """I2V image tokens (B, Li, image_dim) -> (B, Li, dim) in the param dtype, replicated over sp; None -> None.

        Configs without ``image_dim`` (but with ``added_kv_proj_dim``) take already-embedded tokens as they are.
        """
        cfg = self.cfg
        if image_context is None:
            return None
        if cfg.added_kv_proj_dim is None:
            raise ValueError("image_context given, but this Wan DiT config has no image attention (added_kv_proj_dim)")
        dt = cfg.dtype
        h = image_context.astype(dt)
        if cfg.image_dim is not None:
            if self.image_pos_embed is not None:
                # FLF2V: (B, 2 * 257, D) [first; last] tokens per sample; diffusers' (2B, 257, D) is the same memory.
                h = h.reshape(-1, cfg.pos_embed_seq_len, h.shape[-1]) + self.image_pos_embed[...][None]
            h = self.image_norm1(h).astype(dt)
            h = jax.nn.gelu(self.image_linear_1(h), approximate=False)
            h = self.image_linear_2(h)
            h = self.image_norm2(h).astype(dt)
        return constrain(h, (BATCH, None, EMBED))

    def head(self, x: jax.Array, temb: jax.Array, grid: Sequence[int]) -> jax.Array:
        """Output norm + modulation + projection + unpatchify -> (B, out_C, F, H, W) float32.

        ``temb`` (B, dim) modulates every token alike; (B, S, dim) (per-token timesteps) token by token, or
        (B, F, dim) frame by frame where the blocks modulate per frame (``WanBlock.frame_modulation``)."""
        cfg = self.cfg
        table = self.scale_shift_table[...].astype(jnp.float32)
        per_frame = temb.ndim == 3 and getattr(self.block_type, "frame_modulation", False)
        if per_frame:
            t = temb.astype(jnp.float32)
            shift, scale = table[0] + t, table[1] + t
        elif temb.ndim == 3:
            t = constrain(temb.astype(jnp.float32), (BATCH, SEQ, EMBED))
            shift, scale = table[0] + t, table[1] + t
        else:
            mod = table[None] + temb.astype(jnp.float32)[:, None]
            shift, scale = mod[:, 0:1], mod[:, 1:2]
        h = modulate(layer_norm(x, cfg.eps), shift, scale, per_frame=per_frame).astype(x.dtype)
        y = self.proj_out(h).astype(jnp.float32)
        return unpatchify(y, grid, cfg.patch_size, order="thwc")

    def teacache_signal(self, timestep: jax.Array, use_ret_steps: bool) -> jax.Array:
        """TeaCache4Wan2.1's modulated input for (B,) timesteps, in float32: the time projection ``e0``
        (B, 6 * dim) with retention steps, the time embedding ``e`` (B, dim) without."""
        cfg = self.cfg
        t_freq = timestep_embedding(timestep, cfg.freq_dim, flip_sin_to_cos=True, downscale_freq_shift=0)
        temb = self.time_linear_2(jax.nn.silu(self.time_linear_1(t_freq))).astype(jnp.float32)
        if not use_ret_steps:
            return temb
        return self.time_proj(jax.nn.silu(temb.astype(cfg.dtype))).astype(jnp.float32)

    # -- the staged forward an offload executor drives: pre -> block groups -> post ----------------------------

    block_groups = ("blocks",)

    def pre(
        self, latents: jax.Array, timestep: jax.Array, context: jax.Array, image_context: jax.Array | None = None
    ) -> tuple[jax.Array, dict]:
        """Everything before the blocks: (x, aux) where aux holds what the blocks and :meth:`post` read
        (``img_ctx`` only when ``image_context`` is given)."""
        x, ctx, temb, tproj, rope, _ = self.embed(latents, timestep, context)
        aux = {"ctx": ctx, "temb": temb, "tproj": tproj, "rope": rope}
        img_ctx = self.embed_image(image_context)
        if img_ctx is not None:
            aux["img_ctx"] = img_ctx
        return x, aux

    @staticmethod
    def run_block_group(name: str, graphdef: nnx.GraphDef, state: nnx.State, x: jax.Array, aux: dict) -> jax.Array:
        """Run any slice of the stacked group ``name`` (Wan has one, ``blocks``)."""
        if name != "blocks":
            raise KeyError(f"Wan has no block group {name!r}")
        return run_blocks(graphdef, state, x, aux["ctx"], aux["tproj"], aux["rope"], aux.get("img_ctx"))

    def post(self, x: jax.Array, aux: dict, latent_shape: Sequence[int]) -> jax.Array:
        pt, ph, pw = self.cfg.patch_size
        f, hh, ww = latent_shape[-3:]
        return self.head(x, aux["temb"], (f // pt, hh // ph, ww // pw))

    def __call__(
        self, latents: jax.Array, timestep: jax.Array, context: jax.Array, image_context: jax.Array | None = None
    ) -> jax.Array:
        """latents (B, C, F, H, W), timestep (B,) or (B, S), context (B, L, text_dim), image_context
        (B, Li, image_dim) or None -> (B, out_C, F, H, W) float32."""
        x, ctx, temb, tproj, rope, grid = self.embed(latents, timestep, context)
        img_ctx = self.embed_image(image_context)
        graphdef, state = self.split_blocks()
        x = run_blocks(graphdef, state, x, ctx, tproj, rope, img_ctx)
        return self.head(x, temb, grid)
