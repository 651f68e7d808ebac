"""The AnyFlow DiTs (diffusers ``AnyFlowTransformer3DModel`` and ``AnyFlowFARTransformer3DModel``): the core's Wan DiT
with what AnyFlow adds.

* The flow-map time embedding (both): the model is told where a step starts (``t``) and where it lands (``r``).
  ``t`` and ``delta`` (``r``, or ``t - r`` with ``deltatime_type="t-r"``) each go through their own sinusoid + MLP
  (``time_embedder`` in float32 as diffusers keeps it, ``delta_embedder`` in the weight dtype), mixed as
  ``(1 - g) temb + g demb`` with ``g = gate_value``; the mix is the head's modulation and, through ``time_proj``,
  every block's. Timesteps may be per sample (B,) or per latent frame (B, F) (conditioning frames at t = 0).
* FAR (causal, chunk by chunk, :mod:`.far`): a call runs one chunk's tokens against the run's KV cache
  (:mod:`vidax_core.causal`). A sampling call reads the cached past; a cache-writing call (all at t = 0) embeds the
  chunks that are left behind at a lower resolution (``far_patch_embedding``, kernel ``compressed_patch_size``)
  before the recent full-resolution ones, attends chunk-causally, and stores every layer's keys and values. RoPE
  positions are absolute latent frames, gathered from tables built once on the host in float64 (the compressed
  tokens' h / w tables average the full ones over the larger patch and renormalise, as the reference pools its
  complex frequencies), so one program serves every chunk of the same shape wherever it sits in the video.

The reference's attention in a FAR sampling call also sees the zero keys it pads its sequence with (to a multiple of
128 tokens, unmasked): :attr:`vidax_core.causal.kv.View.zero_keys` reproduces them (:mod:`.far` sets the count).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.causal import blocks as causal_blocks
from vidax_core.causal.kv import KVCache
from vidax_core.nn import rope as rope_lib
from vidax_core.nn.layers import Linear, param
from vidax_core.nn.timestep import timestep_embedding
from vidax_core.parallel.sharding import constrain
from vidax_core.wan_dit.model import BATCH, EMBED, SEQ, WanBlock, WanDiT, WanDiTConfig, patch_tokens, run_blocks

#: the diffusers class default of ``chunk_partition`` (the released checkpoints' 81 frames: 21 latent frames)
DEFAULT_CHUNK_PARTITION = (1, 3, 3, 3, 3, 3, 3, 2)
FAR_CLASSES = ("AnyFlowFARTransformer3DModel",)
BIDIRECTIONAL_CLASSES = ("AnyFlowTransformer3DModel",)
ORIGINAL_CLASS = "FAR_Wan_Transformer3DModel"  # the original release: one class, FAR when init_far_model


@dataclasses.dataclass(frozen=True)
class AnyFlowDiTConfig(WanDiTConfig):
    """Field names match diffusers' ``config.json``; ``far`` says which of the two models it is (from the class
    name, :func:`is_far`)."""

    gate_value: float = 0.25
    deltatime_type: str = "r"
    compressed_patch_size: tuple[int, int, int] = (1, 4, 4)
    full_chunk_limit: int = 3
    chunk_partition: tuple[int, ...] | None = None
    far: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "compressed_patch_size", tuple(int(p) for p in self.compressed_patch_size))
        if self.chunk_partition is not None:
            object.__setattr__(self, "chunk_partition", tuple(int(c) for c in self.chunk_partition))
        super().__post_init__()
        if self.deltatime_type not in ("r", "t-r"):
            raise ValueError(f"deltatime_type={self.deltatime_type!r}: AnyFlow defines 'r' and 't-r'")
        pt, ph, pw = self.patch_size
        if pt != 1 or ph != pw:
            raise ValueError(f"patch_size={list(self.patch_size)}: the AnyFlow reference unpacks (1, p, p) patches "
                             "only")
        if self.far:
            ct, ch, cw = self.compressed_patch_size
            if ct != 1 or ch % ph or cw % pw:
                raise ValueError(f"compressed_patch_size={list(self.compressed_patch_size)}: FAR takes (1, h, w) "
                                 "multiples of patch_size")
            if self.full_chunk_limit < 2:
                raise ValueError(f"full_chunk_limit={self.full_chunk_limit}: the FAR reference needs at least 2 "
                                 "(the chunk it makes and one full-resolution chunk before it)")
            if self.chunk_partition is not None and (not self.chunk_partition or min(self.chunk_partition) < 1):
                raise ValueError(f"chunk_partition={list(self.chunk_partition)} must be positive frame counts")

    @property
    def partition(self) -> tuple[int, ...]:
        """The default chunk partition (latent frames per chunk): the config's, else diffusers' class default."""
        return self.chunk_partition or DEFAULT_CHUNK_PARTITION


def is_far(config: dict) -> bool | None:
    """True for a FAR (causal) transformer config, False for the bidirectional one, None when the class is none
    of AnyFlow's."""
    name = config.get("_class_name")
    if name in FAR_CLASSES:
        return True
    if name in BIDIRECTIONAL_CLASSES:
        return False
    if name == ORIGINAL_CLASS:
        return bool(config.get("init_far_model"))
    return None


