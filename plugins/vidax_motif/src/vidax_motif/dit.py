"""Motif-Video's video diffusion transformer (diffusers ``MotifVideoTransformer3DModel``) in Flax NNX.

The reference, stage by stage:

* latents ``(B, C_in, F, H, W)`` (the noisy latents, a first-frame condition latent and its mask, concatenated by
  the pipeline) -> conv3d patch embedding (stride == kernel) -> video tokens in (f, h, w) order;
* the text (T5Gemma2 hidden states) through a PixArt-style projection (linear, tanh-GELU, linear); with
  ``image_embed_dim`` and an image, SigLIP features through LayerNorm -> linear -> GELU -> linear -> LayerNorm put
  in front of the text (the conditioning stream ``[image; text]``, image tokens always visible);
* the timestep's sinusoid (256) through an MLP gives the per-sample modulation ``temb``;
* ``num_layers`` dual-stream blocks (separate video / conditioning weights, one joint attention; the conditioning
  stream's q/k are always RMS-normed, the video's per ``qk_norm``), then ``num_single_layers -
  num_decoder_layers`` single-stream blocks (shared weights, attention and MLP in parallel, one output projection
  over both); either kind may add a text cross-attention (``enable_text_cross_attention_dual`` / ``_single``): the
  video's attention output queries the normed text tokens (RoPE on the queries only) and the result is added;
* ``num_decoder_layers`` single-stream "DDT decoder" blocks: the patch embedding's tokens attend jointly with the
  encoder's final video tokens (no mask, RoPE on the decoder tokens only, no cross-attention), both streams
  updated; the decoder tokens are what the head sees;
* head: AdaLN-continuous (scale, shift) and a projection, unpatchified in (c, t, h, w) order.

3-D RoPE (theta ``rope_theta``, ``rope_axes_dim`` over (t, h, w), interleaved pairs) applies to the video tokens
only; the text padding mask is a key mask of the joint attention and of the cross-attention (never a dense bias).

Parallelism: the video tokens are split over ``sp`` (Ulysses all-to-alls around each attention), the conditioning
stream stays whole on every rank (:func:`vidax_core.attention.ulysses.joint_attention`); the decoder's two
video-length streams are interleaved token by token into one sequence-sharded sequence, so their joint attention
needs no extra exchange. Heads, MLP and the modulation widths are tensor-parallel.

The three stacks are stacked groups (``dual_blocks``, ``single_blocks``, ``decoder_blocks``, the empty ones left
out) run with ``lax.scan`` and streamed in order by the offload executor. The carry is ``(video, conditioning)``,
or ``(video, conditioning, decoder)`` with decoder layers: the decoder stream starts as the patch embedding's
tokens and rides through the encoder stacks untouched.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, Sequence

import jax
import jax.numpy as jnp
from flax import nnx

from vidax_core.attention import ulysses
from vidax_core.io.arch_base import TransformerConfig
from vidax_core.nn import rope as rope_lib
from vidax_core.nn.adaln import AdaLayerNormContinuous, Modulation, gate, modulate
from vidax_core.nn.attention_block import Attention, merge_heads, project_heads, qk_norm_layer, rotate
from vidax_core.nn.feedforward import FeedForward
from vidax_core.nn.layers import Linear, param, scan_blocks, stacked
from vidax_core.nn.norms import LayerNorm, layer_norm
from vidax_core.nn.patchify import patchify, unpatchify
from vidax_core.nn.timestep import TimestepEmbedding, timestep_embedding
from vidax_core.parallel.sharding import constrain

EMBED, HEADS, MLP = "embed", "heads", "mlp"
BATCH, SEQ = "batch", "seq"
EPS = 1e-6  # the blocks' LayerNorms, q/k norms and the output norm
IMAGE_EPS = 1e-5  # the image projection's two affine LayerNorms (torch's default)
QK_NORMS = ("rms_norm", "layer_norm")  # any other qk_norm value builds no q/k norm, as the reference


@dataclasses.dataclass(frozen=True)
class MotifDiTConfig(TransformerConfig):
    """Field names match diffusers' ``config.json``; ``dtype`` is the parameter dtype."""

    in_channels: int = 33
    out_channels: int | None = 16
    num_attention_heads: int = 24
    attention_head_dim: int = 128
    num_layers: int = 20
    num_single_layers: int = 40
    num_decoder_layers: int = 0
    mlp_ratio: float = 4.0
    patch_size: int = 2
    patch_size_t: int = 1
    qk_norm: str | None = "rms_norm"
    norm_type: str = "layer_norm"
    text_embed_dim: int = 4096
    image_embed_dim: int | None = None
    rope_theta: float = 256.0
    rope_axes_dim: tuple[int, ...] = (16, 56, 56)
    enable_text_cross_attention_dual: bool = False
    enable_text_cross_attention_single: bool = False
    dtype: Any = jnp.float32

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> "MotifDiTConfig":
        """As every config (values checked), except that a stack may be empty: ``num_layers`` or
        ``num_single_layers`` 0 builds no such blocks, as the reference."""
        empty = {k: 0 for k in ("num_layers", "num_single_layers") if config.get(k) == 0 and k not in overrides
                 and not isinstance(config.get(k), bool)}
        return super().from_config(config, **empty, **overrides)

    def __post_init__(self) -> None:
        if not self.out_channels:  # diffusers: out_channels or in_channels (0 and None alike)
            object.__setattr__(self, "out_channels", self.in_channels)
        object.__setattr__(self, "rope_axes_dim", tuple(int(d) for d in self.rope_axes_dim))
        problems = self.problems()
        if problems:
            raise ValueError("; ".join(problems))

    def problems(self) -> list[str]:
        """Settings the reference cannot run (it raises, or fails on a shape), one phrase each."""
        out = []
        if self.norm_type != "layer_norm":
            out.append(f"norm_type={self.norm_type!r}: the reference's AdaLayerNormZeroSingle takes only 'layer_norm'")
        if len(self.rope_axes_dim) != 3 or any(d % 2 for d in self.rope_axes_dim):
            out.append(f"rope_axes_dim {list(self.rope_axes_dim)} must be three even sizes (t, h, w)")
        elif sum(self.rope_axes_dim) != self.attention_head_dim:
            out.append(f"rope_axes_dim {list(self.rope_axes_dim)} must sum to attention_head_dim="
                       f"{self.attention_head_dim}")
        if not 0 <= self.num_decoder_layers <= self.num_single_layers:
            out.append(f"num_decoder_layers={self.num_decoder_layers} must lie in 0..num_single_layers="
                       f"{self.num_single_layers}: the decoder blocks are the last single-stream blocks")
        if min(self.num_layers, self.num_single_layers, self.patch_size, self.patch_size_t) < 0 or \
                min(self.patch_size, self.patch_size_t, self.num_attention_heads, self.attention_head_dim) < 1:
            out.append("layer counts must be >= 0 and patch sizes, heads and head size >= 1")
        return out

    @property
    def qk(self) -> str | None:
        """The core block's q/k norm kind (None for any value the reference builds no norm for)."""
        return self.qk_norm if self.qk_norm in QK_NORMS else None

    @property
    def mlp_dim(self) -> int:
        return int(self.dim * self.mlp_ratio)

    @property
    def patch(self) -> tuple[int, int, int]:
        return (self.patch_size_t, self.patch_size, self.patch_size)

    @property
    def num_encoder_single(self) -> int:
        return self.num_single_layers - self.num_decoder_layers

    @property
    def groups(self) -> dict[str, int]:
        """The stacked block groups in execution order, empty ones left out: {name: blocks}."""
        counts = {"dual_blocks": self.num_layers, "single_blocks": self.num_encoder_single,
                  "decoder_blocks": self.num_decoder_layers}
        return {k: n for k, n in counts.items() if n > 0}


