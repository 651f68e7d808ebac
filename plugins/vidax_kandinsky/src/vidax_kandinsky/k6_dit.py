"""The Kandinsky 6 video+audio diffusion transformer (diffusers ``Kandinsky6Transformer3DModel``) in Flax NNX.

Two streams are denoised together: the channel-last video latents ``(B, T, H, W, C_in)`` and the audio latents
``(B, L, in_audio_dim)``. Each stream has its own width (``model_dim`` / ``model_dim_a``), time embedding
(diffusers' sinusoid then an MLP, float32, plus the pooled CLIP text through Linear + LayerNorm) and text branch
(the Qwen2.5-VL states through Linear + LayerNorm and ``num_text_blocks`` encoder blocks with 1-D RoPE). Then
``num_visual_blocks`` fused blocks, each:

* per stream: modulated self-attention (video: 3-D RoPE over (frame, row, column) positions divided by the
  config's ``scale_factor``; audio: 1-D RoPE with frequencies times ``audio_freqs_scaling``), then the
  cross-attention of the modulated stream to its text branch;
* across streams (when both run): the video attends to the audio's cross-attention input and the audio to the
  video's, each from its own LayerNorm modulated by the ``va_modulation`` / ``av_modulation`` projections (of the
  other stream's time embedding unless ``fix_modulation``; with ``cross_gates`` the gate of each stream comes from
  the other's projection, split ``[dim, dim, other dim]``), with the streams' RoPE on both sides when ``ca_rope``;
* per stream: a modulated GELU feed-forward.

The heads unpatchify the video through a modulated LayerNorm and a Linear, and project the audio through a
modulated LayerNorm, a second plain LayerNorm (the reference's double norm) and a Linear. Norms, modulation and
the residual additions run in float32 and the residual streams are rounded to the parameter dtype after each
addition, as the reference's ``.float()`` / ``.to(x.dtype)`` do; q/k RMS norms use ``eps = finfo(float32).eps``.

Inputs of ``__call__``: ``latents`` the video array, or ``{"video": ..., "audio": ...}`` for both streams (the
pipeline's ``sample_audio``); ``timestep`` (B,) on the [0, 1000] scale, shared by both streams; ``context``
``{"hidden": (B, L, in_text_dim), "pooled": (B, in_text_dim2)}`` (unpadded prompts: the pipeline's padding mask
only hides padding, so an unpadded prompt is the same computation); ``frame_positions`` (B, T') the RoPE
frame index of each latent frame (default ``arange``; image-to-video gives its appended reference frame index 0)
and ``token_types`` (B, T') the per-frame token-type ids (``visual_token_type_ids``). The output mirrors the
latents: the video velocity (B, T, H, W, out_visual_dim) and the audio velocity (B, L, out_audio_dim), float32.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core import (Attention, CheckedConfig, FeedForward, Linear, TimestepEmbedding, constrain, layer_norm,
                        modulate, param, patchify, replicated_attention, scan_blocks, split_modulation, stacked,
                        timestep_embedding, unpatchify)

from . import dit as k5
from .dit import BATCH, EMBED, LN_EPS, MAX_PERIOD, QK_EPS, SEQ, AxesHeads
TEXT_MAX_POS = 2048  # Kandinsky6RoPE1D's table (text and audio positions)
VISUAL_MAX_POS = 128  # Kandinsky6RoPE3D's tables, per axis


@dataclasses.dataclass(frozen=True)
class Kandinsky6DiTConfig(AxesHeads, CheckedConfig):
    """The fields of diffusers' ``Kandinsky6Transformer3DModel`` config.json under their names (defaults are the
    reference's); ``dtype`` is the parameter dtype of the matmul weights."""

    in_visual_dim: int = 16
    out_visual_dim: int = 16
    in_text_dim: int = 3584
    in_text_dim2: int = 768
    time_dim: int = 1024
    patch_size: tuple[int, int, int] = (1, 2, 2)
    model_dim: int = 4096
    ff_dim: int = 16384
    num_text_blocks: int = 4
    num_visual_blocks: int = 60
    axes_dims: tuple[int, int, int] = (32, 48, 48)
    visual_cond: bool = True
    in_audio_dim: int = 20
    out_audio_dim: int = 20
    model_dim_a: int | None = None
    time_dim_a: int | None = None
    ff_dim_a: int | None = None
    axes_dims_a: tuple[int, int, int] | None = None
    audio_freqs_scaling: float = 1.0
    scale_factor: tuple[float, float, float] = (1.0, 2.0, 2.0)
    text_token_padding: bool = False  # metadata: the forward takes an optional mask either way
    ca_rope: bool = False
    cross_gates: bool = False
    fix_modulation: bool = False
    visual_token_type_num_embeddings: int = 0
    dtype: Any = jnp.float32

    label: ClassVar[str] = "transformer/config.json (Kandinsky 6)"

    # widths of the audio stream (the reference's ``or`` defaults)
    @property
    def dim_a(self) -> int:
        return self.model_dim_a or self.model_dim

    @property
    def tdim_a(self) -> int:
        return self.time_dim_a or self.time_dim

    @property
    def ff_a(self) -> int:
        return self.ff_dim_a or self.ff_dim

    @property
    def axes_a(self) -> tuple[int, int, int]:
        return tuple(self.axes_dims_a or self.axes_dims)

    @property
    def head_dim_a(self) -> int:
        return sum(self.axes_a)

    @property
    def heads_a(self) -> int:
        return self.dim_a // self.head_dim_a

    @property
    def in_channels(self) -> int:
        """The DiT's video input channels: the noise, then (``visual_cond``) the condition latent and its mask."""
        return 2 * self.in_visual_dim + 1 if self.visual_cond else self.in_visual_dim

    @property
    def n_grid(self) -> int:
        """Predictions per latent channel (a PiFlow-distilled checkpoint widens its heads by this factor)."""
        return self.out_visual_dim // self.in_visual_dim

    def problems(self) -> list[str]:
        out = []
        for name, axes in (("axes_dims", self.axes_dims), ("axes_dims_a", self.axes_a)):
            if len(axes) != 3 or any(int(a) % 2 for a in axes):
                out.append(f"{name} {list(axes)} must be three even sizes (RoPE rotates pairs)")
        for name, dim, head in (("model_dim", self.model_dim, self.head_dim),
                                ("model_dim_a", self.dim_a, self.head_dim_a)):
            if head and dim % head:
                out.append(f"{name}={dim} is not a multiple of its head size {head}")
            if dim % 2:
                out.append(f"{name}={dim} must be even (the time embedding's sinusoid)")
        if len(self.patch_size) != 3 or len(self.scale_factor) != 3:
            out.append("patch_size and scale_factor need three entries (frames, rows, columns)")
        if self.out_visual_dim % self.in_visual_dim or self.out_audio_dim != self.in_audio_dim * self.n_grid:
            out.append(f"out_visual_dim={self.out_visual_dim} and out_audio_dim={self.out_audio_dim} must be "
                       f"in_visual_dim={self.in_visual_dim} and in_audio_dim={self.in_audio_dim} times the same "
                       "number of predictions per channel (1, or a PiFlow grid)")
        if self.ca_rope and self.head_dim != self.head_dim_a:
            out.append(f"ca_rope needs equal head sizes of the two streams (the reference rotates the video "
                       f"heads with the audio table), got {self.head_dim} and {self.head_dim_a}")
        if not self.fix_modulation and self.time_dim != self.tdim_a:
            out.append(f"fix_modulation=false feeds each stream's time embedding to the other's cross "
                       f"modulation: time_dim={self.time_dim} and time_dim_a={self.tdim_a} must be equal")
        return out


