"""The Helios DiT (diffusers ``HeliosTransformer3DModel``): the core's Wan DiT embedders and head around blocks that
attend over a multi-scale history of earlier latents.

One call denoises a chunk of ``num_latent_frames_per_chunk`` latent frames. In front of its tokens go, each with
its own patch embedding, the history at three scales: ``short`` (the first frame and the newest history frames,
the chunk's patch), ``mid`` (2x coarser in time and space) and ``long`` (4x); the latents are padded by repeating
their last entries to a whole number of the coarse patches. Every token gets 3-D RoPE from its frame index
(``indices_*``, the pipeline's fixed layout) and grid position, split ``rope_dim`` = (t, y, x) over the head dim
as interleaved pairs; the coarse scales average the full-resolution cos/sin tables over their patch (2x2x2,
4x4x4). With ``zero_history_timestep`` the history tokens are modulated by the embedding of timestep 0.

Blocks: Wan's (AdaLN self-attention, cross-attention, FFN) with a modulation per token (history / chunk), the
cross-attention applied to the chunk's tokens only (``guidance_cross_attn``; it is computed for all and kept for
the chunk's), and with ``is_amplify_history`` the history keys of the self-attention scaled by
``1 + sigmoid(history_key_scale) * 9`` (per head or one scalar). The output head reads the chunk's tokens.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import jax
import jax.numpy as jnp
from flax import nnx

from vidax_core.attention import ulysses
from vidax_core.nn.adaln import gate, modulate
from vidax_core.nn.attention_block import Attention
from vidax_core.nn.feedforward import FeedForward
from vidax_core.nn.layers import param
from vidax_core.nn.norms import LayerNorm, layer_norm
from vidax_core.parallel.sharding import constrain
from vidax_core.wan_dit.model import BATCH, EMBED, SEQ, WanDiT, WanDiTConfig, patch_tokens, run_blocks

HEADS = "heads"
MAX_HISTORY_SCALE = 10.0  # the reference's max_scale of the amplified history keys
SCALES = {"short": 1, "mid": 2, "long": 4}  # history scale -> patch multiple


@dataclasses.dataclass(frozen=True)
class HeliosDiTConfig(WanDiTConfig):
    """Field names match diffusers' ``config.json`` for ``HeliosTransformer3DModel``."""

    num_attention_heads: int = 40
    ffn_dim: int = 13824
    rope_dim: tuple[int, int, int] = (44, 42, 42)
    rope_theta: float = 10000.0
    guidance_cross_attn: bool = True
    zero_history_timestep: bool = True
    has_multi_term_memory_patch: bool = True
    is_amplify_history: bool = False
    history_scale_mode: str = "per_head"

    def __post_init__(self) -> None:
        object.__setattr__(self, "rope_dim", tuple(int(d) for d in self.rope_dim))
        super().__post_init__()
        if sum(self.rope_dim) != self.attention_head_dim or any(d % 2 for d in self.rope_dim):
            raise ValueError(f"rope_dim={self.rope_dim} must be even parts summing to attention_head_dim="
                             f"{self.attention_head_dim}")
        if self.history_scale_mode not in ("per_head", "scalar"):
            raise ValueError(f"history_scale_mode={self.history_scale_mode!r}: per_head or scalar")