def rope_tables(cfg: MotifDiTConfig, grid: Sequence[int]) -> tuple[jax.Array, jax.Array]:
    """cos/sin (S, head_dim / 2) of the video token grid (angles in float64 on the host, as the reference)."""
    return rope_lib.cos_sin(rope_lib.grid_angles(list(grid), cfg.rope_axes_dim, cfg.rope_theta))


# --------------------------------------------------------------------------------------------------------------
# Pieces of a block
# --------------------------------------------------------------------------------------------------------------


class HeadsQKV(nnx.Module):
    """One stream's q/k/v projections (biases) and its per-head q/k norms (``qk`` kind, None: none)."""

    def __init__(self, cfg: MotifDiTConfig, qk: str | None, *, rngs: nnx.Rngs):
        dim, dt = cfg.dim, cfg.dtype
        self.heads = cfg.num_attention_heads
        self.to_q = Linear(dim, dim, (EMBED, HEADS), dtype=dt, rngs=rngs)
        self.to_k = Linear(dim, dim, (EMBED, HEADS), dtype=dt, rngs=rngs)
        self.to_v = Linear(dim, dim, (EMBED, HEADS), dtype=dt, rngs=rngs)
        self.norm_q = qk_norm_layer(qk, dim, self.heads, EPS)
        self.norm_k = qk_norm_layer(qk, dim, self.heads, EPS)

    def __call__(self, x: jax.Array, seq: str | None, rope: tuple[jax.Array, jax.Array] | None = None):
        names = (BATCH, seq, HEADS)
        q = project_heads(self.to_q, self.norm_q, x, names, self.heads)
        k = project_heads(self.to_k, self.norm_k, x, names, self.heads)
        v = project_heads(self.to_v, None, x, names, self.heads)
        if rope is not None:
            q, k = rotate(q, rope), rotate(k, rope)
        return q, k, v