# ------------------------------------------------------------------------------------------------------------
# RoPE tables


def rope_freqs(pairs: int, scaling: float = 1.0) -> np.ndarray:
    """diffusers' ``get_freqs(pairs) * scaling`` (Kandinsky 5's table, scaled in float32)."""
    f = k5.rope_freqs(pairs)
    return (f * np.float32(scaling)).astype(np.float32) if scaling != 1.0 else f


def line_rope(length: int, head_dim: int, scaling: float = 1.0) -> tuple[jax.Array, jax.Array]:
    """(cos, sin) (L, head_dim / 2) of positions 0..L-1 (``Kandinsky6RoPE1D``)."""
    ang = jnp.arange(length, dtype=jnp.float32)[:, None] * jnp.asarray(rope_freqs(head_dim // 2, scaling))[None]
    return jnp.cos(ang), jnp.sin(ang)


def visual_rope(frames: jax.Array, rows: int, cols: int, axes_dims, scale) -> tuple[jax.Array, jax.Array]:
    """(cos, sin) (T' H' W', head_dim / 2) of the patch grid (``Kandinsky6RoPE3D``): per axis ``position * freq /
    scale_factor[axis]``, the three axes' angles side by side; ``frames`` (T',) holds each frame's position."""
    positions = (frames.astype(jnp.float32), jnp.arange(rows, dtype=jnp.float32), jnp.arange(cols, dtype=jnp.float32))
    grid = (frames.shape[0], rows, cols)
    parts = []
    for axis, (pos, dim) in enumerate(zip(positions, axes_dims)):
        ang = (pos[:, None] * jnp.asarray(rope_freqs(dim // 2))[None]) / jnp.float32(scale[axis])
        shape = [1, 1, 1, dim // 2]
        shape[axis] = grid[axis]
        parts.append(jnp.broadcast_to(ang.reshape(shape), (*grid, dim // 2)))
    ang = jnp.concatenate(parts, axis=-1).reshape(-1, sum(axes_dims) // 2)
    return jnp.cos(ang), jnp.sin(ang)


# ------------------------------------------------------------------------------------------------------------
# pieces


def attention_layer(dim: int, heads: int, dtype: Any, rngs: nnx.Rngs, kv_dim: int | None = None) -> Attention:
    """``Kandinsky6Attention``: biased q/k/v/out, per-head RMS q/k norms, interleaved RoPE."""
    return Attention(dim, heads, dtype=dtype, rngs=rngs, kv_dim=kv_dim, qk_norm="rms_norm", qk_eps=QK_EPS,
                     rope="interleaved")


def modulation(time_dim: int, width: int, rngs: nnx.Rngs) -> Linear:
    """``Kandinsky6Modulation``'s Linear (float32, as the reference keeps it): ``silu(time) -> width``."""
    return Linear(time_dim, width, (None, EMBED), dtype=jnp.float32, rngs=rngs, fp32_out=True)


residual = k5.residual  # apply_gate_sum: (x.float() + gate * out.float()).to(x.dtype)


def normed(x: jax.Array, shift: jax.Array, scale: jax.Array) -> jax.Array:
    """``apply_scale_shift(LayerNorm(x.float()), x, scale, shift)`` (no affine), in ``x``'s dtype."""
    return modulate(layer_norm(x, LN_EPS), shift, scale).astype(x.dtype)


def feed_forward(dim: int, hidden: int, dtype: Any, rngs: nnx.Rngs) -> FeedForward:
    return FeedForward(dim, hidden, dtype=dtype, rngs=rngs, bias=False, activation="gelu")


TextEmbedding = k5.TextEmbedding  # Kandinsky6TextEmbeddings: the same Linear + affine LayerNorm


class TextBlock(nnx.Module):
    """``Kandinsky6TransformerEncoderBlock`` of one text branch: modulated self-attention (1-D RoPE) and
    feed-forward over the text, held whole on every sequence-parallel rank. It reads and writes
    ``carry[stream]``; the rest of the carry passes through."""

    def __init__(self, stream: str, dim: int, time_dim: int, ff: int, heads: int, dtype: Any, *, rngs: nnx.Rngs):
        self.stream = stream
        self.text_modulation = modulation(time_dim, 6 * dim, rngs)
        self.attn = attention_layer(dim, heads, dtype, rngs)
        self.feed_forward = feed_forward(dim, ff, dtype, rngs)

    def __call__(self, carry: dict, aux: Mapping[str, Any]) -> dict:
        key = "text_" + self.stream
        txt = carry[key]
        sh, sc, g, ff_sh, ff_sc, ff_g = split_modulation(self.text_modulation(jax.nn.silu(aux["temb_" + self.stream])),
                                                         6)
        q, k, v = self.attn.qkv(normed(txt, sh, sc), None, aux["text_rope_" + self.stream])
        txt = residual(txt, self.attn.out(replicated_attention(q, k, v), None), g)
        txt = residual(txt, self.feed_forward(normed(txt, ff_sh, ff_sc), None), ff_g)
        return {**carry, key: constrain(txt, (BATCH, None, EMBED))}


class StreamLayers(nnx.Module):
    """``Kandinsky6TransformerDecoderBlock``: one stream's modulation (9 vectors), self-attention,
    cross-attention to its text and feed-forward (the fused block calls them directly)."""

    def __init__(self, dim: int, time_dim: int, ff: int, heads: int, dtype: Any, rngs: nnx.Rngs):
        self.visual_modulation = modulation(time_dim, 9 * dim, rngs)
        self.self_attention = attention_layer(dim, heads, dtype, rngs)
        self.cross_attention = attention_layer(dim, heads, dtype, rngs)
        self.feed_forward = feed_forward(dim, ff, dtype, rngs)


class FusedBlock(nnx.Module):
    """``Kandinsky6FusedTransformerDecoderBlock`` (module docstring). The carry holds ``video`` (B, S, dim)
    sequence-sharded, ``text_video`` / ``text_audio`` and, when the audio runs, ``audio`` (B, L, dim_a) held whole."""

    def __init__(self, cfg: Kandinsky6DiTConfig, *, rngs: nnx.Rngs):
        d, da, dt = cfg.model_dim, cfg.dim_a, cfg.dtype
        self.ca_rope, self.cross_gates, self.fix_modulation = cfg.ca_rope, cfg.cross_gates, cfg.fix_modulation
        self.dims = (d, da)
        self.video_dec_block = StreamLayers(d, cfg.time_dim, cfg.ff_dim, cfg.heads, dt, rngs)
        self.audio_dec_block = StreamLayers(da, cfg.tdim_a, cfg.ff_a, cfg.heads_a, dt, rngs)
        self.va_cross_attention = attention_layer(d, cfg.heads, dt, rngs, kv_dim=da)
        self.av_cross_attention = attention_layer(da, cfg.heads_a, dt, rngs, kv_dim=d)
        wide = cfg.cross_gates
        self.va_modulation = modulation(cfg.time_dim, 2 * d + da if wide else 3 * d, rngs)
        self.av_modulation = modulation(cfg.tdim_a, 2 * da + d if wide else 3 * da, rngs)

    def __call__(self, carry: dict, aux: Mapping[str, Any]) -> dict:
        vb, ab = self.video_dec_block, self.audio_dec_block
        vis, t_v = carry["video"], aux["temb_video"]
        mv = split_modulation(vb.visual_modulation(jax.nn.silu(t_v)), 9)
        vis = residual(vis, vb.self_attention(normed(vis, mv[0], mv[1]), rope=aux["video_rope"]), mv[2])
        vis_pre_ca = normed(vis, mv[3], mv[4])
        vis_out_t = vb.cross_attention(vis_pre_ca, carry["text_video"])
        aud = carry.get("audio")
        if aud is not None:
            t_a = aux["temb_audio"]
            ma = split_modulation(ab.visual_modulation(jax.nn.silu(t_a)), 9)
            a_rope = aux["audio_rope"]
            aud = residual(aud, ab.self_attention.attend(normed(aud, ma[0], ma[1]), q_seq=None, kv_seq=None,
                                                         q_rope=a_rope), ma[2])
            aud_pre_ca = normed(aud, ma[3], ma[4])
            aud = residual(aud, ab.cross_attention.attend(aud_pre_ca, carry["text_audio"], q_seq=None, kv_seq=None),
                           ma[5])
            va_in, av_in = (t_v, t_a) if self.fix_modulation else (t_a, t_v)
            va = self.va_modulation(jax.nn.silu(va_in))
            av = self.av_modulation(jax.nn.silu(av_in))
            d, da = self.dims
            if self.cross_gates:
                va_shift, va_scale, va_gate = va[:, :d], va[:, d:2 * d], va[:, 2 * d:]
                av_shift, av_scale, av_gate = av[:, :da], av[:, da:2 * da], av[:, 2 * da:]
                va_gate, av_gate = av_gate, va_gate  # each stream gated by the other's projection
            else:
                va_shift, va_scale, va_gate = split_modulation(va, 3)
                av_shift, av_scale, av_gate = split_modulation(av, 3)
            vis = residual(vis, vis_out_t, mv[5])
            v_rope = aux["video_rope"] if self.ca_rope else None
            k_rope = a_rope if self.ca_rope else None
            vis_for_va = normed(vis, va_shift, va_scale)
            aud_for_av = normed(aud, av_shift, av_scale)
            vis_from_aud = self.va_cross_attention.attend(vis_for_va, aud_pre_ca, q_seq=SEQ, kv_seq=None,
                                                          q_rope=v_rope, k_rope=k_rope)
            aud_from_vis = self.av_cross_attention.attend(aud_for_av, vis_pre_ca, q_seq=None, kv_seq=SEQ,
                                                          q_rope=k_rope, k_rope=v_rope)
            vis = residual(vis, vis_from_aud, va_gate)
            aud = residual(aud, aud_from_vis, av_gate)
            aud = residual(aud, ab.feed_forward(normed(aud, ma[6], ma[7]), None), ma[8])
        else:
            vis = residual(vis, vis_out_t, mv[5])
        vis = residual(vis, vb.feed_forward(normed(vis, mv[6], mv[7])), mv[8])
        out = {**carry, "video": constrain(vis, (BATCH, SEQ, EMBED))}
        if aud is not None:
            out["audio"] = constrain(aud, (BATCH, None, EMBED))
        return out


class Kandinsky6DiT(nnx.Module):
    """``Kandinsky6Transformer3DModel`` (module docstring); ``pre`` -> the two text branches -> the fused blocks
    -> ``post`` for the core's offload executor, the carry a dict of the streams' tokens."""

    block_groups = ("video_text_blocks", "audio_text_blocks", "visual_blocks")

    def __init__(self, cfg: Kandinsky6DiTConfig, *, rngs: nnx.Rngs):
        cfg.check_supported()
        self.cfg = cfg
        d, da, dt = cfg.model_dim, cfg.dim_a, cfg.dtype
        p = math.prod(cfg.patch_size)
        self.video_time_embeddings = TimestepEmbedding(d, cfg.time_dim, rngs=rngs)
        self.audio_time_embeddings = TimestepEmbedding(da, cfg.tdim_a, rngs=rngs)
        self.video_text_embeddings = TextEmbedding(cfg.in_text_dim, d, dt, rngs)
        self.audio_text_embeddings = TextEmbedding(cfg.in_text_dim, da, dt, rngs)
        self.video_pooled_text_embeddings = TextEmbedding(cfg.in_text_dim2, cfg.time_dim, dt, rngs)
        self.audio_pooled_text_embeddings = TextEmbedding(cfg.in_text_dim2, cfg.tdim_a, dt, rngs)
        self.visual_embeddings = Linear(p * cfg.in_channels, d, (None, EMBED), dtype=dt, rngs=rngs)
        n_types = cfg.visual_token_type_num_embeddings
        self.visual_token_type_embeddings = param(jnp.zeros((n_types, d), dt), (None, EMBED)) if n_types else None
        self.audio_embeddings = TextEmbedding(cfg.in_audio_dim, da, dt, rngs)
        self.video_text_blocks = stacked(
            lambda r: TextBlock("video", d, cfg.time_dim, cfg.ff_dim, cfg.heads, dt, rngs=r), cfg.num_text_blocks,
            rngs)
        self.audio_text_blocks = stacked(
            lambda r: TextBlock("audio", da, cfg.tdim_a, cfg.ff_a, cfg.heads_a, dt, rngs=r), cfg.num_text_blocks,
            rngs)
        self.visual_blocks = stacked(lambda r: FusedBlock(cfg, rngs=r), cfg.num_visual_blocks, rngs)
        self.out_modulation = modulation(cfg.time_dim, 2 * d, rngs)
        self.out_layer = Linear(d, p * cfg.out_visual_dim, (EMBED, None), dtype=dt, rngs=rngs)
        self.audio_out_modulation = modulation(cfg.tdim_a, 2 * da, rngs)
        self.audio_out_layer = Linear(da, cfg.out_audio_dim, (EMBED, None), dtype=dt, rngs=rngs)

    def grid(self, video_shape: tuple[int, ...]) -> tuple[int, int, int]:
        """The patch grid (T', H', W') of channel-last video latents (B, T, H, W, C)."""
        return tuple(n // p for n, p in zip(video_shape[1:4], self.cfg.patch_size))

    def _temb(self, stream: str, t: jax.Array, pooled: jax.Array) -> jax.Array:
        dim = self.cfg.model_dim if stream == "video" else self.cfg.dim_a
        emb = getattr(self, f"{stream}_time_embeddings")(timestep_embedding(
            t, dim, flip_sin_to_cos=True, downscale_freq_shift=0, max_period=MAX_PERIOD))
        return emb + getattr(self, f"{stream}_pooled_text_embeddings")(pooled).astype(jnp.float32)

    def pre(self, latents: Any, timestep: jax.Array, context: Mapping[str, jax.Array],
            frame_positions: jax.Array | None = None, token_types: jax.Array | None = None) -> tuple[dict, dict]:
        cfg = self.cfg
        video = latents["video"] if isinstance(latents, Mapping) else latents
        audio = latents.get("audio") if isinstance(latents, Mapping) else None
        b = video.shape[0]
        t = jnp.broadcast_to(jnp.asarray(timestep, jnp.float32).reshape(-1), (b,))
        hidden, pooled = context["hidden"], context["pooled"]
        aux = {"temb_video": self._temb("video", t, pooled), "temb_audio": self._temb("audio", t, pooled),
               "text_rope_video": line_rope(hidden.shape[1], cfg.head_dim),
               "text_rope_audio": line_rope(hidden.shape[1], cfg.head_dim_a)}
        carry = {"text_video": constrain(self.video_text_embeddings(hidden), (BATCH, None, EMBED)),
                 "text_audio": constrain(self.audio_text_embeddings(hidden), (BATCH, None, EMBED))}
        tokens, _ = patchify(video.astype(cfg.dtype), cfg.patch_size, order="thwc", layout="fhwc")
        vid = self.visual_embeddings(tokens)
        f, h, w = self.grid(video.shape)
        if token_types is not None:
            if self.visual_token_type_embeddings is None:
                raise ValueError("token_types needs visual_token_type_num_embeddings > 0")
            table = self.visual_token_type_embeddings[...]
            emb = table[jnp.asarray(token_types, jnp.int32)]  # (B, T', dim)
            vid = (vid.reshape(b, f, h * w, -1) + emb[:, :, None, :].astype(vid.dtype)).reshape(vid.shape)
        frames = jnp.arange(f) if frame_positions is None else jnp.asarray(frame_positions)[0]
        aux["video_rope"] = tuple(constrain(a, (SEQ, None)) for a in
                                  visual_rope(frames, h, w, cfg.axes_dims, cfg.scale_factor))
        carry["video"] = constrain(vid, (BATCH, SEQ, EMBED))
        if audio is not None:
            carry["audio"] = constrain(self.audio_embeddings(audio.astype(cfg.dtype)), (BATCH, None, EMBED))
            aux["audio_rope"] = line_rope(audio.shape[1], cfg.head_dim_a, cfg.audio_freqs_scaling)
        return carry, aux

    @staticmethod
    def run_block_group(name: str, graphdef: nnx.GraphDef, state: nnx.State, x: Any, aux: dict) -> Any:
        """Run the stacked blocks of ``name`` in ``state`` (all of them, or any slice) with lax.scan."""
        if name not in Kandinsky6DiT.block_groups:
            raise KeyError(f"Kandinsky6DiT has no block group {name!r}")
        return scan_blocks(graphdef, state, x, aux)

    def post(self, x: dict, aux: dict, latent_shape: Any) -> Any:
        cfg = self.cfg
        video_shape = latent_shape["video"] if isinstance(latent_shape, Mapping) else latent_shape
        shift, scale = split_modulation(self.out_modulation(jax.nn.silu(aux["temb_video"])), 2)
        y = self.out_layer(normed(x["video"], shift, scale))
        video = unpatchify(y.astype(jnp.float32), self.grid(video_shape), cfg.patch_size, order="cthw",
                           layout="fhwc")
        if "audio" not in x:
            return video
        shift, scale = split_modulation(self.audio_out_modulation(jax.nn.silu(aux["temb_audio"])), 2)
        a = normed(x["audio"], shift, scale)
        a = layer_norm(a, LN_EPS).astype(a.dtype)  # the reference's second norm of the audio head
        return {"video": video, "audio": self.audio_out_layer(a).astype(jnp.float32)}

    def __call__(self, latents: Any, timestep: jax.Array, context: Mapping[str, jax.Array],
                 frame_positions: jax.Array | None = None, token_types: jax.Array | None = None) -> Any:
        x, aux = self.pre(latents, timestep, context, frame_positions, token_types)
        for name in self.block_groups:
            graphdef, state = nnx.split(getattr(self, name))
            x = self.run_block_group(name, graphdef, state, x, aux)
        shape = jax.tree.map(lambda a: a.shape, latents) if isinstance(latents, Mapping) else latents.shape
        return self.post(x, aux, shape)
