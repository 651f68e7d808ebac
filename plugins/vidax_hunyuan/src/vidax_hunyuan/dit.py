"""HunyuanVideo 1.0 video diffusion transformer (diffusers ``HunyuanVideoTransformer3DModel``) in Flax NNX.

The MMDiT of the reference:

* latents ``(B, C, F, H, W)`` -> conv3d patch embedding (stride == kernel) -> video tokens (f, h, w order);
* the text (Llama hidden states, ``(B, L, text_embed_dim)``) goes through a *token refiner*: its masked mean and
  the timestep give a per-sample embedding that gates a few pre-norm self-attention + SiLU-MLP blocks over the
  text alone (the padded text tokens are masked out as keys; key 0 is always visible, as the reference);
* per-sample modulation ``temb`` = timestep MLP + guidance MLP (the embedded guidance, ``guidance_embeds``) + the
  pooled CLIP vector projected;
* ``num_layers`` double-stream blocks (separate video / text weights, one joint attention) then
  ``num_single_layers`` single-stream blocks (shared weights, attention and MLP in parallel) over both streams;
  per-head RMS q/k norms, 3-D RoPE (theta 256, interleaved pairs) on the video tokens only;
* the text padding mask enters the joint attention as a key mask of *lengths* (the reference keeps the first
  ``sum(mask)`` text tokens), through :func:`vidax_core.attention.ulysses.joint_attention` (no dense bias, runs
  under sequence parallelism);
* output head: AdaLN-continuous (scale, shift) and a projection, unpatchified in (c, t, h, w) order.

Image-to-video ``image_condition_type="token_replace"`` (HunyuanVideo-I2V): the tokens of the first latent frame
(the clean image latent) are modulated with the embedding of timestep 0 (plus the pooled text) instead of the
step's. ``"latent_concat"`` needs nothing in the DiT (the caller concatenates channels).

The two block stacks are two stacked groups (``double_blocks``, ``single_blocks``) run with ``lax.scan`` and
streamed one after the other by the offload executor. The text and video streams stay two arrays throughout
(text replicated, video sequence-sharded), so the single-stream blocks never concatenate them.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar, Mapping, Sequence

import jax
import jax.numpy as jnp
from flax import nnx

from vidax_core.attention import ulysses
from vidax_core.io.arch_base import TransformerConfig
from vidax_core.nn import rope as rope_lib
from vidax_core.nn.adaln import AdaLayerNormContinuous, Modulation, gate, modulate
from vidax_core.nn.attention_block import project_heads, rotate, split_heads
from vidax_core.nn.feedforward import FeedForward
from vidax_core.nn.layers import Linear, param, scan_blocks, stacked
from vidax_core.nn.norms import LayerNorm, RMSNorm, layer_norm
from vidax_core.nn.patchify import patchify, unpatchify
from vidax_core.nn.timestep import TimestepEmbedding, timestep_embedding
from vidax_core.parallel.sharding import constrain

EMBED, HEADS, MLP = "embed", "heads", "mlp"
BATCH, SEQ = "batch", "seq"
EPS = 1e-6


class HunyuanDims(TransformerConfig):
    """What the 1.0 and 1.5 DiT configs share: the MLP width, the (t, h, w) patch and the checks of the q/k norm and
    the RoPE split (``family`` names the model in the message)."""

    family: ClassVar[str] = "HunyuanVideo"

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "rope_axes_dim", tuple(int(d) for d in self.rope_axes_dim))
        self.require(f"the {self.family} DiT", qk_norm="rms_norm")
        if sum(self.rope_axes_dim) != self.attention_head_dim:
            raise ValueError(f"rope_axes_dim {self.rope_axes_dim} "
                             f"must sum to attention_head_dim={self.attention_head_dim}")

    @property
    def mlp_dim(self) -> int:
        return int(self.dim * self.mlp_ratio)

    @property
    def patch(self) -> tuple[int, int, int]:
        return (self.patch_size_t, self.patch_size, self.patch_size)

    def build_fields(self) -> dict[str, Any]:
        """What the denoiser build reads of this architecture: the (t, h, w) patch and the ``double_blocks``."""
        return {"in_channels": self.out_channels, "heads": self.num_attention_heads, "patch_size": self.patch,
                "block_counts": {"double_blocks": self.num_layers}}


@dataclasses.dataclass(frozen=True)
class HunyuanDiTConfig(HunyuanDims):
    """Field names match diffusers' ``config.json``; ``dtype`` is the parameter dtype."""

    in_channels: int = 16
    out_channels: int = 16
    num_attention_heads: int = 24
    attention_head_dim: int = 128
    num_layers: int = 20
    num_single_layers: int = 40
    num_refiner_layers: int = 2
    mlp_ratio: float = 4.0
    patch_size: int = 2
    patch_size_t: int = 1
    qk_norm: str = "rms_norm"
    guidance_embeds: bool = True
    text_embed_dim: int = 4096
    pooled_projection_dim: int = 768
    rope_theta: float = 256.0
    rope_axes_dim: tuple[int, int, int] = (16, 56, 56)
    image_condition_type: str | None = None
    dtype: Any = jnp.float32

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.image_condition_type not in (None, "latent_concat", "token_replace"):
            raise ValueError(f"image_condition_type={self.image_condition_type!r}: "
                             "expected latent_concat or token_replace")

    @property
    def token_replace(self) -> bool:
        return self.image_condition_type == "token_replace"

    def build_fields(self) -> dict[str, Any]:
        """1.0's latents have ``in_channels`` channels, and its blocks come as double then single ones."""
        return {**super().build_fields(), "in_channels": self.in_channels,
                "block_counts": {"double_blocks": self.num_layers, "single_blocks": self.num_single_layers}}