# --------------------------------------------------------------------------------------------------------------
# RoPE tables: absolute positions gathered in the program from float64 host tables
# --------------------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=16)
def axis_tables(head_dim: int, length: int, pool: tuple[int, int, int] = (1, 1, 1),
                theta: float = 10000.0) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """Per axis (t, h, w): float32 (cos, sin) of positions ``0..length // pool - 1``, shape (n, d_axis / 2). A pool
    > 1 averages the unit complex numbers over ``pool`` positions and renormalises (the reference's compressed-token
    frequencies); computed in float64 and rounded once."""
    out = []
    for dim, k in zip(rope_lib.split_axes_wan(head_dim), pool):
        ang = rope_lib.host_angles(length, rope_lib.inv_freq(dim, theta))
        c, s = np.cos(ang), np.sin(ang)
        if k > 1:
            n = length // k
            c, s = c[:n * k].reshape(n, k, -1).mean(1), s[:n * k].reshape(n, k, -1).mean(1)
            norm = np.sqrt(c * c + s * s)
            c, s = c / norm, s / norm
        out.append((c.astype(np.float32), s.astype(np.float32)))
    return tuple(out)


def token_rope(tables, frames: jax.Array, ph: int, pw: int) -> tuple[jax.Array, jax.Array]:
    """(cos, sin) of the tokens of latent frames ``frames`` (traced int32 positions) on a ``ph`` x ``pw`` grid,
    (F * ph * pw, head_dim / 2) in token order (f, h, w)."""
    (tc, ts), (hc, hs), (wc, ws) = tables
    f = frames.shape[0]

    def one(t, h, w):
        t = jnp.take(jnp.asarray(t), frames, axis=0)
        parts = [jnp.broadcast_to(t[:, None, None], (f, ph, pw, t.shape[-1])),
                 jnp.broadcast_to(jnp.asarray(h[:ph])[None, :, None], (f, ph, pw, h.shape[-1])),
                 jnp.broadcast_to(jnp.asarray(w[:pw])[None, None, :], (f, ph, pw, w.shape[-1]))]
        return jnp.concatenate(parts, axis=-1).reshape(f * ph * pw, -1)

    return one(tc, hc, wc), one(ts, hs, ws)


# --------------------------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------------------------


class AnyFlowBlock(WanBlock):
    """The Wan block whose 4-D modulation is per latent frame (AnyFlow's timesteps are per frame: a conditioning
    clip's frames at 0, a chunk's own), whatever the frame and token counts."""

    frame_modulation = True


