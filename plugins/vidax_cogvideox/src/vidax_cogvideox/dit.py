"""CogVideoX diffusion transformer (diffusers ``CogVideoXTransformer3DModel``, 1.0 and 1.5) in Flax NNX.

Numerics follow the diffusers reference:

* latents are (B, F, C, H, W) (the pipelines' layout); patches (1.0: p x p per frame; 1.5: p_t x p x p) are
  flattened channel-first and projected to the width ``dim = heads * head_dim``; T5 states go through
  ``text_proj``;
* positions: 2B adds a fixed 3-D sin-cos table to the video tokens; 5B / 1.5 rotate q and k of the video tokens
  (3-D RoPE, interleaved pairs); 5B-I2V adds its learned table to [text; video] at its training size;
* the timestep (B,) -> sinusoid (width ``dim``, cos first) -> MLP -> ``emb`` (B, time_embed_dim); 1.5-I2V adds
  the same construction of its ``ofs`` value;
* each block: "expert" AdaLN — one Linear(silu(emb)) gives separate shift/scale/gate for the video and the text
  tokens over a shared LayerNorm — then ONE self-attention over [text; video] (per-head LayerNorm on q/k) and one
  gelu(tanh) FFN applied to both streams, each stream gated by its own gates;
* the head: LayerNorm, AdaLN (shift, scale from ``emb``), Linear back to the patch;
* norms, modulation and residual adds run in float32.

The blocks live in ONE parameter tree stacked on a leading ``layers`` axis, run by ``lax.scan``; the carry is the
pair (text, video) so that under sequence parallelism the video tokens stay sharded over ``sp`` and the text
tokens replicated (Ulysses joint attention).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.attention import ulysses as sequence_parallel
from vidax_core.io.arch_base import TransformerConfig
from vidax_core.nn import rope as rope_lib
from vidax_core.nn.adaln import gate, modulate
from vidax_core.nn.attention_block import Attention
from vidax_core.nn.feedforward import FeedForward
from vidax_core.nn.layers import Linear, param, scan_blocks, stacked
from vidax_core.nn.norms import LayerNorm
from vidax_core.nn.patchify import patchify, unpatchify
from vidax_core.nn.timestep import TimestepEmbedding, timestep_embedding
from vidax_core.parallel.sharding import constrain

from . import positions

EMBED = "embed"
BATCH, SEQ = "batch", "seq"
ORDER = "cthw"  # patch features channel-first (the 1.0 conv kernel and the 1.5 linear both flatten this way)


@dataclasses.dataclass(frozen=True)
class CogVideoXDiTConfig(TransformerConfig):
    """Field names match diffusers' ``config.json`` for ``CogVideoXTransformer3DModel``; ``dtype`` is the weight
    dtype."""

    num_attention_heads: int = 30
    attention_head_dim: int = 64
    in_channels: int = 16
    out_channels: int | None = 16
    flip_sin_to_cos: bool = True
    freq_shift: int = 0
    time_embed_dim: int = 512
    ofs_embed_dim: int | None = None
    text_embed_dim: int = 4096
    num_layers: int = 30
    dropout: float = 0.0
    attention_bias: bool = True
    sample_width: int = 90
    sample_height: int = 60
    sample_frames: int = 49
    patch_size: int = 2
    patch_size_t: int | None = None
    temporal_compression_ratio: int = 4
    max_text_seq_length: int = 226
    activation_fn: str = "gelu-approximate"
    timestep_activation_fn: str = "silu"
    norm_elementwise_affine: bool = True
    norm_eps: float = 1e-5
    spatial_interpolation_scale: float = 1.875
    temporal_interpolation_scale: float = 1.0
    use_rotary_positional_embeddings: bool = False
    use_learned_positional_embeddings: bool = False
    patch_bias: bool = True
    dtype: Any = jnp.float32
    residual_dtype: Any = jnp.float32

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require("CogVideoX", activation_fn="gelu-approximate", timestep_activation_fn="silu",
                     norm_elementwise_affine=True)
        if self.use_learned_positional_embeddings and not self.use_rotary_positional_embeddings:
            raise ValueError("learned positional embeddings without rotary embeddings is not a CogVideoX configuration")

    @property
    def patch(self) -> tuple[int, int, int]:
        return (self.patch_size_t or 1, self.patch_size, self.patch_size)

    def build_fields(self) -> dict[str, Any]:
        """What the denoiser build reads of this architecture: latents frames-first, (B, F, C, H, W), as the
        pipelines hold them."""
        c = self.out_channels
        return {"in_channels": c, "heads": self.num_attention_heads, "patch_size": self.patch,
                "block_counts": {"blocks": self.num_layers},
                "latent_shapes": lambda batch, grid: (batch, grid[0], c, *grid[1:])}

    def learned_tokens(self) -> int:
        """Length of 5B-I2V's learned [text; video] table (its training grid)."""
        p = self.patch_size
        frames = (self.sample_frames - 1) // self.temporal_compression_ratio + 1
        return self.max_text_seq_length + frames * (self.sample_height // p) * (self.sample_width // p)


class ExpertAdaLN(nnx.Module):
    """diffusers ``CogVideoXLayerNormZero``: ``linear(silu(emb))`` -> shift, scale, gate for the video tokens and
    the same three for the text tokens; one affine LayerNorm serves both streams."""

    def __init__(self, cfg: CogVideoXDiTConfig, *, rngs: nnx.Rngs):
        self.linear = Linear(cfg.time_embed_dim, 6 * cfg.dim, (None, EMBED), dtype=cfg.dtype, rngs=rngs,
                             fp32_out=True)
        self.norm = LayerNorm(cfg.dim, (EMBED,), eps=cfg.norm_eps)

    def __call__(self, txt: jax.Array, vid: jax.Array, emb: jax.Array):
        shift, scale, g, t_shift, t_scale, t_g = jnp.split(self.linear(jax.nn.silu(emb)), 6, axis=-1)
        return (modulate(self.norm(txt), t_shift, t_scale), modulate(self.norm(vid), shift, scale), t_g, g)


def joint_attention(attn: Attention, txt: jax.Array, vid: jax.Array, rope: tuple[jax.Array, jax.Array] | None):
    """ONE self-attention over [text; video] with shared projections and RoPE on the video tokens only: the text
    stays replicated, the video sequence-sharded (Ulysses joint attention); returns both streams' ``to_out``."""
    ot, ov = sequence_parallel.joint_attention(attn.qkv(txt, None), attn.qkv(vid, SEQ, rope))
    return attn.out(ot, None), attn.out(ov, SEQ)


class CogVideoXBlock(nnx.Module):
    """One block (diffusers ``CogVideoXBlock``) on the carry (text, video)."""

    def __init__(self, cfg: CogVideoXDiTConfig, *, rngs: nnx.Rngs):
        self.compute_dtype = cfg.dtype
        self.norm1 = ExpertAdaLN(cfg, rngs=rngs)
        # per-head affine LayerNorm (eps 1e-6) on q and k; to_out always has a bias
        self.attn1 = Attention(cfg.dim, cfg.num_attention_heads, dtype=cfg.dtype, rngs=rngs, bias=cfg.attention_bias,
                               out_bias=True, qk_norm="layer_norm", qk_eps=1e-6)
        self.norm2 = ExpertAdaLN(cfg, rngs=rngs)
        self.ff = FeedForward(cfg.dim, 4 * cfg.dim, dtype=cfg.dtype, rngs=rngs, activation="gelu-approximate")

    def __call__(self, carry: tuple[jax.Array, jax.Array], emb: jax.Array,
                 rope: tuple[jax.Array, jax.Array] | None) -> tuple[jax.Array, jax.Array]:
        txt, vid = carry
        dt, rt = self.compute_dtype, vid.dtype
        txt, vid = constrain(txt, (BATCH, None, EMBED)), constrain(vid, (BATCH, SEQ, EMBED))
        nt, nv, gt, gv = self.norm1(txt, vid, emb)
        at, av = joint_attention(self.attn1, nt.astype(dt), nv.astype(dt), rope)
        vid = (vid.astype(jnp.float32) + gate(av, gv)).astype(rt)
        txt = (txt.astype(jnp.float32) + gate(at, gt)).astype(rt)
        nt, nv, gt, gv = self.norm2(txt, vid, emb)
        vid = (vid.astype(jnp.float32) + gate(self.ff(nv.astype(dt), SEQ), gv)).astype(rt)
        txt = (txt.astype(jnp.float32) + gate(self.ff(nt.astype(dt), None), gt)).astype(rt)
        return constrain(txt, (BATCH, None, EMBED)), constrain(vid, (BATCH, SEQ, EMBED))


def run_blocks(graphdef: nnx.GraphDef, state: nnx.State, x: tuple[jax.Array, jax.Array], emb: jax.Array,
               rope: tuple[jax.Array, jax.Array] | None) -> tuple[jax.Array, jax.Array]:
    """Run any slice of the stacked blocks with ``lax.scan``."""
    return scan_blocks(graphdef, state, x, emb, rope)


class CogVideoXDiT(nnx.Module):
    """The CogVideoX DiT::

        model(latents, timestep, context, ofs=None) -> (B, F, out_channels, H, W) float32

    ``latents`` (B, F, C, H, W) (F a multiple of ``patch_size_t`` for 1.5); ``timestep`` (B,) model units;
    ``context`` (B, L, text_embed_dim) T5 states (no mask: CogVideoX attends to the padding too); ``ofs`` (B,) for
    1.5-I2V (the pipeline passes 2.0).
    """

    block_groups = ("blocks",)

    def __init__(self, cfg: CogVideoXDiTConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        dim, dt = cfg.dim, cfg.dtype
        pt, ph, pw = cfg.patch
        # patch_bias applies to 1.0's conv only: the reference's 1.5 Linear always has a bias
        self.patch_proj = Linear(cfg.in_channels * pt * ph * pw, dim, (None, EMBED), dtype=dt, rngs=rngs,
                                 bias=cfg.patch_bias or cfg.patch_size_t is not None)
        self.text_proj = Linear(cfg.text_embed_dim, dim, (None, EMBED), dtype=dt, rngs=rngs)
        self.pos_embedding = (param(jnp.zeros((1, cfg.learned_tokens(), dim), jnp.float32), (None, None, EMBED))
                              if cfg.use_learned_positional_embeddings else None)
        self.time_embedding = TimestepEmbedding(dim, cfg.time_embed_dim, dtype=dt, rngs=rngs)
        self.ofs_embedding = (TimestepEmbedding(cfg.ofs_embed_dim, cfg.ofs_embed_dim, dtype=dt, rngs=rngs)
                              if cfg.ofs_embed_dim else None)
        self.blocks = stacked(lambda r: CogVideoXBlock(cfg, rngs=r), cfg.num_layers, rngs)
        self.norm_final = LayerNorm(dim, (EMBED,), eps=cfg.norm_eps)
        self.norm_out_linear = Linear(cfg.time_embed_dim, 2 * dim, (None, EMBED), dtype=dt, rngs=rngs, fp32_out=True)
        self.norm_out = LayerNorm(dim, (EMBED,), eps=cfg.norm_eps)
        self.proj_out = Linear(dim, cfg.out_channels * pt * ph * pw, (EMBED, None), dtype=dt, rngs=rngs)

    def _embed(self, value: jax.Array, width: int) -> jax.Array:
        cfg = self.cfg
        return timestep_embedding(value, width, flip_sin_to_cos=cfg.flip_sin_to_cos,
                                  downscale_freq_shift=cfg.freq_shift)

    def _rope(self, grid: tuple[int, int, int]) -> tuple[jax.Array, jax.Array] | None:
        cfg = self.cfg
        if not cfg.use_rotary_positional_embeddings:
            return None
        p = cfg.patch_size
        ang = positions.rope_angles(cfg.attention_head_dim, grid, (cfg.sample_height // p, cfg.sample_width // p),
                                    sliced=cfg.patch_size_t is not None)
        cos, sin = rope_lib.cos_sin(ang[None, :, None, :])
        names = (None, SEQ, None, None)
        return constrain(cos, names), constrain(sin, names)

    def _positions(self, txt: jax.Array, vid: jax.Array, grid: tuple[int, int, int]):
        """Add the absolute position embedding the reference adds (none with RoPE, except 5B-I2V's learned one)."""
        cfg = self.cfg
        f, h, w = grid
        p = cfg.patch_size
        if cfg.use_learned_positional_embeddings:
            if (h * p, w * p) != (cfg.sample_height, cfg.sample_width):
                raise ValueError(f"latent size {h * p}x{w * p} differs from the learned position table's "
                                 f"{cfg.sample_height}x{cfg.sample_width} (CogVideoX-5B-I2V runs only at 720x480)")
            frames = (f - 1) * cfg.temporal_compression_ratio + 1
            if frames == cfg.sample_frames and txt.shape[1] == cfg.max_text_seq_length:
                table = self.pos_embedding[...].astype(jnp.float32)
                n = txt.shape[1]
                return txt + table[:, :n].astype(txt.dtype), vid + constrain(table[:, n:], (None, SEQ, EMBED))
        elif cfg.use_rotary_positional_embeddings:
            return txt, vid
        table = positions.sincos_3d(cfg.dim, grid, cfg.spatial_interpolation_scale, cfg.temporal_interpolation_scale)
        table = constrain(jnp.asarray(table.astype(np.float32))[None], (None, SEQ, EMBED))
        return txt, vid + table.astype(vid.dtype)

    def pre(self, latents: jax.Array, timestep: jax.Array, context: Any, ofs: jax.Array | None = None):
        cfg = self.cfg
        dt, rt = cfg.dtype, cfg.residual_dtype
        b, _, c, _, _ = latents.shape
        if c != cfg.in_channels:
            raise ValueError(f"latents have {c} channels, the CogVideoX DiT config has in_channels={cfg.in_channels}")
        hidden = context["hidden"] if isinstance(context, Mapping) else context
        tokens, grid = patchify(latents, cfg.patch, order=ORDER, layout="fchw")
        vid = self.patch_proj(constrain(tokens, (BATCH, SEQ, None)).astype(dt)).astype(jnp.float32)
        txt = self.text_proj(hidden.astype(dt)).astype(jnp.float32)
        txt, vid = self._positions(txt, vid, grid)
        t = jnp.broadcast_to(jnp.asarray(timestep, jnp.float32).reshape(-1), (b,))
        emb = self.time_embedding(self._embed(t, cfg.dim))
        if self.ofs_embedding is not None:
            if ofs is None:
                raise ValueError("this CogVideoX DiT has an ofs embedding (1.5-I2V): pass ofs")
            o = jnp.broadcast_to(jnp.asarray(ofs, jnp.float32).reshape(-1), (b,))
            emb = emb + self.ofs_embedding(self._embed(o, cfg.ofs_embed_dim))
        x = (constrain(txt.astype(rt), (BATCH, None, EMBED)), constrain(vid.astype(rt), (BATCH, SEQ, EMBED)))
        return x, {"emb": emb, "rope": self._rope(grid)}

    def teacache_signal(self, timestep: jax.Array, use_ret_steps: bool) -> jax.Array:
        """TeaCache4CogVideoX1.5's modulated input for (B,) timesteps, in float32: the time embedding ``emb``
        (B, time_embed_dim), with 1.5-I2V's ofs embedding of the pipeline's constant ofs added. The reference has
        one mode (the first and last steps computed); the plan refuses ``use_ret_steps: true`` before this runs."""
        from vidax_cogvideox.conditioning import OFS

        cfg = self.cfg
        del use_ret_steps
        emb = self.time_embedding(self._embed(timestep.astype(jnp.float32), cfg.dim))
        if self.ofs_embedding is not None:
            o = jnp.full(timestep.shape, OFS, jnp.float32)
            emb = emb + self.ofs_embedding(self._embed(o, cfg.ofs_embed_dim))
        return emb.astype(jnp.float32)

    @staticmethod
    def run_block_group(name: str, graphdef: nnx.GraphDef, state: nnx.State, x: Any, aux: dict) -> Any:
        if name != "blocks":
            raise KeyError(f"CogVideoX has no block group {name!r}")
        return run_blocks(graphdef, state, x, aux["emb"], aux["rope"])

    def post(self, x: Any, aux: dict, latent_shape: Sequence[int]) -> jax.Array:
        """The video tokens through the AdaLN head, back to the latents' (B, F, C, H, W) layout."""
        cfg = self.cfg
        _, vid = x
        emb = aux["emb"]
        shift, scale = jnp.split(self.norm_out_linear(jax.nn.silu(emb)), 2, axis=-1)
        h = modulate(self.norm_out(self.norm_final(vid)), shift, scale).astype(cfg.dtype)
        out = constrain(self.proj_out(h).astype(jnp.float32), (BATCH, SEQ, None))
        _, f, _, hh, ww = latent_shape
        pt, ph, pw = cfg.patch
        return unpatchify(out, (f // pt, hh // ph, ww // pw), cfg.patch, order=ORDER, layout="fchw")

    def __call__(self, latents: jax.Array, timestep: jax.Array, context: Any, ofs: jax.Array | None = None
                 ) -> jax.Array:
        x, aux = self.pre(latents, timestep, context, ofs)
        graphdef, state = nnx.split(self.blocks)
        x = self.run_block_group("blocks", graphdef, state, x, aux)
        return self.post(x, aux, latents.shape)