def example_inputs(cfg: HunyuanDiTConfig, batch: int, _grid: Sequence[int], text: int) -> tuple[None, dict, dict]:
    """``DitBuild.example_inputs``: the text context (hidden states, key mask, pooled CLIP vector) and, with
    ``guidance_embeds``, the embedded guidance scale."""
    context = {"hidden": ((batch, text, cfg.text_embed_dim), cfg.dtype), "mask": ((batch, text), "int32"),
               "pooled": ((batch, cfg.pooled_projection_dim), cfg.dtype)}
    return None, context, ({"guidance": ((batch,), "float32")} if cfg.guidance_embeds else {})


def rope_tables(cfg: HunyuanDiTConfig, grid: Sequence[int]) -> tuple[jax.Array, jax.Array]:
    """cos/sin (S, head_dim / 2) of the video token grid (angles in float64 on the host, as the reference)."""
    return rope_lib.cos_sin(rope_lib.grid_angles(list(grid), cfg.rope_axes_dim, cfg.rope_theta))


def _select(first: jax.Array | None, tr: jax.Array | None, base: jax.Array) -> jax.Array:
    """Per-sample modulation (B, D); with token replace the first-frame tokens (``first`` (S,) bool) take ``tr``."""
    if first is None or tr is None:
        return base
    return jnp.where(first[None, :, None], tr[:, None, :], base[:, None, :])


# --------------------------------------------------------------------------------------------------------------
# Token refiner (text only, short sequence)
# --------------------------------------------------------------------------------------------------------------