class TextCrossAttention(Attention):
    """diffusers ``MotifVideoCrossAttention``: the video tokens' attention output queries the normed text tokens;
    RoPE turns the queries only, the text mask masks the keys; ``to_out`` projects back."""

    def __call__(self, x: jax.Array, kv: jax.Array, rope, *, kv_mask: jax.Array | None) -> jax.Array:
        q = rotate(self._q(x, SEQ), rope, self.rope_style)
        k, v = self._kv(kv, None)
        return self.out(ulysses.cross_attention(q, k, v, kv_mask=kv_mask), SEQ)


def _cross(cfg: MotifDiTConfig, rngs: nnx.Rngs) -> TextCrossAttention:
    return TextCrossAttention(cfg.dim, cfg.num_attention_heads, dtype=cfg.dtype, rngs=rngs, qk_norm=cfg.qk,
                              qk_eps=EPS)


def _text(ctx: jax.Array, aux: Mapping[str, Any]) -> jax.Array:
    """The text part of the conditioning stream ``[image; text]`` (its length is the text mask's)."""
    return ctx[:, ctx.shape[1] - aux["txt_mask"].shape[1]:]


# --------------------------------------------------------------------------------------------------------------
# Blocks
# --------------------------------------------------------------------------------------------------------------


class DualBlock(nnx.Module):
    """diffusers ``MotifVideoTransformerBlock``: AdaLN-zero per stream, one joint attention, the optional text
    cross-attention on the video side, tanh-GELU feed-forwards per stream."""

    def __init__(self, cfg: MotifDiTConfig, *, rngs: nnx.Rngs):
        dim, dt = cfg.dim, cfg.dtype
        self.dtype = dt
        self.norm1 = Modulation(dim, 6, dtype=dt, rngs=rngs)
        self.norm1_context = Modulation(dim, 6, dtype=dt, rngs=rngs)
        self.attn = HeadsQKV(cfg, cfg.qk, rngs=rngs)
        self.attn_context = HeadsQKV(cfg, "rms_norm", rngs=rngs)  # add_*_proj, norm_added_*: RMS whatever qk_norm
        self.to_out = Linear(dim, dim, (HEADS, EMBED), dtype=dt, rngs=rngs)
        self.to_add_out = Linear(dim, dim, (HEADS, EMBED), dtype=dt, rngs=rngs)
        self.cross_attn = _cross(cfg, rngs) if cfg.enable_text_cross_attention_dual else None
        self.ff = FeedForward(dim, cfg.mlp_dim, dtype=dt, rngs=rngs, activation="gelu-approximate")
        self.ff_context = FeedForward(dim, cfg.mlp_dim, dtype=dt, rngs=rngs, activation="gelu-approximate")

    def __call__(self, carry, aux):
        vid, ctx, *rest = carry
        dt = self.dtype
        vid = constrain(vid, (BATCH, SEQ, EMBED))
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.norm1(aux["temb"])
        c_shift_msa, c_scale_msa, c_gate_msa, c_shift_mlp, c_scale_mlp, c_gate_mlp = self.norm1_context(aux["temb"])
        h_vid = modulate(layer_norm(vid, EPS), shift_msa, scale_msa).astype(dt)
        h_ctx = modulate(layer_norm(ctx, EPS), c_shift_msa, c_scale_msa).astype(dt)
        o_ctx, o_vid = ulysses.joint_attention(self.attn_context(h_ctx, None), self.attn(h_vid, SEQ, aux["rope"]),
                                               txt_mask=aux["ctx_mask"])
        a_vid = constrain(self.to_out(constrain(merge_heads(o_vid), (BATCH, SEQ, HEADS))), (BATCH, SEQ, EMBED))
        a_ctx = constrain(self.to_add_out(merge_heads(o_ctx)), (BATCH, None, EMBED))
        vid = vid + gate(a_vid, gate_msa)
        if self.cross_attn is not None:
            vid = vid + self.cross_attn(a_vid, _text(h_ctx, aux), aux["rope"], kv_mask=aux["txt_mask"]).astype(
                jnp.float32)
        ctx = ctx + gate(a_ctx, c_gate_msa)
        f_vid = self.ff(modulate(layer_norm(vid, EPS), shift_mlp, scale_mlp).astype(dt), SEQ)
        f_ctx = self.ff_context(modulate(layer_norm(ctx, EPS), c_shift_mlp, c_scale_mlp).astype(dt), None)
        vid = vid + gate(f_vid, gate_mlp)
        ctx = ctx + gate(f_ctx, c_gate_mlp)
        return (constrain(vid, (BATCH, SEQ, EMBED)), ctx, *rest)


