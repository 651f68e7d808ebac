"""LTX-2.x joint audio-video diffusion transformer (diffusers ``LTX2VideoTransformer3DModel``) in Flax NNX.

Two asymmetric token streams run through the same stacked blocks: video (B, S, C) at ``heads x head_dim`` and
audio (B, Sa, Ca) at ``audio_heads x audio_head_dim``. Each block, per stream: AdaLN (RMSNorm without gain) ->
self-attention with RoPE -> cross-attention to that stream's text -> audio-to-video (video queries, audio keys)
and video-to-audio (audio queries, video keys) cross-attention with a time-only RoPE -> AdaLN -> gelu(tanh) FFN.
The two cross-modal attentions read the streams as they were *before* either of them updated its stream.

Generations (all switches are the checkpoint's config.json keys):

* LTX-2.0: 6-parameter AdaLN, text through ``caption_projection`` inside the DiT, the cross-modal AdaLN driven by
  the stream's own timestep (``use_cross_timestep=False`` at call time);
* LTX-2.3 / 2.5: per-head gated attention (``gated_attn``: ``2 sigmoid(Linear(x))`` per head before ``to_out``),
  cross-attention AdaLN (``cross_attn_mod``: 9 parameters, the text keys/values modulated by a ``prompt_adaln`` of
  ``sigma``), text already projected by the connector (``use_prompt_embeddings=False``), the cross-modal AdaLN
  driven by the *other* stream's sigma (``use_cross_timestep=True``); 2.5 drops the video FFN bias and carries a
  keyframe position embedding.

RoPE: positions are patch midpoints (:func:`video_positions`: seconds on the time axis, so they depend on the
frame rate; pixels on the spatial axes; :func:`audio_positions`: seconds), divided by the base sizes inside the
model; frequencies ``theta ** linspace(0, 1, n) * pi / 2`` (float64 on the host when ``rope_double_precision``);
angles laid out frequency-major, zero angles padded in front; ``rope_type`` ``interleaved`` pairs ``(2i, 2i+1)`` or
``split`` (rotate-half within each head).

Parallelism: video tokens are sequence-sharded (``seq``), the short audio stream is replicated over sp. Video
self-attention goes through Ulysses, audio-to-video is a cross-attention of sharded queries to replicated keys,
video-to-audio is a cross-attention of replicated audio queries to the sequence-sharded video keys
(:func:`vidax_core.attention.ulysses.gathered_kv_attention`). The blocks live in one stacked tree run by
``lax.scan``; the carry between blocks is the pytree ``(video, audio)`` so offload can stream the stack.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.attention import ulysses
from vidax_core.io.arch_base import TransformerConfig
from vidax_core.nn.adaln import AdaLayerNormSingle, gate, modulate, split_modulation
from vidax_core.nn.attention_block import merge_heads, project_heads, rotate
from vidax_core.nn.feedforward import FeedForward
from vidax_core.nn.layers import Linear, param, scan_blocks, stacked
from vidax_core.nn.norms import RMSNorm, layer_norm, rms_norm
from vidax_core.parallel.sharding import constrain

EMBED, HEADS, BATCH, SEQ = "embed", "heads", "batch", "seq"
ASEQ = None  # the audio token axis: replicated over sp

Rope = tuple[jax.Array, jax.Array]


@dataclasses.dataclass(frozen=True)
class LTX2DiTConfig(TransformerConfig):
    """Field names and defaults are diffusers' ``LTX2VideoTransformer3DModel`` config.json keys; ``dtype`` is the
    weight dtype."""

    in_channels: int = 128
    out_channels: int | None = 128
    patch_size: int = 1
    patch_size_t: int = 1
    num_attention_heads: int = 32
    attention_head_dim: int = 128
    cross_attention_dim: int = 4096
    vae_scale_factors: tuple[int, int, int] = (8, 32, 32)
    pos_embed_max_pos: int = 20
    base_height: int = 2048
    base_width: int = 2048
    gated_attn: bool = False
    cross_attn_mod: bool = False
    audio_in_channels: int = 128
    audio_out_channels: int | None = 128
    audio_patch_size: int = 1
    audio_patch_size_t: int = 1
    audio_num_attention_heads: int = 32
    audio_attention_head_dim: int = 64
    audio_cross_attention_dim: int = 2048
    audio_scale_factor: int = 4
    audio_pos_embed_max_pos: int = 20
    audio_sampling_rate: int = 16000
    audio_hop_length: int = 160
    audio_gated_attn: bool = False
    audio_cross_attn_mod: bool = False
    num_layers: int = 48
    activation_fn: str = "gelu-approximate"
    qk_norm: str = "rms_norm_across_heads"
    norm_elementwise_affine: bool = False
    norm_eps: float = 1e-6
    caption_channels: int = 3840
    attention_bias: bool = True
    attention_out_bias: bool = True
    rope_theta: float = 10000.0
    rope_double_precision: bool = True
    causal_offset: int = 1
    timestep_scale_multiplier: int = 1000
    cross_attn_timestep_scale_multiplier: int = 1000
    rope_type: str = "interleaved"
    use_prompt_embeddings: bool = True
    perturbed_attn: bool = False
    ff_bias: bool = True
    audio_ff_bias: bool = True
    use_prompt_adaln_single: bool = True
    use_keyframes_abs_pos_embedding: bool = False
    dtype: Any = jnp.float32
    residual_dtype: Any = jnp.float32

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.audio_out_channels is None:
            object.__setattr__(self, "audio_out_channels", self.audio_in_channels)
        object.__setattr__(self, "vae_scale_factors", tuple(int(v) for v in self.vae_scale_factors))
        self.require("LTX-2", qk_norm="rms_norm_across_heads", activation_fn="gelu-approximate",
                     norm_elementwise_affine=False)
        if self.rope_type not in ("interleaved", "split"):
            raise ValueError(f"rope_type={self.rope_type!r}: expected 'interleaved' or 'split'")
        if self.patch_size != 1 or self.patch_size_t != 1 or self.audio_patch_size != 1 \
                or self.audio_patch_size_t != 1:
            raise ValueError("LTX-2 patch sizes other than 1 are not supported (the published models use 1)")
        if self.audio_cross_attention_dim != self.audio_dim:
            raise ValueError(f"audio_cross_attention_dim={self.audio_cross_attention_dim} must equal audio heads x "
                             f"head_dim={self.audio_dim} (it sizes the cross-modal RoPE)")
        if self.rope_type == "split" and self.num_attention_heads != self.audio_num_attention_heads:
            raise ValueError("rope_type='split' needs num_attention_heads == audio_num_attention_heads (the "
                             "reference groups the cross-modal RoPE by the video head count)")
        if self.use_prompt_embeddings and (self.cross_attention_dim != self.dim
                                           or self.audio_cross_attention_dim != self.audio_dim):
            raise ValueError("with use_prompt_embeddings the caption projections output the stream widths: "
                             "cross_attention_dim and audio_cross_attention_dim must equal them")

    @property
    def audio_dim(self) -> int:
        return self.audio_num_attention_heads * self.audio_attention_head_dim

    @property
    def prompt_modulation(self) -> bool:
        return self.cross_attn_mod or self.audio_cross_attn_mod


# ------------------------------------------------------------------------------------------------------------
# Positions and RoPE
# ------------------------------------------------------------------------------------------------------------


def video_positions(cfg: LTX2DiTConfig, grid: Sequence[int], fps: float) -> np.ndarray:
    """(S, 3) float32 patch midpoints of a latent (f, h, w) grid as LTX2Pipeline builds them: time in seconds
    (first frame causal: ``max(8 f + offset - 8, 0) / fps``), y and x in pixels; float32 in the reference's
    order."""
    f32 = np.float32
    f, h, w = (int(v) for v in grid)
    axes = [np.arange(n, dtype=f32) for n in (f, h, w)]
    start = np.stack(np.meshgrid(*axes, indexing="ij"), 0).reshape(3, -1)
    end = start + f32(1)
    scale = np.asarray(cfg.vae_scale_factors, f32)[:, None]
    start, end = start * scale, end * scale
    for c in (start, end):
        c[0] = np.maximum(c[0] + f32(cfg.causal_offset) - f32(cfg.vae_scale_factors[0]), f32(0)) / f32(fps)
    return ((start + end) / f32(2)).T.astype(f32)


def audio_positions(cfg: LTX2DiTConfig, num_frames: int, shift: int = 0) -> np.ndarray:
    """(Sa, 1) float32 midpoints in seconds of the audio latent frames (mel frames ``4 i`` with the causal first
    frame, hop / sampling rate seconds each), as LTX2Pipeline builds them."""
    f32 = np.float32
    g = np.arange(shift, num_frames + shift, dtype=f32)
    sf = f32(cfg.audio_scale_factor)

    def seconds(frame):
        mel = np.maximum(frame * sf + f32(cfg.causal_offset) - sf, f32(0))
        return mel * f32(cfg.audio_hop_length) / f32(cfg.audio_sampling_rate)

    return ((seconds(g) + seconds(g + f32(1))) / f32(2))[:, None].astype(f32)


def _freqs(n: int, theta: float, double: bool) -> np.ndarray:
    if double:
        return (np.power(np.float64(theta), np.linspace(0.0, 1.0, n, dtype=np.float64)) * math.pi / 2.0
                ).astype(np.float32)
    f32 = np.float32
    return np.power(f32(theta), np.linspace(0.0, 1.0, n, dtype=f32)) * f32(math.pi) / f32(2.0)


def rope_tables(pos: jax.Array, max_pos: Sequence[float], dim: int, heads: int, theta: float,
                double: bool) -> Rope:
    """(B, S, k) positions -> (cos, sin) of shape (B, S, heads, dim / (2 heads)) for a ``dim``-wide projection.

    Each axis is divided by its base size, mapped to ``2 p - 1`` and multiplied by the ``dim // (2k)`` shared
    frequencies; pairs are frequency-major, the ``dim / 2 - k n`` leading pairs have angle 0."""
    k = pos.shape[-1]
    n = dim // (2 * k)
    grid = jnp.stack([pos[..., i].astype(jnp.float32) / jnp.float32(max_pos[i]) for i in range(k)], axis=-1)
    ang = (grid[..., None] * 2.0 - 1.0) * jnp.asarray(_freqs(n, theta, double))  # (B, S, k, n)
    ang = jnp.swapaxes(ang, -1, -2).reshape(*ang.shape[:-2], k * n)
    pad = dim // 2 - k * n
    cos, sin = jnp.cos(ang), jnp.sin(ang)
    if pad:
        cos = jnp.concatenate([jnp.ones(cos.shape[:-1] + (pad,), cos.dtype), cos], axis=-1)
        sin = jnp.concatenate([jnp.zeros(sin.shape[:-1] + (pad,), sin.dtype), sin], axis=-1)
    shape = (*cos.shape[:-1], heads, dim // (2 * heads))
    return cos.reshape(shape), sin.reshape(shape)


# ------------------------------------------------------------------------------------------------------------
# Attention
# ------------------------------------------------------------------------------------------------------------


class LTX2Attention(nnx.Module):
    """diffusers ``LTX2Attention``: q/k/v of width ``heads x head_dim`` (not necessarily the query width), q/k
    RMS-normed across heads with a gain, separate q and k RoPE tables, optional per-head output gates
    (``to_gate_logits``)."""

    def __init__(self, q_dim: int, heads: int, head_dim: int, *, kv_dim: int | None = None, gated: bool,
                 bias: bool, out_bias: bool, eps: float, rope_style: str, dtype: Any, rngs: nnx.Rngs):
        inner = heads * head_dim
        kv_dim = q_dim if kv_dim is None else kv_dim
        self.heads, self.rope_style = heads, rope_style
        self.to_q = Linear(q_dim, inner, (EMBED, HEADS), dtype=dtype, rngs=rngs, bias=bias)
        self.to_k = Linear(kv_dim, inner, (EMBED, HEADS), dtype=dtype, rngs=rngs, bias=bias)
        self.to_v = Linear(kv_dim, inner, (EMBED, HEADS), dtype=dtype, rngs=rngs, bias=bias)
        self.to_out = Linear(inner, q_dim, (HEADS, EMBED), dtype=dtype, rngs=rngs, bias=out_bias)
        self.norm_q = RMSNorm(inner, (HEADS,), eps=eps)
        self.norm_k = RMSNorm(inner, (HEADS,), eps=eps)
        self.to_gate_logits = (Linear(q_dim, heads, (EMBED, HEADS), dtype=dtype, rngs=rngs, bias=True)
                               if gated else None)

    def __call__(self, x: jax.Array, kv: jax.Array | None = None, *, q_seq: str | None, kv_seq: str | None,
                 q_rope: Rope | None = None, k_rope: Rope | None = None, kv_mask: jax.Array | None = None,
                 skip: jax.Array | None = None) -> jax.Array:
        """x (B, S, q_dim) queries whose token axis is named ``q_seq`` (``seq``: sharded video, None: replicated);
        ``kv`` (B, L, kv_dim) keys/values (None: self-attention) named ``kv_seq``; ``kv_mask`` (B, L) bool;
        ``skip`` (B,) float: where 1 the attention is replaced by the value projection (STG's perturbed pass, the
        reference's ``perturbation_mask`` 0), gates and ``to_out`` still applied."""
        self_attn = kv is None
        kv = x if self_attn else kv
        q = project_heads(self.to_q, self.norm_q, x, (BATCH, q_seq, HEADS), self.heads, across_heads=True)
        k = project_heads(self.to_k, self.norm_k, kv, (BATCH, kv_seq, HEADS), self.heads, across_heads=True)
        v = project_heads(self.to_v, None, kv, (BATCH, kv_seq, HEADS), self.heads)
        if q_rope is not None:
            q = rotate(q, q_rope, self.rope_style)
            k = rotate(k, q_rope if k_rope is None else k_rope, self.rope_style)
        o = ulysses.attend(q, k, v, q_sharded=q_seq == SEQ, kv_sharded=kv_seq == SEQ, kv_mask=kv_mask)
        if skip is not None:
            o = jnp.where(skip.reshape(-1, 1, 1, 1) > 0, v.astype(o.dtype), o)
        if self.to_gate_logits is not None:
            g = 2.0 * jax.nn.sigmoid(self.to_gate_logits(x).astype(jnp.float32))  # (B, S, H)
            o = (o.astype(jnp.float32) * g[..., None]).astype(o.dtype)
        o = constrain(merge_heads(o), (BATCH, q_seq, HEADS))
        return constrain(self.to_out(o), (BATCH, q_seq, EMBED))


# ------------------------------------------------------------------------------------------------------------
# Block
# ------------------------------------------------------------------------------------------------------------


def _table(n: int, d: int, rngs: nnx.Rngs, scaled: bool = True) -> nnx.Param:
    t = jax.random.normal(rngs.params(), (n, d), jnp.float32)
    return param(t / d**0.5 if scaled else t, (None, EMBED))


class LTX2Block(nnx.Module):
    """One LTX-2 audio-video block (diffusers ``LTX2VideoTransformerBlock``)."""

    def __init__(self, cfg: LTX2DiTConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        d, da, dt = cfg.dim, cfg.audio_dim, cfg.dtype
        h, hd, ha, hda = (cfg.num_attention_heads, cfg.attention_head_dim, cfg.audio_num_attention_heads,
                          cfg.audio_attention_head_dim)
        style = "interleaved" if cfg.rope_type == "interleaved" else "rotate_half"
        common = dict(bias=cfg.attention_bias, out_bias=cfg.attention_out_bias, eps=1e-6, rope_style=style,
                      dtype=dt, rngs=rngs)
        vg, ag = cfg.gated_attn, cfg.audio_gated_attn
        self.attn1 = LTX2Attention(d, h, hd, gated=vg, **common)
        self.audio_attn1 = LTX2Attention(da, ha, hda, gated=ag, **common)
        self.attn2 = LTX2Attention(d, h, hd, kv_dim=cfg.cross_attention_dim, gated=vg, **common)
        self.audio_attn2 = LTX2Attention(da, ha, hda, kv_dim=cfg.audio_cross_attention_dim, gated=ag, **common)
        self.audio_to_video_attn = LTX2Attention(d, ha, hda, kv_dim=da, gated=vg, **common)
        self.video_to_audio_attn = LTX2Attention(da, ha, hda, kv_dim=d, gated=ag, **common)
        act = cfg.activation_fn
        self.ff = FeedForward(d, 4 * d, dtype=dt, rngs=rngs, bias=cfg.ff_bias, activation=act)
        self.audio_ff = FeedForward(da, 4 * da, dtype=dt, rngs=rngs, bias=cfg.audio_ff_bias, activation=act)
        self.scale_shift_table = _table(9 if cfg.cross_attn_mod else 6, d, rngs)
        self.audio_scale_shift_table = _table(9 if cfg.audio_cross_attn_mod else 6, da, rngs)
        if cfg.prompt_modulation:
            self.prompt_scale_shift_table = _table(2, d, rngs, scaled=False)
            self.audio_prompt_scale_shift_table = _table(2, da, rngs, scaled=False)
        else:
            self.prompt_scale_shift_table = self.audio_prompt_scale_shift_table = None
        self.video_a2v_cross_attn_scale_shift_table = _table(5, d, rngs, scaled=False)
        self.audio_a2v_cross_attn_scale_shift_table = _table(5, da, rngs, scaled=False)

    def _norm(self, x: jax.Array) -> jax.Array:
        return rms_norm(x, eps=self.cfg.norm_eps, out_dtype=jnp.float32)

    def __call__(self, carry: tuple[jax.Array, jax.Array], aux: dict, skip: jax.Array | None = None
                 ) -> tuple[jax.Array, jax.Array]:
        """``skip`` (B,) float: 1 where this block's self-attentions are perturbed (STG, ``perturbed_attn``)."""
        cfg, dt = self.cfg, self.cfg.dtype
        skip = skip if cfg.perturbed_attn else None
        x, a = carry
        rt = x.dtype
        x = constrain(x, (BATCH, SEQ, EMBED))
        nv, na = self.scale_shift_table.shape[0], self.audio_scale_shift_table.shape[0]
        vm = split_modulation(aux["temb"], nv, self.scale_shift_table[...])
        am = split_modulation(aux["temb_audio"], na, self.audio_scale_shift_table[...])
        f32 = jnp.float32

        def res(h, y, g=None):  # residual add in float32
            return (h.astype(f32) + (y.astype(f32) if g is None else gate(y, g))).astype(rt)

        # 1. self-attention
        hx = modulate(self._norm(x), vm[0], vm[1]).astype(dt)
        x = res(x, self.attn1(hx, q_seq=SEQ, kv_seq=SEQ, q_rope=aux["rope"], skip=skip), vm[2])
        ha = modulate(self._norm(a), am[0], am[1]).astype(dt)
        a = res(a, self.audio_attn1(ha, q_seq=ASEQ, kv_seq=ASEQ, q_rope=aux["audio_rope"], skip=skip), am[2])

        # 2. cross-attention to the text
        ctx, actx = aux["ctx"], aux["audio_ctx"]
        if self.prompt_scale_shift_table is not None:
            tp, tpa = aux.get("temb_prompt"), aux.get("temb_prompt_audio")
            kv_shift, kv_scale = split_modulation(tp if tp is not None else jnp.zeros((1, 1, 2 * cfg.dim)), 2,
                                                  self.prompt_scale_shift_table[...])
            akv_shift, akv_scale = split_modulation(
                tpa if tpa is not None else jnp.zeros((1, 1, 2 * cfg.audio_dim)), 2,
                self.audio_prompt_scale_shift_table[...])
            ctx = modulate(ctx, kv_shift, kv_scale).astype(dt)
            actx = modulate(actx, akv_shift, akv_scale).astype(dt)
        hx = self._norm(x)
        if cfg.cross_attn_mod:
            hx = modulate(hx, vm[6], vm[7])
        y = self.attn2(hx.astype(dt), ctx, q_seq=SEQ, kv_seq=None, kv_mask=aux.get("ctx_mask"))
        x = res(x, y, vm[8] if cfg.cross_attn_mod else None)
        ha = self._norm(a)
        if cfg.audio_cross_attn_mod:
            ha = modulate(ha, am[6], am[7])
        y = self.audio_attn2(ha.astype(dt), actx, q_seq=ASEQ, kv_seq=None, kv_mask=aux.get("audio_ctx_mask"))
        a = res(a, y, am[8] if cfg.audio_cross_attn_mod else None)

        # 3. audio-to-video and video-to-audio, both from the streams as they are now
        nx, na_ = self._norm(x), self._norm(a)
        vt = self.video_a2v_cross_attn_scale_shift_table[...]
        at = self.audio_a2v_cross_attn_scale_shift_table[...]
        v_a2v_scale, v_a2v_shift, v_v2a_scale, v_v2a_shift = split_modulation(aux["temb_ca"], 4, vt[:4])
        a_a2v_scale, a_a2v_shift, a_v2a_scale, a_v2a_shift = split_modulation(aux["temb_ca_audio"], 4, at[:4])
        (a2v_gate,) = split_modulation(aux["temb_ca_gate"], 1, vt[4:])
        (v2a_gate,) = split_modulation(aux["temb_ca_audio_gate"], 1, at[4:])
        if "cross_modal" in aux:  # (B,) 0 where the modalities are isolated
            on = aux["cross_modal"].astype(f32)[:, None, None]
            a2v_gate, v2a_gate = a2v_gate * on, v2a_gate * on
        q = modulate(nx, v_a2v_shift, v_a2v_scale).astype(dt)
        kv = modulate(na_, a_a2v_shift, a_a2v_scale).astype(dt)
        y_a2v = self.audio_to_video_attn(q, kv, q_seq=SEQ, kv_seq=ASEQ, q_rope=aux["ca_rope"],
                                         k_rope=aux["ca_audio_rope"])
        q = modulate(na_, a_v2a_shift, a_v2a_scale).astype(dt)
        kv = modulate(nx, v_v2a_shift, v_v2a_scale).astype(dt)
        y_v2a = self.video_to_audio_attn(q, kv, q_seq=ASEQ, kv_seq=SEQ, q_rope=aux["ca_audio_rope"],
                                         k_rope=aux["ca_rope"])
        x = res(x, y_a2v, a2v_gate)
        a = res(a, y_v2a, v2a_gate)

        # 4. feed-forward
        hx = modulate(self._norm(x), vm[3], vm[4]).astype(dt)
        x = res(x, self.ff(hx), vm[5])
        ha = modulate(self._norm(a), am[3], am[4]).astype(dt)
        a = res(a, self.audio_ff(ha, seq=ASEQ), am[5])
        return constrain(x, (BATCH, SEQ, EMBED)), constrain(a, (BATCH, ASEQ, EMBED))


# ------------------------------------------------------------------------------------------------------------
# Model
# ------------------------------------------------------------------------------------------------------------


class _TextProjection(nnx.Module):
    """PixArt's caption projection: ``linear_2(gelu_tanh(linear_1(x)))``."""

    def __init__(self, d_in: int, d: int, *, dtype: Any, rngs: nnx.Rngs):
        self.linear_1 = Linear(d_in, d, (None, EMBED), dtype=dtype, rngs=rngs)
        self.linear_2 = Linear(d, d, (None, EMBED), dtype=dtype, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.linear_2(jax.nn.gelu(self.linear_1(x), approximate=True))


def _per_token(t: jax.Array, b: int) -> jax.Array:
    """(B,) or (B, T) -> (B, T) with T = 1 for a per-sample value (the reference's ``flatten`` + ``view(B, -1)``)."""
    return t.reshape(b, -1).astype(jnp.float32)


class LTX2DiT(nnx.Module):
    """The LTX-2 DiT::

        model({"video": (B, S, C), "audio": (B, Sa, Ca)}, timestep, context, video_positions=..., audio_positions=...)
            -> {"video": (B, S, out_channels), "audio": (B, Sa, audio_out_channels)} float32

    ``timestep`` (B,) or per video token (B, S), model units (0..1000); ``audio_timestep`` (default ``timestep``);
    ``sigma`` / ``audio_sigma`` (default ``timestep`` / ``sigma``) drive the prompt AdaLN and, with
    ``use_cross_timestep``, the other stream's cross-modal AdaLN. ``context``: ``{"video": (B, L, Cv),
    "audio": (B, L, Ca)}`` with optional ``"mask"`` / ``"audio_mask"`` (B, L) bool. Positions from
    :func:`video_positions` / :func:`audio_positions`, (B, S, 3) / (B, Sa, 1). ``cross_modal`` (B,) float: 0 turns
    off both cross-modal attentions for that sample (``isolate_modalities``). ``video_keyframes_mask`` (B, S, 1):
    tokens > 0 get the keyframe embedding (when the model has one). ``use_cross_timestep`` is a Python bool
    (static) or a (B,) float array (1 = on), so a run's choice is an input rather than a new program.

    Spatio-temporal guidance: with ``perturbed=True`` (static) and ``stg_skip`` (B, num_layers) float, the blocks
    flagged 1 replace both self-attentions by their value projections (only in a model built with
    ``perturbed_attn``, as the reference). The carry between block chunks is then ``(video, audio, first layer
    index)`` so an offloaded slice of the stack finds its own flags.
    """

    block_groups = ("blocks",)

    def __init__(self, cfg: LTX2DiTConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        d, da, dt = cfg.dim, cfg.audio_dim, cfg.dtype
        self.proj_in = Linear(cfg.in_channels, d, (None, EMBED), dtype=dt, rngs=rngs)
        self.audio_proj_in = Linear(cfg.audio_in_channels, da, (None, EMBED), dtype=dt, rngs=rngs)
        self.keyframes_abs_pos_embedding = (param(jnp.zeros((1, d), dt), (None, EMBED))
                                            if cfg.use_keyframes_abs_pos_embedding else None)
        if cfg.use_prompt_embeddings:
            self.caption_projection = _TextProjection(cfg.caption_channels, d, dtype=dt, rngs=rngs)
            self.audio_caption_projection = _TextProjection(cfg.caption_channels, da, dtype=dt, rngs=rngs)
        else:
            self.caption_projection = self.audio_caption_projection = None
        self.time_embed = AdaLayerNormSingle(d, n=9 if cfg.cross_attn_mod else 6, dtype=dt, rngs=rngs)
        self.audio_time_embed = AdaLayerNormSingle(da, n=9 if cfg.audio_cross_attn_mod else 6, dtype=dt, rngs=rngs)
        self.av_cross_attn_video_scale_shift = AdaLayerNormSingle(d, n=4, dtype=dt, rngs=rngs)
        self.av_cross_attn_audio_scale_shift = AdaLayerNormSingle(da, n=4, dtype=dt, rngs=rngs)
        self.av_cross_attn_video_a2v_gate = AdaLayerNormSingle(d, n=1, dtype=dt, rngs=rngs)
        self.av_cross_attn_audio_v2a_gate = AdaLayerNormSingle(da, n=1, dtype=dt, rngs=rngs)
        if cfg.prompt_modulation and cfg.use_prompt_adaln_single:
            self.prompt_adaln = AdaLayerNormSingle(d, n=2, dtype=dt, rngs=rngs)
            self.audio_prompt_adaln = AdaLayerNormSingle(da, n=2, dtype=dt, rngs=rngs)
        else:
            self.prompt_adaln = self.audio_prompt_adaln = None
        self.blocks = stacked(lambda r: LTX2Block(cfg, rngs=r), cfg.num_layers, rngs)
        self.scale_shift_table = _table(2, d, rngs)
        self.audio_scale_shift_table = _table(2, da, rngs)
        self.proj_out = Linear(d, cfg.out_channels, (EMBED, None), dtype=dt, rngs=rngs)
        self.audio_proj_out = Linear(da, cfg.audio_out_channels, (EMBED, None), dtype=dt, rngs=rngs)

    # -- RoPE -------------------------------------------------------------------------------------------------

    def ropes(self, video_pos: jax.Array, audio_pos: jax.Array) -> dict[str, Rope]:
        cfg = self.cfg
        th, dbl = cfg.rope_theta, cfg.rope_double_precision
        ca_max = max(cfg.pos_embed_max_pos, cfg.audio_pos_embed_max_pos)
        video_pos = constrain(video_pos, (BATCH, SEQ, None))
        names = (BATCH, SEQ, HEADS, None)
        out = {
            "rope": rope_tables(video_pos, (cfg.pos_embed_max_pos, cfg.base_height, cfg.base_width), cfg.dim,
                                cfg.num_attention_heads, th, dbl),
            "audio_rope": rope_tables(audio_pos, (cfg.audio_pos_embed_max_pos,), cfg.audio_dim,
                                      cfg.audio_num_attention_heads, th, dbl),
            "ca_rope": rope_tables(video_pos[..., :1], (ca_max,), cfg.audio_cross_attention_dim,
                                   cfg.audio_num_attention_heads, th, dbl),
            "ca_audio_rope": rope_tables(audio_pos, (ca_max,), cfg.audio_cross_attention_dim,
                                         cfg.audio_num_attention_heads, th, dbl),
        }
        for k in ("rope", "ca_rope"):
            out[k] = tuple(constrain(t, names) for t in out[k])
        return out

    # -- the offload contract ---------------------------------------------------------------------------------

    def pre(self, latents: Mapping[str, jax.Array], timestep: jax.Array, context: Mapping[str, Any], *,
            video_positions: jax.Array, audio_positions: jax.Array, audio_timestep: jax.Array | None = None,
            sigma: jax.Array | None = None, audio_sigma: jax.Array | None = None,
            use_cross_timestep: bool | jax.Array = False, cross_modal: jax.Array | None = None,
            video_keyframes_mask: jax.Array | None = None, stg_skip: jax.Array | None = None,
            perturbed: bool = False):
        cfg, dt = self.cfg, self.cfg.dtype
        video, audio = latents["video"], latents["audio"]
        b, s, c = video.shape
        if c != cfg.in_channels or audio.shape[-1] != cfg.audio_in_channels:
            raise ValueError(f"latents have {c} video / {audio.shape[-1]} audio channels, the LTX-2 DiT config "
                             f"has {cfg.in_channels} / {cfg.audio_in_channels}")
        audio_timestep = timestep if audio_timestep is None else audio_timestep
        sigma = timestep if sigma is None else sigma
        audio_sigma = sigma if audio_sigma is None else audio_sigma
        t, ta = _per_token(timestep, b), _per_token(audio_timestep, b)
        sg, sga = _per_token(sigma, b), _per_token(audio_sigma, b)

        x = self.proj_in(constrain(video, (BATCH, SEQ, None)).astype(dt))
        if self.keyframes_abs_pos_embedding is not None and video_keyframes_mask is not None:
            marker = (video_keyframes_mask > 0).astype(x.dtype)
            x = x + marker * self.keyframes_abs_pos_embedding[...].astype(x.dtype)
        x = constrain(x.astype(cfg.residual_dtype), (BATCH, SEQ, EMBED))
        a = self.audio_proj_in(audio.astype(dt)).astype(cfg.residual_dtype)

        temb, emb = self.time_embed(t)
        temb_a, emb_a = self.audio_time_embed(ta)
        ratio = cfg.cross_attn_timestep_scale_multiplier / cfg.timestep_scale_multiplier
        if isinstance(use_cross_timestep, bool):
            v_ca_t = sga if use_cross_timestep else t
            a_ca_t = sg if use_cross_timestep else ta
        else:  # (B,) flags: per sample, the other stream's sigma or the stream's own timestep
            on = jnp.asarray(use_cross_timestep, jnp.float32).reshape(b, 1) > 0
            v_ca_t, a_ca_t = jnp.where(on, sga, t), jnp.where(on, sg, ta)
        aux: dict[str, Any] = {
            "temb": temb, "temb_audio": temb_a, "emb": emb, "emb_audio": emb_a,
            "temb_ca": self.av_cross_attn_video_scale_shift(v_ca_t)[0],
            "temb_ca_gate": self.av_cross_attn_video_a2v_gate(v_ca_t * ratio)[0],
            "temb_ca_audio": self.av_cross_attn_audio_scale_shift(a_ca_t)[0],
            "temb_ca_audio_gate": self.av_cross_attn_audio_v2a_gate(a_ca_t * ratio)[0],
        }
        if self.prompt_adaln is not None:
            aux["temb_prompt"] = self.prompt_adaln(sg)[0]
            aux["temb_prompt_audio"] = self.audio_prompt_adaln(sga)[0]
        ctx, actx = context["video"].astype(dt), context["audio"].astype(dt)
        if self.caption_projection is not None:
            ctx, actx = self.caption_projection(ctx), self.audio_caption_projection(actx)
        aux["ctx"] = constrain(ctx.astype(dt), (BATCH, None, EMBED))
        aux["audio_ctx"] = constrain(actx.astype(dt), (BATCH, None, EMBED))
        if context.get("mask") is not None:
            aux["ctx_mask"] = context["mask"].astype(bool)
        if context.get("audio_mask", context.get("mask")) is not None:
            aux["audio_ctx_mask"] = context.get("audio_mask", context.get("mask")).astype(bool)
        if cross_modal is not None:
            aux["cross_modal"] = jnp.broadcast_to(jnp.asarray(cross_modal, jnp.float32).reshape(-1), (b,))
        aux.update(self.ropes(video_positions, audio_positions))
        if perturbed and stg_skip is not None:
            aux["skip"] = jnp.asarray(stg_skip, jnp.float32).reshape(b, cfg.num_layers)
            return (x, a, jnp.zeros((), jnp.int32)), aux
        return (x, a), aux

    @staticmethod
    def run_block_group(name: str, graphdef: nnx.GraphDef, state: nnx.State, carry: Any, aux: dict) -> Any:
        if name != "blocks":
            raise KeyError(f"LTX-2 has no block group {name!r}")
        if len(carry) == 2:
            return scan_blocks(graphdef, state, carry, aux)
        x, a, first = carry  # perturbed pass: this slice's flags start at layer ``first``
        n = jax.tree.leaves(state)[0].shape[0]
        flags = jax.lax.dynamic_slice_in_dim(aux["skip"], first, n, axis=1).T  # (n, B)

        def body(h, layer):
            layer_state, skip = layer
            return nnx.merge(graphdef, layer_state)(h, aux, skip), None

        (x, a), _ = jax.lax.scan(body, (x, a), (state, flags))
        return x, a, first + n

    def post(self, carry: tuple[jax.Array, ...], aux: dict, latent_shape: Any = ()) -> dict[str, jax.Array]:
        x, a = carry[:2]
        dt = self.cfg.dtype

        def head(h, table, emb, proj, seq):
            shift = table[0] + emb.astype(jnp.float32)
            scale = table[1] + emb.astype(jnp.float32)
            h = modulate(layer_norm(h, 1e-6), shift, scale).astype(dt)
            return constrain(proj(h).astype(jnp.float32), (BATCH, seq, None))

        return {"video": head(x, self.scale_shift_table[...].astype(jnp.float32), aux["emb"], self.proj_out, SEQ),
                "audio": head(a, self.audio_scale_shift_table[...].astype(jnp.float32), aux["emb_audio"],
                              self.audio_proj_out, ASEQ)}

    def __call__(self, latents: Mapping[str, jax.Array], timestep: jax.Array, context: Mapping[str, Any],
                 **kwargs: Any) -> dict[str, jax.Array]:
        carry, aux = self.pre(latents, timestep, context, **kwargs)
        graphdef, state = nnx.split(self.blocks)
        carry = self.run_block_group("blocks", graphdef, state, carry, aux)
        return self.post(carry, aux)