class RefinerBlock(nnx.Module):
    """Pre-norm self-attention + SiLU MLP over the text, both gated per sample (diffusers
    ``HunyuanVideoIndividualTokenRefinerBlock``)."""

    def __init__(self, cfg: HunyuanDiTConfig, *, rngs: nnx.Rngs):
        dim, dt = cfg.dim, cfg.dtype
        self.heads, self.dtype = cfg.num_attention_heads, dt
        self.norm1 = LayerNorm(dim, (EMBED,), eps=EPS)
        self.to_q = Linear(dim, dim, (EMBED, HEADS), dtype=dt, rngs=rngs)
        self.to_k = Linear(dim, dim, (EMBED, HEADS), dtype=dt, rngs=rngs)
        self.to_v = Linear(dim, dim, (EMBED, HEADS), dtype=dt, rngs=rngs)
        self.to_out = Linear(dim, dim, (HEADS, EMBED), dtype=dt, rngs=rngs)
        self.norm2 = LayerNorm(dim, (EMBED,), eps=EPS)
        mlp = 4 * dim  # the reference's refiner keeps mlp_ratio 4 whatever the config says
        self.ff_in = Linear(dim, mlp, (EMBED, MLP), dtype=dt, rngs=rngs)
        self.ff_out = Linear(mlp, dim, (MLP, EMBED), dtype=dt, rngs=rngs)
        self.ada = Linear(dim, 2 * dim, (None, EMBED), dtype=dt, rngs=rngs, fp32_out=True)

    def __call__(self, x: jax.Array, temb: jax.Array, kv_mask: jax.Array) -> jax.Array:
        dt = self.dtype
        h = self.norm1(x).astype(dt)
        q, k, v = (split_heads(constrain(p(h), (BATCH, None, HEADS)), self.heads)
                   for p in (self.to_q, self.to_k, self.to_v))
        o = ulysses.replicated_attention(q, k, v, kv_mask=kv_mask)  # a TP program: heads over tp
        a = constrain(self.to_out(o.reshape(*x.shape[:2], -1)), (BATCH, None, EMBED))
        g_msa, g_mlp = jnp.split(self.ada(jax.nn.silu(temb.astype(jnp.float32))), 2, axis=-1)
        x = x + gate(a, g_msa)
        f = self.ff_out(constrain(jax.nn.silu(self.ff_in(self.norm2(x).astype(dt))), (BATCH, None, MLP)))
        return x + gate(constrain(f, (BATCH, None, EMBED)), g_mlp)


class TokenRefiner(nnx.Module):
    """diffusers ``HunyuanVideoTokenRefiner``: masked mean + timestep -> per-sample embedding, input projection,
    refiner blocks. ``mask`` (B, L) is the text attention mask (nonzero = valid).

    ``first_key_visible``: HunyuanVideo 1.0 lets every query see key 0 even when it is padding; 1.5's refiner
    masks padded keys only (its padded rows are discarded by the caller)."""

    def __init__(self, cfg: HunyuanDiTConfig, *, rngs: nnx.Rngs, first_key_visible: bool = True):
        dim = cfg.dim
        self.dtype = cfg.dtype
        self.first_key_visible = first_key_visible
        self.timestep_embedder = TimestepEmbedding(256, dim, rngs=rngs)
        self.text_embedder = TimestepEmbedding(cfg.text_embed_dim, dim, rngs=rngs)
        self.proj_in = Linear(cfg.text_embed_dim, dim, (None, EMBED), dtype=cfg.dtype, rngs=rngs)
        self.blocks = nnx.List([RefinerBlock(cfg, rngs=rngs) for _ in range(cfg.num_refiner_layers)])

    def __call__(self, text: jax.Array, timestep: jax.Array, mask: jax.Array) -> jax.Array:
        m = mask.astype(jnp.float32)[..., None]
        pooled = (text.astype(jnp.float32) * m).sum(1) / m.sum(1)
        t = timestep_embedding(timestep, 256, flip_sin_to_cos=True, downscale_freq_shift=0)
        temb = self.timestep_embedder(t) + self.text_embedder(pooled)
        x = self.proj_in(text.astype(self.dtype)).astype(jnp.float32)
        kv_mask = mask != 0
        if self.first_key_visible:
            kv_mask = kv_mask | (jnp.arange(mask.shape[1]) == 0)[None]
        for block in self.blocks:
            x = block(x, temb, kv_mask)
        return x


# --------------------------------------------------------------------------------------------------------------
# Attention projections of one stream
# --------------------------------------------------------------------------------------------------------------