class SingleBlock(nnx.Module):
    """diffusers ``MotifVideoSingleTransformerBlock``: one modulation, attention (no output projection of its own)
    and MLP in parallel from the same normed input, one projection over [attention; MLP] stored as two row blocks
    (``out_attn``, ``out_mlp``) so both halves stay tensor-parallel, gated and added to the residual.

    ``decoder=False``: the encoder stage over (video, conditioning), the joint attention under the text mask, the
    optional text cross-attention added to the video's attention output. ``decoder=True``: the DDT decoder over
    (decoder tokens, encoder video tokens), both sequence-sharded, no mask, RoPE on the decoder tokens only."""

    def __init__(self, cfg: MotifDiTConfig, *, decoder: bool, rngs: nnx.Rngs):
        dim, dt = cfg.dim, cfg.dtype
        self.dtype, self.decoder = dt, decoder
        self.norm = Modulation(dim, 3, dtype=dt, rngs=rngs)
        self.attn = HeadsQKV(cfg, cfg.qk, rngs=rngs)
        self.cross_attn = _cross(cfg, rngs) if cfg.enable_text_cross_attention_single and not decoder else None
        self.proj_mlp = Linear(dim, cfg.mlp_dim, (EMBED, MLP), dtype=dt, rngs=rngs)
        self.out_attn = Linear(dim, dim, (HEADS, EMBED), dtype=dt, rngs=rngs, bias=False, fp32_out=True)
        self.out_mlp = Linear(cfg.mlp_dim, dim, (MLP, EMBED), dtype=dt, rngs=rngs, fp32_out=True)

    def _out(self, h: jax.Array, o: jax.Array, g: jax.Array, seq: str | None) -> jax.Array:
        m = constrain(jax.nn.gelu(self.proj_mlp(h), approximate=True), (BATCH, seq, MLP))
        y = self.out_attn(o.astype(self.dtype)) + self.out_mlp(m)
        return gate(constrain(y, (BATCH, seq, EMBED)), g)

    def __call__(self, carry, aux):
        dt, rope = self.dtype, aux["rope"]
        shift, scale, g = self.norm(aux["temb"])
        if self.decoder:
            vid, ctx, dec = carry
            h_dec = modulate(layer_norm(dec, EPS), shift, scale).astype(dt)
            h_vid = modulate(layer_norm(vid, EPS), shift, scale).astype(dt)
            o_dec, o_vid = _interleaved_attention(self.attn(h_dec, SEQ, rope), self.attn(h_vid, SEQ))
            o_dec = constrain(merge_heads(o_dec), (BATCH, SEQ, HEADS))
            o_vid = constrain(merge_heads(o_vid), (BATCH, SEQ, HEADS))
            dec = dec + self._out(h_dec, o_dec, g, SEQ)
            vid = vid + self._out(h_vid, o_vid, g, SEQ)
            return (constrain(vid, (BATCH, SEQ, EMBED)), ctx, constrain(dec, (BATCH, SEQ, EMBED)))
        vid, ctx, *rest = carry
        vid = constrain(vid, (BATCH, SEQ, EMBED))
        h_vid = modulate(layer_norm(vid, EPS), shift, scale).astype(dt)
        h_ctx = modulate(layer_norm(ctx, EPS), shift, scale).astype(dt)
        o_ctx, o_vid = ulysses.joint_attention(self.attn(h_ctx, None), self.attn(h_vid, SEQ, rope),
                                               txt_mask=aux["ctx_mask"])
        o_vid = constrain(merge_heads(o_vid), (BATCH, SEQ, HEADS))
        if self.cross_attn is not None:
            o_vid = o_vid + self.cross_attn(o_vid.astype(dt), _text(h_ctx, aux), rope, kv_mask=aux["txt_mask"])
        vid = vid + self._out(h_vid, o_vid, g, SEQ)
        ctx = ctx + self._out(h_ctx, merge_heads(o_ctx), g, None)
        return (constrain(vid, (BATCH, SEQ, EMBED)), ctx, *rest)