class AnyFlowDiT(WanDiT):
    """``model(latents, timestep, context, next_timestep=None, *, kv_cache=None, frame_offset=None,
    compressed=None, compressed_offset=None)``.

    ``latents`` (B, C, F, H, W); ``timestep`` (B,) or (B, F); ``next_timestep`` (B,) or (B, F): the step's target
    ``r`` (None: ``timestep``, raw Euler). Bidirectional: returns the mean velocity (B, C, F, H, W). FAR: with
    ``kv_cache`` (:class:`vidax_core.causal.kv.KVCache`) and ``frame_offset`` ((B,) int32, the chunk's first
    latent frame) a sampling call returns the chunk's velocity; with a writing view it returns the cache, written
    from ``compressed`` (B, C, Fc, H, W) latents at ``compressed_offset`` (embedded by the FAR patch) followed by
    the full-resolution ``latents``.
    """

    block_type = AnyFlowBlock

    def __init__(self, cfg: AnyFlowDiTConfig, *, rngs: nnx.Rngs):
        super().__init__(cfg, rngs=rngs)
        dim, dt = cfg.dim, cfg.dtype
        self.delta_linear_1 = Linear(cfg.freq_dim, dim, (None, EMBED), dtype=dt, rngs=rngs)
        self.delta_linear_2 = Linear(dim, dim, (None, EMBED), dtype=dt, rngs=rngs)
        if cfg.far:
            ct, ch, cw = cfg.compressed_patch_size
            init = nnx.initializers.lecun_normal(in_axis=(0, 1, 2, 3), out_axis=4)
            self.far_patch_kernel = param(init(rngs.params(), (ct, ch, cw, cfg.in_channels, dim), dt),
                                          (None, None, None, None, EMBED))
            self.far_patch_bias = param(jnp.zeros((dim,), dt), (EMBED,))
        else:
            self.far_patch_kernel = self.far_patch_bias = None

    # -- embeddings ----------------------------------------------------------------------------------------------

    def flow_time_embed(self, timestep: jax.Array, next_timestep: jax.Array | None) -> tuple[jax.Array, jax.Array]:
        """(temb (..., dim), tproj (..., 6, dim)) of source ``timestep`` and target ``next_timestep`` (same shape
        after broadcasting; None: the source, as the reference's ``use_mean_velocity=False``)."""
        cfg = self.cfg
        t = timestep.astype(jnp.float32)
        r = t if next_timestep is None else jnp.broadcast_to(next_timestep.astype(jnp.float32), t.shape)
        delta = r if cfg.deltatime_type == "r" else t - r
        sinus = functools.partial(timestep_embedding, dim=cfg.freq_dim, flip_sin_to_cos=True, downscale_freq_shift=0)
        temb = self.time_linear_2(jax.nn.silu(self.time_linear_1(sinus(t)))).astype(cfg.dtype)
        demb = self.delta_linear_2(jax.nn.silu(self.delta_linear_1(sinus(delta).astype(cfg.dtype)))).astype(cfg.dtype)
        g = jnp.asarray(cfg.gate_value, cfg.dtype)
        mix = (1 - g) * temb + g * demb
        tproj = self.time_proj(jax.nn.silu(mix))
        return mix, tproj.reshape(*tproj.shape[:-1], 6, -1)

    def _embed(self, latents, timestep, context, next_timestep):
        """Tokens, embedded text, temb, tproj and the token grid of a call's full-resolution latents."""
        x, grid = self.patch_embed(latents)
        b = latents.shape[0]
        if timestep.ndim == 2 and timestep.shape != (b, grid[0]):
            raise ValueError(f"per-frame timesteps must be ({b}, {grid[0]}), got {tuple(timestep.shape)}")
        temb, tproj = self.flow_time_embed(timestep, next_timestep)
        return x, self.text_embed(context), temb, tproj, grid

    def far_embed(self, latents: jax.Array) -> tuple[jax.Array, tuple[int, int, int]]:
        """Compressed tokens of ``latents`` (B, C, F, H, W) through ``far_patch_embedding``: a height or width
        that is not a whole number of compressed patches loses its last rows (the reference's strided conv)."""
        cfg = self.cfg
        _, ch, cw = cfg.compressed_patch_size
        h, w = latents.shape[3] // ch * ch, latents.shape[4] // cw * cw
        x, grid = patch_tokens(latents[:, :, :, :h, :w], self.far_patch_kernel[...], self.far_patch_bias[...],
                               cfg.compressed_patch_size)
        return constrain(x.astype(cfg.residual_dtype), (BATCH, SEQ, EMBED)), grid

    def far_rope(self, grid: Sequence[int], first: jax.Array, compressed: bool) -> tuple[jax.Array, jax.Array]:
        """RoPE of a token grid whose frames start at latent frame ``first`` (traced)."""
        cfg = self.cfg
        pool = tuple(c // p for c, p in zip(cfg.compressed_patch_size, cfg.patch_size)) if compressed else (1, 1, 1)
        tables = axis_tables(cfg.attention_head_dim, cfg.rope_max_seq_len, pool)
        frames = first.astype(jnp.int32).reshape(-1)[0] + jnp.arange(grid[0], dtype=jnp.int32)
        cos, sin = token_rope(tables, frames, grid[1], grid[2])
        return constrain(cos, (SEQ, None)), constrain(sin, (SEQ, None))

    # -- the staged forward (offload: pre -> block groups -> post) -----------------------------------------------

    def pre(self, latents: jax.Array, timestep: jax.Array, context: jax.Array,
            next_timestep: jax.Array | None = None, *, kv_cache: KVCache | None = None,
            frame_offset: jax.Array | None = None, compressed: jax.Array | None = None,
            compressed_offset: jax.Array | None = None) -> tuple[Any, dict]:
        x, ctx, temb, tproj, grid = self._embed(latents, timestep, context, next_timestep)
        aux = {"ctx": ctx, "temb": temb, "tproj": tproj}
        if kv_cache is None:
            aux["rope"] = self.rope(grid)
            return x, aux
        if frame_offset is None:
            raise ValueError("a FAR call needs frame_offset (the chunk's first latent frame)")
        cos, sin = self.far_rope(grid, frame_offset, False)
        if compressed is not None and compressed.shape[2]:
            xc, cgrid = self.far_embed(compressed)
            ccos, csin = self.far_rope(cgrid, compressed_offset, True)
            x = jnp.concatenate([xc, x], axis=1)
            cos, sin = jnp.concatenate([ccos, cos], axis=0), jnp.concatenate([csin, sin], axis=0)
        if kv_cache.view.write:  # a cache-writing call's chunks need not split evenly over sp: padded
            x, (cos, sin), kv_cache = causal_blocks.pad_to_sp(x, (cos, sin), kv_cache)
        else:
            aux["kv"] = kv_cache
        aux["rope"] = (cos, sin)
        return causal_blocks.start(x, kv_cache), aux

    @staticmethod
    def run_block_group(name: str, graphdef: nnx.GraphDef, state: nnx.State, x: Any, aux: dict) -> Any:
        if name != "blocks":
            raise KeyError(f"AnyFlow has no block group {name!r}")
        if isinstance(x, causal_blocks.Carry):
            return causal_blocks.run_blocks(graphdef, state, x, aux["ctx"], aux["tproj"], aux["rope"], None,
                                            cache=aux.get("kv"))
        return run_blocks(graphdef, state, x, aux["ctx"], aux["tproj"], aux["rope"], None)

    def post(self, x: Any, aux: dict, latent_shape: Sequence[int]) -> Any:
        if isinstance(x, causal_blocks.Carry):
            if x.cache is not None:  # a cache-writing call: its result is the cache
                return x.cache
            x = x.h
        return super().post(x, aux, latent_shape)

    def __call__(self, latents: jax.Array, timestep: jax.Array, context: jax.Array,
                 next_timestep: jax.Array | None = None, **kwargs: Any) -> Any:
        x, aux = self.pre(latents, timestep, context, next_timestep, **kwargs)
        graphdef, state = self.split_blocks()
        x = self.run_block_group("blocks", graphdef, state, x, aux)
        return self.post(x, aux, latents.shape)