class QKV(nnx.Module):
    """q/k/v projections and per-head RMS norms of q and k for one stream."""

    def __init__(self, cfg: HunyuanDiTConfig, *, rngs: nnx.Rngs):
        dim, dt = cfg.dim, cfg.dtype
        self.heads = cfg.num_attention_heads
        self.q = Linear(dim, dim, (EMBED, HEADS), dtype=dt, rngs=rngs)
        self.k = Linear(dim, dim, (EMBED, HEADS), dtype=dt, rngs=rngs)
        self.v = Linear(dim, dim, (EMBED, HEADS), dtype=dt, rngs=rngs)
        self.norm_q = RMSNorm(cfg.attention_head_dim, eps=EPS)
        self.norm_k = RMSNorm(cfg.attention_head_dim, eps=EPS)

    def __call__(self, x: jax.Array, seq: str | None, rope: tuple[jax.Array, jax.Array] | None = None):
        names = (BATCH, seq, HEADS)
        q = project_heads(self.q, self.norm_q, x, names, self.heads)
        k = project_heads(self.k, self.norm_k, x, names, self.heads)
        v = project_heads(self.v, None, x, names, self.heads)
        if rope is not None:
            q, k = rotate(q, rope), rotate(k, rope)
        return q, k, v


def _mask_lengths(txt_mask: jax.Array) -> jax.Array:
    """The reference keeps the first ``sum(mask)`` text tokens as keys of the joint attention."""
    n = jnp.sum(txt_mask != 0, axis=1)
    return jnp.arange(txt_mask.shape[1])[None, :] < n[:, None]


# --------------------------------------------------------------------------------------------------------------
# Double- and single-stream blocks
# --------------------------------------------------------------------------------------------------------------


class DoubleBlock(nnx.Module):
    """diffusers ``HunyuanVideoTransformerBlock`` (and its token-replace twin: same weights)."""

    def __init__(self, cfg: HunyuanDiTConfig, *, rngs: nnx.Rngs):
        dim, dt = cfg.dim, cfg.dtype
        self.dtype = dt
        self.norm1 = Modulation(dim, 6, dtype=dt, rngs=rngs)
        self.norm1_context = Modulation(dim, 6, dtype=dt, rngs=rngs)
        self.img = QKV(cfg, rngs=rngs)
        self.txt = QKV(cfg, rngs=rngs)
        self.img_out = Linear(dim, dim, (HEADS, EMBED), dtype=dt, rngs=rngs)
        self.txt_out = Linear(dim, dim, (HEADS, EMBED), dtype=dt, rngs=rngs)
        self.ff = FeedForward(dim, cfg.mlp_dim, dtype=dt, rngs=rngs, activation="gelu-approximate")
        self.ff_context = FeedForward(dim, cfg.mlp_dim, dtype=dt, rngs=rngs, activation="gelu-approximate")

    def __call__(self, carry, aux):
        vid, txt = carry
        dt = self.dtype
        vid = constrain(vid, (BATCH, SEQ, EMBED))
        temb, first = aux["temb"], aux.get("first")
        mods = self.norm1(temb)
        if first is not None:
            mods = [_select(first, t, m) for t, m in zip(self.norm1(aux["tr_emb"]), mods)]
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = mods
        c_shift_msa, c_scale_msa, c_gate_msa, c_shift_mlp, c_scale_mlp, c_gate_mlp = self.norm1_context(temb)
        h_vid = modulate(layer_norm(vid, EPS), shift_msa, scale_msa).astype(dt)
        h_txt = modulate(layer_norm(txt, EPS), c_shift_msa, c_scale_msa).astype(dt)

        vq = self.img(h_vid, SEQ, aux["rope"])
        tq = self.txt(h_txt, None)
        o_txt, o_vid = ulysses.joint_attention(tq, vq, txt_mask=aux["txt_mask"])
        a_vid = constrain(self.img_out(o_vid.reshape(*vid.shape[:2], -1)), (BATCH, SEQ, EMBED))
        a_txt = constrain(self.txt_out(o_txt.reshape(*txt.shape[:2], -1)), (BATCH, None, EMBED))
        vid = vid + gate(a_vid, gate_msa)
        txt = txt + gate(a_txt, c_gate_msa)

        f_vid = self.ff(modulate(layer_norm(vid, EPS), shift_mlp, scale_mlp).astype(dt), SEQ)
        f_txt = self.ff_context(modulate(layer_norm(txt, EPS), c_shift_mlp, c_scale_mlp).astype(dt), None)
        vid = vid + gate(f_vid, gate_mlp)
        txt = txt + gate(f_txt, c_gate_mlp)
        return constrain(vid, (BATCH, SEQ, EMBED)), txt