def _interleaved_attention(a: tuple[jax.Array, ...], b: tuple[jax.Array, ...]) -> tuple[jax.Array, jax.Array]:
    """One attention over the joint sequence of two equally long sequence-sharded streams, with no mask: their
    tokens are interleaved (a0, b0, a1, b1, ...), so each rank's shard of the joint sequence is its shards of the
    two streams and the Ulysses exchange runs as for one stream; the attention does not depend on the keys'
    order."""
    def join(x, y):
        bsz, s, h, d = x.shape
        return jnp.stack([x, y], axis=2).reshape(bsz, 2 * s, h, d)

    q, k, v = (join(x, y) for x, y in zip(a, b))
    o = ulysses.self_attention(q, k, v)
    bsz, s2, h, d = o.shape
    o = o.reshape(bsz, s2 // 2, 2, h, d)
    return o[:, :, 0], o[:, :, 1]


# --------------------------------------------------------------------------------------------------------------
# Embeddings
# --------------------------------------------------------------------------------------------------------------


class ImageProjection(nnx.Module):
    """diffusers ``MotifVideoImageProjection``: LayerNorm -> linear -> GELU (erf) -> linear -> LayerNorm."""

    def __init__(self, d_in: int, dim: int, *, dtype: Any, rngs: nnx.Rngs):
        self.dtype = dtype
        self.norm_in = LayerNorm(d_in, (None,), eps=IMAGE_EPS)
        self.linear_1 = Linear(d_in, d_in, (None, None), dtype=dtype, rngs=rngs)
        self.linear_2 = Linear(d_in, dim, (None, EMBED), dtype=dtype, rngs=rngs)
        self.norm_out = LayerNorm(dim, (EMBED,), eps=IMAGE_EPS)

    def __call__(self, x: jax.Array) -> jax.Array:
        h = self.linear_1(self.norm_in(x).astype(self.dtype))
        h = jax.nn.gelu(h.astype(jnp.float32), approximate=False).astype(self.dtype)
        return self.norm_out(self.linear_2(h))


# --------------------------------------------------------------------------------------------------------------
# Full model
# --------------------------------------------------------------------------------------------------------------


class MotifDiT(nnx.Module):
    """``__call__(latents, timestep, context, image_embeds=None)``: latents (B, in_channels, F, H, W); timestep
    (B,); context ``{"hidden": (B, L, text_embed_dim), "mask": (B, L)}``; image_embeds (B, N, image_embed_dim) the
    SigLIP features of the first frame (image-to-video) or None. Returns (B, out_channels, F, H, W) float32."""

    block_groups: tuple[str, ...] = ("dual_blocks", "single_blocks", "decoder_blocks")

    def __init__(self, cfg: MotifDiTConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        dim, dt = cfg.dim, cfg.dtype
        self.block_groups = tuple(cfg.groups)
        init = nnx.initializers.lecun_normal(in_axis=(0, 1, 2, 3), out_axis=4)
        self.patch_kernel = param(init(rngs.params(), (*cfg.patch, cfg.in_channels, dim), dt),
                                  (None, None, None, None, EMBED))
        self.patch_bias = param(jnp.zeros((dim,), dt), (EMBED,))
        self.context_embedder = TimestepEmbedding(cfg.text_embed_dim, dim, act="gelu_tanh", dtype=dt, rngs=rngs)
        self.image_embedder = (ImageProjection(cfg.image_embed_dim, dim, dtype=dt, rngs=rngs)
                               if cfg.image_embed_dim is not None else None)
        self.timestep_embedder = TimestepEmbedding(256, dim, rngs=rngs)
        self.dual_blocks = stacked(lambda r: DualBlock(cfg, rngs=r), cfg.num_layers, rngs) if cfg.num_layers else None
        self.single_blocks = (stacked(lambda r: SingleBlock(cfg, decoder=False, rngs=r), cfg.num_encoder_single, rngs)
                              if cfg.num_encoder_single else None)
        self.decoder_blocks = (stacked(lambda r: SingleBlock(cfg, decoder=True, rngs=r), cfg.num_decoder_layers, rngs)
                               if cfg.num_decoder_layers else None)
        self.norm_out = AdaLayerNormContinuous(dim, dim, eps=EPS, affine=False, dtype=dt, rngs=rngs)
        self.proj_out = Linear(dim, cfg.out_channels * math.prod(cfg.patch), (EMBED, None), dtype=dt, rngs=rngs)

    # -- staged forward: pre -> each block group -> post -------------------------------------------------------

    def pre(self, latents: jax.Array, timestep: jax.Array, context: Mapping[str, jax.Array],
            image_embeds: jax.Array | None = None) -> tuple[tuple, dict]:
        cfg = self.cfg
        b, c, f, hh, ww = latents.shape
        if c != cfg.in_channels:
            raise ValueError(f"the Motif-Video DiT takes {cfg.in_channels} latent channels (in_channels), got {c}")
        tokens, grid = patchify(latents, cfg.patch, order="thwc")
        k = self.patch_kernel[...]
        vid = jnp.matmul(tokens.astype(k.dtype), k.reshape(-1, k.shape[-1]), preferred_element_type=jnp.float32)
        vid = constrain(vid + self.patch_bias[...].astype(jnp.float32), (BATCH, SEQ, EMBED))
        timestep = jnp.broadcast_to(jnp.asarray(timestep, jnp.float32).reshape(-1), (b,))
        temb = self.timestep_embedder(timestep_embedding(timestep, 256, flip_sin_to_cos=True,
                                                         downscale_freq_shift=0))
        ctx = self.context_embedder(context["hidden"].astype(cfg.dtype))
        txt_mask = context["mask"] != 0
        ctx_mask = txt_mask
        if image_embeds is not None:
            if self.image_embedder is None:
                raise ValueError("image_embeds given, but the Motif-Video DiT config has no image_embed_dim")
            img = self.image_embedder(jnp.asarray(image_embeds).astype(cfg.dtype))
            ctx = jnp.concatenate([img, ctx], axis=1)
            ctx_mask = jnp.concatenate([jnp.ones(img.shape[:2], bool), txt_mask], axis=1)
        cos, sin = rope_tables(cfg, grid)
        aux = {"temb": temb, "rope": (constrain(cos, (SEQ, None)), constrain(sin, (SEQ, None))),
               "ctx_mask": ctx_mask, "txt_mask": txt_mask}
        carry = (vid, constrain(ctx, (BATCH, None, EMBED)))
        return (carry + (vid,) if cfg.num_decoder_layers else carry), aux

    @classmethod
    def run_block_group(cls, name: str, graphdef: nnx.GraphDef, state: nnx.State, x, aux: dict):
        """Run any slice of one of the stacked groups."""
        if name not in cls.block_groups:
            raise KeyError(f"the Motif-Video DiT has no block group {name!r}")
        return scan_blocks(graphdef, state, x, aux)

    def post(self, x, aux: dict, latent_shape: Sequence[int]) -> jax.Array:
        cfg = self.cfg
        out = x[2] if cfg.num_decoder_layers else x[0]
        f, hh, ww = latent_shape[-3:]
        pt, ph, pw = cfg.patch
        y = self.proj_out(self.norm_out(out, aux["temb"]).astype(cfg.dtype)).astype(jnp.float32)
        return unpatchify(y, (f // pt, hh // ph, ww // pw), cfg.patch, order="cthw")

    def __call__(self, latents: jax.Array, timestep: jax.Array, context: Mapping[str, jax.Array],
                 image_embeds: jax.Array | None = None) -> jax.Array:
        x, aux = self.pre(latents, timestep, context, image_embeds)
        for name in self.block_groups:
            graphdef, state = nnx.split(getattr(self, name))
            x = self.run_block_group(name, graphdef, state, x, aux)
        return self.post(x, aux, latents.shape)


def example_inputs(cfg: MotifDiTConfig, batch: int, grid: Sequence[int], text: int,
                   image_tokens: int = 0) -> tuple[tuple, dict, dict]:
    """``DitBuild.example_inputs``: the ``in_channels``-channel latents (noise, condition latent, mask), the text
    context (hidden states and key mask) and, with ``image_tokens``, the SigLIP image features."""
    latents = ((batch, cfg.in_channels, *grid), cfg.dtype)
    context = {"hidden": ((batch, text, cfg.text_embed_dim), cfg.dtype), "mask": ((batch, text), "int32")}
    kwargs = {"image_embeds": ((batch, image_tokens, cfg.image_embed_dim), cfg.dtype)} if image_tokens else {}
    return latents, context, kwargs