def rope_tables(cfg: HeliosDiTConfig, frames: jax.Array, h: int, w: int) -> tuple[jax.Array, jax.Array]:
    """cos/sin (B, F, h, w, head_dim / 2) of frame indices ``frames`` (B, F) on an h x w grid, in float32 as the
    reference (angles ``freq * position`` per pair; t, y, x parts of ``rope_dim``)."""
    def freqs(d: int) -> jax.Array:
        return 1.0 / (jnp.float32(cfg.rope_theta) ** (jnp.arange(0, d, 2, dtype=jnp.float32)[: d // 2] / d))

    dt, dy, dx = cfg.rope_dim
    b, f = frames.shape
    t = jnp.broadcast_to(frames.astype(jnp.float32)[:, :, None, None, None], (b, f, h, w, 1))
    y = jnp.broadcast_to(jnp.arange(h, dtype=jnp.float32)[None, None, :, None, None], (b, f, h, w, 1))
    x = jnp.broadcast_to(jnp.arange(w, dtype=jnp.float32)[None, None, None, :, None], (b, f, h, w, 1))
    angles = jnp.concatenate([t * freqs(dt), y * freqs(dy), x * freqs(dx)], axis=-1)
    return jnp.cos(angles), jnp.sin(angles)


def _pad_to(x: jax.Array, multiple: Sequence[int], axes: Sequence[int]) -> jax.Array:
    """Pad ``axes`` at their end to a multiple of ``multiple`` by repeating the last entry (the reference's
    ``pad_for_3d_conv``, replicate mode)."""
    pads = [(0, 0)] * x.ndim
    for m, a in zip(multiple, axes):
        pads[a] = (0, (m - x.shape[a] % m) % m)
    return jnp.pad(x, pads, mode="edge")


def _pool(table: jax.Array, k: int) -> jax.Array:
    """Average (B, F, H, W, P) over k x k x k blocks (after padding): the reference's ``avg_pool3d``."""
    table = _pad_to(table, (k, k, k), (1, 2, 3))
    b, f, h, w, p = table.shape
    return table.reshape(b, f // k, k, h // k, k, w // k, k, p).mean(axis=(2, 4, 6))


class HeliosBlock(nnx.Module):
    """One Helios block (the Wan block's parameters, plus ``history_key_scale`` with ``is_amplify_history``)."""

    def __init__(self, cfg: HeliosDiTConfig, *, rngs: nnx.Rngs):
        self.eps, self.compute_dtype = cfg.eps, cfg.dtype
        self.cross_on_chunk = cfg.guidance_cross_attn
        dim, heads, dt = cfg.dim, cfg.num_attention_heads, cfg.dtype
        qk = dict(dtype=dt, rngs=rngs, qk_norm="rms_norm_across_heads", qk_eps=cfg.eps)
        self.attn1 = Attention(dim, heads, **qk)
        self.attn2 = Attention(dim, heads, added_kv_dim=cfg.added_kv_proj_dim, **qk)
        self.norm2 = LayerNorm(dim, (EMBED,), eps=cfg.eps) if cfg.cross_attn_norm else None
        self.ffn = FeedForward(dim, cfg.ffn_dim, dtype=dt, rngs=rngs, activation="gelu-approximate")
        self.scale_shift_table = param(jax.random.normal(rngs.params(), (6, dim), jnp.float32) / dim**0.5,
                                       (None, EMBED))
        if cfg.is_amplify_history:
            n = heads if cfg.history_scale_mode == "per_head" else 1
            self.history_key_scale = param(jnp.ones((n,), jnp.float32), (HEADS,) if n > 1 else (None,))
        else:
            self.history_key_scale = None

    def __call__(self, x: jax.Array, ctx: jax.Array, tproj: jax.Array, rope: tuple[jax.Array, jax.Array],
                 history: jax.Array) -> jax.Array:
        """x (B, S, dim) [history; chunk]; ctx (B, L, dim); tproj (B, 2, 6, dim): the history's and the chunk's
        modulation; rope (B, S, head_dim / 2) x2; history (S,) bool, True on the history tokens."""
        dt, rt = self.compute_dtype, x.dtype
        x = constrain(x, (BATCH, SEQ, EMBED))
        hist = constrain(history, (SEQ,))[None, :, None]
        mod = self.scale_shift_table[...].astype(jnp.float32)[None, None] + tproj.astype(jnp.float32)
        parts = [jnp.where(hist, mod[:, 0, i][:, None], mod[:, 1, i][:, None]) for i in range(6)]
        shift_msa, scale_msa, gate_msa, c_shift, c_scale, c_gate = parts

        h = modulate(layer_norm(x, self.eps), shift_msa, scale_msa).astype(dt)
        q, k, v = self.attn1.qkv(h, SEQ, (rope[0][:, :, None], rope[1][:, :, None]))
        if self.history_key_scale is not None:
            scale = 1.0 + jax.nn.sigmoid(self.history_key_scale[...].astype(jnp.float32)) * (MAX_HISTORY_SCALE - 1)
            k = jnp.where(hist[..., None], (k.astype(jnp.float32) * scale[None, None, :, None]).astype(k.dtype), k)
        a = self.attn1.out(ulysses.self_attention(q, k, v))
        x = (x.astype(jnp.float32) + gate(a, gate_msa)).astype(rt)

        h = (self.norm2(x) if self.norm2 is not None else x.astype(jnp.float32)).astype(dt)
        a = self.attn2(h, ctx).astype(jnp.float32)
        if self.cross_on_chunk:
            a = jnp.where(hist, 0.0, a)
        x = (x.astype(jnp.float32) + a).astype(rt)

        h = modulate(layer_norm(x, self.eps), c_shift, c_scale).astype(dt)
        f = self.ffn(h)
        return constrain((x.astype(jnp.float32) + gate(f, c_gate)).astype(rt), (BATCH, SEQ, EMBED))


class HeliosDiT(WanDiT):
    """``model(latents, timestep, context, indices_hidden_states=None, indices_latents_history_short=None,
    indices_latents_history_mid=None, indices_latents_history_long=None, latents_history_short=None,
    latents_history_mid=None, latents_history_long=None)``, diffusers' keyword names: the chunk's latents
    (B, C, F, H, W), timestep (B,), the history latents (B, C, n, H, W) and frame indices (B, n) of each scale."""

    block_type = HeliosBlock

    def __init__(self, cfg: HeliosDiTConfig, *, rngs: nnx.Rngs):
        super().__init__(cfg, rngs=rngs)
        init = nnx.initializers.lecun_normal(in_axis=(0, 1, 2, 3), out_axis=4)
        for name, m in (SCALES.items() if cfg.has_multi_term_memory_patch else ()):
            k = tuple(m * p for p in cfg.patch_size)
            setattr(self, f"patch_{name}_kernel", param(init(rngs.params(), (*k, cfg.in_channels, cfg.dim), cfg.dtype),
                                                      (None, None, None, None, EMBED)))
            setattr(self, f"patch_{name}_bias", param(jnp.zeros((cfg.dim,), cfg.dtype), (EMBED,)))

    def _history(self, name: str, latents: jax.Array, frames: jax.Array, grid_hw: Sequence[int]):
        """One history scale's tokens (B, n, dim) and RoPE (B, n, head_dim / 2) x2."""
        cfg, m = self.cfg, SCALES[name]
        patch = tuple(m * p for p in cfg.patch_size)
        latents = _pad_to(latents, patch, (2, 3, 4))
        x, _ = patch_tokens(latents, getattr(self, f"patch_{name}_kernel")[...],
                            getattr(self, f"patch_{name}_bias")[...], patch)
        cos, sin = rope_tables(cfg, frames, *grid_hw)
        if m > 1:
            cos, sin = _pool(cos, m), _pool(sin, m)
        b, p = cos.shape[0], cos.shape[-1]
        return x, (cos.reshape(b, -1, p), sin.reshape(b, -1, p))

    def embed_chunk(self, latents: jax.Array, timestep: jax.Array, context: jax.Array, **history: Any):
        """(x [history; chunk] (B, S, dim), aux): ``aux`` holds the text, the two modulations (B, 2, 6, dim), the
        chunk's time embedding (B, dim), RoPE (B, S, head_dim / 2) x2 and the history mask (S,)."""
        cfg = self.cfg
        x, grid = self.patch_embed(latents)
        b = latents.shape[0]
        frames = history.get("indices_hidden_states")
        frames = jnp.arange(grid[0])[None] if frames is None else frames
        frames = jnp.broadcast_to(frames, (b, frames.shape[-1]))
        cos, sin = rope_tables(cfg, frames, grid[1], grid[2])
        pieces = [(x, (cos.reshape(b, -1, cos.shape[-1]), sin.reshape(b, -1, sin.shape[-1])))]
        short = history.get("latents_history_short")
        # every scale's RoPE grid is the short history's patch grid (the chunk's own is coarser in the pyramid's
        # early stages)
        hist_hw = grid[1:] if short is None else (short.shape[3] // cfg.patch_size[1],
                                                   short.shape[4] // cfg.patch_size[2])
        for name in SCALES:  # each scale goes in front: [long; mid; short; chunk]
            lat, idx = history.get(f"latents_history_{name}"), history.get(f"indices_latents_history_{name}")
            if lat is not None and idx is not None:
                pieces.insert(0, self._history(name, lat, jnp.broadcast_to(idx, (b, idx.shape[-1])), hist_hw))
        x = jnp.concatenate([p[0] for p in pieces], axis=1).astype(cfg.residual_dtype)
        rope = tuple(constrain(jnp.concatenate([p[1][i] for p in pieces], axis=1), (BATCH, SEQ, None))
                     for i in range(2))
        n_hist = x.shape[1] - pieces[-1][0].shape[1]
        temb, tproj = self.time_embed(timestep)
        hist_t = jnp.zeros_like(timestep) if cfg.zero_history_timestep else timestep
        _, tproj_hist = self.time_embed(hist_t)
        aux = {"ctx": self.text_embed(context), "temb": temb, "tproj": jnp.stack([tproj_hist, tproj], axis=1),
               "rope": rope, "history": jnp.arange(x.shape[1]) < n_hist}
        return constrain(x, (BATCH, SEQ, EMBED)), aux

    block_groups = ("blocks",)

    def pre(self, latents: jax.Array, timestep: jax.Array, context: jax.Array, **history: Any
            ) -> tuple[jax.Array, dict]:
        return self.embed_chunk(latents, timestep, context, **history)

    @staticmethod
    def run_block_group(name: str, graphdef: nnx.GraphDef, state: nnx.State, x: jax.Array, aux: dict) -> jax.Array:
        if name != "blocks":
            raise KeyError(f"Helios has no block group {name!r}")
        return run_blocks(graphdef, state, x, aux["ctx"], aux["tproj"], aux["rope"], aux["history"])

    def post(self, x: jax.Array, aux: dict, latent_shape: Sequence[int]) -> jax.Array:
        """The chunk's tokens (the last ones) through the Wan head."""
        pt, ph, pw = self.cfg.patch_size
        f, hh, ww = latent_shape[-3:]
        grid = (f // pt, hh // ph, ww // pw)
        return self.head(x[:, -grid[0] * grid[1] * grid[2]:], aux["temb"], grid)

    def __call__(self, latents: jax.Array, timestep: jax.Array, context: jax.Array, **history: Any) -> jax.Array:
        x, aux = self.embed_chunk(latents, timestep, context, **history)
        graphdef, state = self.split_blocks()
        x = self.run_block_group("blocks", graphdef, state, x, aux)
        return self.post(x, aux, latents.shape)