class SingleBlock(nnx.Module):
    """diffusers ``HunyuanVideoSingleTransformerBlock``: one modulation, attention and MLP in parallel from the
    same normed input, one output projection over [attention; MLP] (stored as two row blocks so both halves stay
    tensor-parallel), applied to the video and text streams with shared weights."""

    def __init__(self, cfg: HunyuanDiTConfig, *, rngs: nnx.Rngs):
        dim, dt = cfg.dim, cfg.dtype
        self.dtype = dt
        self.norm = Modulation(dim, 3, dtype=dt, rngs=rngs)
        self.qkv = QKV(cfg, rngs=rngs)
        self.proj_mlp = Linear(dim, cfg.mlp_dim, (EMBED, MLP), dtype=dt, rngs=rngs)
        self.out_attn = Linear(dim, dim, (HEADS, EMBED), dtype=dt, rngs=rngs, bias=False, fp32_out=True)
        self.out_mlp = Linear(cfg.mlp_dim, dim, (MLP, EMBED), dtype=dt, rngs=rngs, fp32_out=True)

    def __call__(self, carry, aux):
        vid, txt = carry
        dt = self.dtype
        vid = constrain(vid, (BATCH, SEQ, EMBED))
        temb, first = aux["temb"], aux.get("first")
        shift, scale, g = self.norm(temb)
        v_shift, v_scale, v_gate = shift, scale, g
        if first is not None:
            v_shift, v_scale, v_gate = (_select(first, t, m)
                                        for t, m in zip(self.norm(aux["tr_emb"]), (shift, scale, g)))
        h_vid = modulate(layer_norm(vid, EPS), v_shift, v_scale).astype(dt)
        h_txt = modulate(layer_norm(txt, EPS), shift, scale).astype(dt)
        o_txt, o_vid = ulysses.joint_attention(self.qkv(h_txt, None), self.qkv(h_vid, SEQ, aux["rope"]),
                                               txt_mask=aux["txt_mask"])

        def out(h, o, seq):
            m = constrain(jax.nn.gelu(self.proj_mlp(h), approximate=True), (BATCH, seq, MLP))
            y = self.out_attn(o.reshape(*h.shape[:2], -1).astype(dt)) + self.out_mlp(m)
            return constrain(y, (BATCH, seq, EMBED))

        vid = vid + gate(out(h_vid, o_vid, SEQ), v_gate)
        txt = txt + gate(out(h_txt, o_txt, None), g)
        return constrain(vid, (BATCH, SEQ, EMBED)), txt


def embed_patches(model: nnx.Module, latents: jax.Array) -> tuple[jax.Array, tuple[int, int, int]]:
    """The conv3d patch embedding (stride == kernel) of ``model.patch_kernel`` / ``patch_bias``: latents
    (B, C, F, H, W) -> float32 video tokens (B, S, dim) in (f, h, w) order, and the token grid."""
    cfg = model.cfg
    _, c, f, hh, ww = latents.shape
    if c != cfg.in_channels:
        raise ValueError(f"latents have {c} channels but the HunyuanVideo DiT config has in_channels={cfg.in_channels}")
    pt, ph, pw = cfg.patch
    if f % pt or hh % ph or ww % pw:
        raise ValueError(f"latent shape {(f, hh, ww)} is not divisible by the patch size {cfg.patch}")
    p, _ = patchify(latents, cfg.patch, order="thwc")
    k = model.patch_kernel[...]
    vid = jnp.matmul(p.astype(k.dtype), k.reshape(-1, k.shape[-1]), preferred_element_type=jnp.float32)
    return constrain(vid + model.patch_bias[...].astype(jnp.float32),
                     (BATCH, SEQ, EMBED)), (f // pt, hh // ph, ww // pw)


def output_head(model: nnx.Module, vid: jax.Array, temb: jax.Array, latent_shape: Sequence[int]) -> jax.Array:
    """``model.norm_out`` (AdaLN-continuous on ``temb``) and ``proj_out``, unpatchified in (c, t, h, w) order to
    float32 (B, out_C, F, H, W)."""
    cfg = model.cfg
    pt, ph, pw = cfg.patch
    f, hh, ww = latent_shape[-3:]
    y = model.proj_out(model.norm_out(vid, temb).astype(cfg.dtype)).astype(jnp.float32)
    return unpatchify(y, (f // pt, hh // ph, ww // pw), cfg.patch, order="cthw")


class HunyuanStack:
    """What the 1.0 and 1.5 DiTs share around their stacked block groups (the carry is (video, conditioning)):
    one group's slice, the output head, and the resident run of ``pre`` -> every group -> ``post`` (the offload
    executor streams the same groups)."""

    family: ClassVar[str] = "HunyuanVideo"
    block_groups: ClassVar[tuple[str, ...]] = ()

    def init_patch_embed(self, cfg: HunyuanDims, rngs: nnx.Rngs) -> None:
        """The conv3d patch embedding (kernel == stride) as a (pt, ph, pw, C, D) kernel and a bias."""
        init = nnx.initializers.lecun_normal(in_axis=(0, 1, 2, 3), out_axis=4)
        self.patch_kernel = param(init(rngs.params(), (*cfg.patch, cfg.in_channels, cfg.dim), cfg.dtype),
                                  (None, None, None, None, EMBED))
        self.patch_bias = param(jnp.zeros((cfg.dim,), cfg.dtype), (EMBED,))

    def init_output_head(self, cfg: HunyuanDims, rngs: nnx.Rngs) -> None:
        """AdaLN-continuous (scale, shift) and the projection back to patch pixels (see :func:`output_head`)."""
        dim, dt = cfg.dim, cfg.dtype
        self.norm_out = AdaLayerNormContinuous(dim, dim, eps=EPS, affine=False, dtype=dt, rngs=rngs)
        self.proj_out = Linear(dim, cfg.out_channels * math.prod(cfg.patch), (EMBED, None), dtype=dt, rngs=rngs)

    @classmethod
    def run_block_group(cls, name: str, graphdef: nnx.GraphDef, state: nnx.State, x, aux: dict):
        """Run any slice of one of ``block_groups``."""
        if name not in cls.block_groups:
            raise KeyError(f"{cls.family} has no block group {name!r}")
        return scan_blocks(graphdef, state, x, aux)

    def post(self, x, aux: dict, latent_shape: Sequence[int]) -> jax.Array:
        return output_head(self, x[0], aux["temb"], latent_shape)

    def run(self, latents: jax.Array, *inputs: Any) -> jax.Array:
        x, aux = self.pre(latents, *inputs)
        for name in self.block_groups:
            graphdef, state = nnx.split(getattr(self, name))
            x = self.run_block_group(name, graphdef, state, x, aux)
        return self.post(x, aux, latents.shape)


# --------------------------------------------------------------------------------------------------------------
# Full model
# --------------------------------------------------------------------------------------------------------------


class HunyuanDiT(HunyuanStack, nnx.Module):
    """``__call__(latents, timestep, context, guidance=None)``: latents (B, C, F, H, W); timestep (B,); context a
    dict ``{"hidden": (B, L, text_embed_dim), "mask": (B, L), "pooled": (B, pooled_projection_dim)}``; guidance
    (B,) the embedded guidance value the reference feeds (``guidance_scale * 1000``). Returns (B, out_C, F, H, W)
    float32."""

    block_groups = ("double_blocks", "single_blocks")

    def teacache_modulated(self, vid: jax.Array, aux: dict) -> jax.Array:
        """TeaCache4HunyuanVideo's signal, float32 (B, S, dim): the first double block's normed, modulated video
        input ``layer_norm(vid) * (1 + scale_msa) + shift_msa`` (token replace selecting per token, as the block)."""
        gdef, st = nnx.split(self.double_blocks)
        block = nnx.merge(gdef, jax.tree.map(lambda a: a[0], st))
        mods = block.norm1(aux["temb"])
        first = aux.get("first")
        if first is not None:
            mods = [_select(first, t, m) for t, m in zip(block.norm1(aux["tr_emb"]), mods)]
        return modulate(layer_norm(vid, EPS), mods[0], mods[1])

    def __init__(self, cfg: HunyuanDiTConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        dim = cfg.dim
        self.init_patch_embed(cfg, rngs)
        self.refiner = TokenRefiner(cfg, rngs=rngs)
        self.timestep_embedder = TimestepEmbedding(256, dim, rngs=rngs)
        self.text_embedder = TimestepEmbedding(cfg.pooled_projection_dim, dim, rngs=rngs)
        self.guidance_embedder = TimestepEmbedding(256, dim, rngs=rngs) if cfg.guidance_embeds else None
        self.double_blocks = stacked(lambda r: DoubleBlock(cfg, rngs=r), cfg.num_layers, rngs)
        self.single_blocks = stacked(lambda r: SingleBlock(cfg, rngs=r), cfg.num_single_layers, rngs)
        self.init_output_head(cfg, rngs)

    # -- staged forward: pre -> double_blocks -> single_blocks -> post -----------------------------------------

    def pre(self, latents: jax.Array, timestep: jax.Array, context: Mapping[str, jax.Array],
            guidance: jax.Array | None = None) -> tuple[tuple[jax.Array, jax.Array], dict]:
        cfg = self.cfg
        b = latents.shape[0]
        vid, grid = embed_patches(self, latents)
        timestep = jnp.broadcast_to(jnp.asarray(timestep, jnp.float32).reshape(-1), (b,))

        def sin(t):
            return timestep_embedding(t, 256, flip_sin_to_cos=True, downscale_freq_shift=0)

        pooled = self.text_embedder(context["pooled"].astype(jnp.float32))
        temb = self.timestep_embedder(sin(timestep)) + pooled
        if self.guidance_embedder is not None:
            if guidance is None:
                raise ValueError("this HunyuanVideo DiT embeds the guidance scale (guidance_embeds): pass guidance=")
            g = jnp.broadcast_to(jnp.asarray(guidance, jnp.float32).reshape(-1), (b,))
            temb = temb + self.guidance_embedder(sin(g))
        aux: dict[str, Any] = {"temb": temb}
        if cfg.token_replace:
            aux["tr_emb"] = self.timestep_embedder(sin(jnp.zeros_like(timestep))) + pooled
            n_first = grid[1] * grid[2]
            aux["first"] = constrain(jnp.arange(grid[0] * n_first) < n_first, (SEQ,))
        mask = context["mask"]
        txt = self.refiner(context["hidden"], timestep, mask)
        aux["txt_mask"] = _mask_lengths(mask)
        cos, sin_ = rope_tables(cfg, grid)
        aux["rope"] = (constrain(cos, (SEQ, None)), constrain(sin_, (SEQ, None)))
        return (vid, constrain(txt, (BATCH, None, EMBED))), aux

    def __call__(self, latents: jax.Array, timestep: jax.Array, context: Mapping[str, jax.Array],
                 guidance: jax.Array | None = None) -> jax.Array:
        return self.run(latents, timestep, context, guidance)
