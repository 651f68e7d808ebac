"""The LTX-2.5 diffusion video decoder (diffusers ``LTX2VideoDiffusionDecoderModel``) in Flax NNX.

A decoder that is itself a small diffusion model. Stages 1-4 turn the latents (B, 128, F, h, w) into a channels-last
context volume: a linear ``conv_in``, then per stage a stack of pre-norm neighborhood-attention blocks
(:class:`NABlock`) and a pixel-shuffle upsampler (:class:`Upsampler`; a temporal stride of 2 drops the duplicate
leading frame, the causal frame mapping). The last latent frame is first repeated ``2 * (kt // 2)`` times and those
ghost frames are cropped off the context (``x temporal_compression_ratio``) before stage 5, which moves the window's
inward shift at the grid end past the frames that are kept, as the reference does for NATTEN. Stage 5 denoises
patchified pixels (``patch_size``) with AdaLN-modulated neighborhood-attention blocks (:class:`DiffusionBlock`) that
add a projection of the context at each block; with ``model_output_type="x0"`` and one step (how LTX-2.5 ships)
its prediction from pure noise is the output, more steps are Euler updates over ``linspace(1, 1/N, N)``.

Attention: q/k RMS-normed per head, q scaled by ``1/sqrt(head_dim)``, both rotated by an absolute 3-D RoPE over the
token grid (head_dim split into t, h, w chunks, interleaved pairs), then the core's windowed attention
(:func:`vidax_core.attention.neighborhood.neighborhood_attention`, scale 1). The block's norm (and modulation), the
projections, the RoPE and the SwiGLU MLPs (hidden ``ceil16(4 dim)``) are applied in token chunks
(:func:`tokenwise`), so a 3M-token grid never holds a float32 or hidden-width activation whole: a block keeps its
input, q, k, v and the attention output (the context too in stage 5), each at the activation dtype and width.

Parameters carry logical axes (``heads``/``mlp`` for tensor parallelism); identical blocks of a stage are one
stacked tree run with ``lax.scan``. Weight names: diffusers' (:data:`DECODER_RULES`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.attention.neighborhood import neighborhood_attention
from vidax_core.io.arch_base import CheckedConfig
from vidax_core.io.convert import KeyRule
from vidax_core.io.diffusers_rules import linear_rules, norm_rules
from vidax_core.nn.feedforward import GatedFeedForward
from vidax_core.nn.layers import Linear, param, scan_blocks, stacked
from vidax_core.nn.norms import RMSNorm, rms_norm
from vidax_core.nn.timestep import TimestepEmbedding, timestep_embedding
from vidax_core.parallel.sharding import active, constrain

EMBED, HEADS, MLP = "embed", "heads", "mlp"

EPS = 1e-6
MOD_PARAMS = 7  # the shared AdaLN's chunks; blocks read 0, 1 (attention scale/shift) and 3, 4 (MLP scale/shift)
TOKEN_CHUNK = 16384  # tokens per chunk of the token-wise layers (the reference's SwiGLU tile)

Kernel = tuple[int, int, int]


@dataclasses.dataclass(frozen=True)
class LTX2DiffusionDecoderConfig(CheckedConfig):
    """diffusers ``LTX2VideoDiffusionDecoderModel`` config.json fields with the reference's defaults; ``dtype`` is
    the weight and activation dtype."""

    label: ClassVar[str] = "the LTX-2 diffusion decoder config"

    out_channels: int = 3
    latent_channels: int = 128
    patch_size: int = 4
    scaling_factor: float = 1.0
    decoder_head_dim: int = 64
    decoder_stage_channels: tuple[int, ...] = (2048, 1024, 512, 512, 256)
    decoder_stage_depths: tuple[int, ...] = (4, 6, 4, 2, 8)
    decoder_stage_kernels: tuple[Kernel, ...] = ((3, 7, 7), (3, 7, 7), (3, 5, 5), (3, 5, 5))
    decoder_upsample_strides: tuple[Kernel, ...] = ((1, 2, 2), (2, 1, 1), (2, 2, 2), (2, 2, 2))
    decoder_upsample_channel_reductions: tuple[int, ...] = (2, 2, 1, 2)
    decoder_stage5_kernel: Kernel = (11, 11, 11)
    decoder_t_emb_dim: int = 384
    decoder_timestep_scale_multiplier: float = 1000.0
    decoder_model_output_type: str = "x0"
    decoder_num_inference_steps: int = 1
    spatial_compression_ratio: int = 32
    temporal_compression_ratio: int = 8
    dtype: Any = jnp.float32

    def problems(self) -> list[str]:
        out = []
        ch, depths = self.decoder_stage_channels, self.decoder_stage_depths
        kernels, strides = self.decoder_stage_kernels, self.decoder_upsample_strides
        red = self.decoder_upsample_channel_reductions
        n = len(ch) - 1
        if n < 1 or not len(depths) == len(ch) or not len(kernels) == len(strides) == len(red) == n:
            out.append(f"decoder_stage_channels ({len(ch)}) and decoder_stage_depths ({len(depths)}) need one entry "
                       f"per stage and the kernels, strides and reductions ({len(kernels)}, {len(strides)}, "
                       f"{len(red)}) one per upsampling stage")
            return out
        for i in range(n):
            if ch[i] % red[i] or ch[i + 1] != ch[i] // red[i]:
                out.append(f"decoder_stage_channels[{i + 1}] must be decoder_stage_channels[{i}] // "
                           f"decoder_upsample_channel_reductions[{i}] = {ch[i] // red[i]}, got {ch[i + 1]}")
        if any(s[0] not in (1, 2) for s in strides):
            out.append(f"decoder_upsample_strides must have a temporal stride of 1 or 2, got {strides}")
        hd = self.decoder_head_dim
        if hd % 8:
            out.append(f"decoder_head_dim must be a multiple of 8 (the 3-D RoPE), got {hd}")
        if any(c % hd for c in ch):
            out.append(f"every decoder_stage_channels entry must be a multiple of decoder_head_dim {hd}, got {ch}")
        if self.decoder_model_output_type not in ("x0", "v"):
            out.append(f"decoder_model_output_type must be x0 or v, got {self.decoder_model_output_type!r}")
        if int(np.prod([s[0] for s in strides])) != self.temporal_compression_ratio:
            out.append(f"the temporal strides {[s[0] for s in strides]} must multiply to temporal_compression_ratio "
                       f"{self.temporal_compression_ratio}")
        if any(s[1] != s[2] for s in strides) or self.spatial_scale != self.spatial_compression_ratio:
            out.append(f"the spatial strides {[s[1:] for s in strides]} times patch_size {self.patch_size} must "
                       f"equal spatial_compression_ratio {self.spatial_compression_ratio} on both axes")
        if any(k < 1 for k in (*sum(kernels, ()), *self.decoder_stage5_kernel)):
            out.append("neighborhood kernel sizes must be positive")
        return out

    @property
    def trailing_pad(self) -> int:
        """Latent frames repeated at the end before stage 1 (the ghost frames of the docstring)."""
        return (self.decoder_stage_kernels[0][0] // 2) * 2

    @property
    def spatial_scale(self) -> int:
        """Output pixels per latent pixel: the upsamplers' spatial strides times the patch size."""
        return int(np.prod([s[1] for s in self.decoder_upsample_strides])) * self.patch_size

    def grids(self, frames: int, height: int, width: int) -> list[Kernel]:
        """(T, H, W) token grid of each stage (stage 5 last) for latents of ``frames x height x width``."""
        t, h, w = frames + self.trailing_pad, height, width
        out = []
        for s in self.decoder_upsample_strides:
            out.append((t, h, w))
            t, h, w = t * s[0] - (1 if s[0] == 2 else 0), h * s[1], w * s[2]
        out.append((t - self.trailing_pad * self.temporal_compression_ratio, h, w))
        return out

    def grid_problems(self, frames: int, height: int, width: int) -> list[str]:
        """Every stage's grid must hold its kernel (the reference refuses smaller grids)."""
        kernels = (*self.decoder_stage_kernels, self.decoder_stage5_kernel)
        bad = [(i + 1, g, k) for i, (g, k) in enumerate(zip(self.grids(frames, height, width), kernels))
               if any(n < kk for n, kk in zip(g, k))]
        return [f"the diffusion decoder's stage {i} works on a {g} grid, smaller than its {k} neighborhood"
                for i, g, k in bad]


def rope_split(head_dim: int) -> tuple[int, int, int]:
    """head_dim channels per axis (t, h, w): a quarter (even) to t, the rest halved (each even)."""
    dt = (head_dim // 4) // 2 * 2
    dhw = (head_dim - dt) // 2
    if dhw % 2:
        dt -= 2
        dhw = (head_dim - dt) // 2
    return dt, dhw, dhw


def rope_inv_freqs(head_dim: int, base: float = 10000.0) -> list[np.ndarray]:
    """Per axis (t, h, w), the float32 frequencies ``base^(-2i/dim)`` (built in float64, cast once, as the
    reference)."""
    return [(1.0 / base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)).astype(np.float32)
            for dim in rope_split(head_dim)]


def apply_rope(x: jax.Array, coords: Sequence[jax.Array], head_dim: int) -> jax.Array:
    """Rotate (B, S, heads, head_dim) whose tokens sit at integer ``coords`` (t, h, w), each (S,), by the 3-D
    RoPE: each axis's chunk of head_dim in interleaved (even, odd) pairs, in float32."""
    parts, start = [], 0
    for dim, inv, pos in zip(rope_split(head_dim), rope_inv_freqs(head_dim), coords):
        chunk = x[..., start:start + dim].astype(jnp.float32)
        start += dim
        angle = (pos.astype(jnp.float32)[:, None] * jnp.asarray(inv)[None, :])[None, :, None, :]
        cos, sin = jnp.cos(angle), jnp.sin(angle)
        pairs = chunk.reshape(*chunk.shape[:-1], dim // 2, 2)
        even, odd = pairs[..., 0], pairs[..., 1]
        parts.append(jnp.stack([even * cos - odd * sin, even * sin + odd * cos], axis=-1).reshape(chunk.shape))
    return jnp.concatenate(parts, axis=-1).astype(x.dtype)


def tokenwise(fn, *xs: jax.Array, chunk: int | None = None, with_index: bool = False, residual: bool = False):
    """``fn`` over the tokens of channels-last (B, ..., C) arrays of one grid, ``chunk`` tokens at a time: ``fn``
    maps (B, S, C) chunks of each input -> (B, S, C') or a tuple of such (with ``with_index`` it also gets the
    chunk's flat token indices (S,) int32). A ``fori_loop`` slices the inputs and writes each chunk's result into
    the output in place, the tokens past the last whole chunk in one more call; with ``residual`` the result is
    added into the first input (``x + fn(x, ...)``) and no new array is made. So nothing but the outputs exists at
    full size (the reference tiles its SwiGLU the same way)."""
    chunk = chunk or TOKEN_CHUNK
    b = xs[0].shape[0]
    grid = xs[0].shape[1:-1]
    s = int(np.prod(grid))
    flats = [x.reshape(b, s, x.shape[-1]) for x in xs]
    zero = jnp.int32(0)

    def call(start, size, carry=None):  # a residual reads its first input from the carry it updates in place
        sources = flats if carry is None else [carry, *flats[1:]]
        parts = [jax.lax.dynamic_slice(f, (zero, start, zero), (b, size, f.shape[-1])) for f in sources]
        index = start + jnp.arange(size, dtype=jnp.int32)
        y = fn(*parts, index) if with_index else fn(*parts)
        return (parts[0] + y).astype(xs[0].dtype) if residual else y

    def write(outs, ys, start):
        return jax.tree.map(lambda o, y: jax.lax.dynamic_update_slice(o, y.astype(o.dtype), (zero, start, zero)),
                            outs, ys)

    size = min(chunk, s)
    n, rest = divmod(s, size)
    if n == 1 and rest == 0:
        outs = call(zero, s)
    else:
        if residual:
            outs = flats[0]
        else:
            shapes = jax.eval_shape(lambda: call(zero, size))
            outs = jax.tree.map(lambda sh: jnp.zeros((b, s, sh.shape[-1]), sh.dtype), shapes)
        own = (lambda o: o) if residual else (lambda o: None)
        outs = jax.lax.fori_loop(0, n, lambda i, o: write(o, call(i * size, size, own(o)), i * size), outs)
        if rest:
            outs = write(outs, call(jnp.int32(n * size), rest, own(outs)), jnp.int32(n * size))
    return jax.tree.map(lambda y: y.reshape(b, *grid, y.shape[-1]), outs)


def grid_coords(index: jax.Array, grid: Sequence[int]) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(t, h, w) of flat token indices on a (T, H, W) grid."""
    _, h, w = grid
    return index // (h * w), (index // w) % h, index % w


class NeighborhoodAttention(nnx.Module):
    def __init__(self, dim: int, head_dim: int, kernel: Kernel, *, dtype: Any, rngs: nnx.Rngs):
        self.heads, self.head_dim, self.kernel = dim // head_dim, head_dim, tuple(kernel)
        self.to_q = Linear(dim, dim, (EMBED, HEADS), dtype=dtype, rngs=rngs)
        self.to_k = Linear(dim, dim, (EMBED, HEADS), dtype=dtype, rngs=rngs)
        self.to_v = Linear(dim, dim, (EMBED, HEADS), dtype=dtype, rngs=rngs)
        self.to_out = Linear(dim, dim, (HEADS, EMBED), dtype=dtype, rngs=rngs)
        self.norm_q = RMSNorm(head_dim, eps=EPS)
        self.norm_k = RMSNorm(head_dim, eps=EPS)

    def __call__(self, x: jax.Array, pre=None) -> jax.Array:
        """x (B, T, H, W, C) -> ``x + attention(pre(x))`` (the block's residual); ``pre`` (the block's norm, and
        modulation) is applied per token chunk before the projections, so neither it nor the float32 RoPE ever holds
        the whole grid."""
        heads, hd, grid = self.heads, self.head_dim, x.shape[1:4]

        def qkv(t, index):
            t = pre(t) if pre is not None else t
            b, s = t.shape[:2]
            q = self.norm_q(self.to_q(t).reshape(b, s, heads, hd)) * jnp.asarray(hd**-0.5, t.dtype)
            k = self.norm_k(self.to_k(t).reshape(b, s, heads, hd))
            coords = grid_coords(index, grid)
            q, k = apply_rope(q, coords, hd), apply_rope(k, coords, hd)
            return q.reshape(b, s, heads * hd), k.reshape(b, s, heads * hd), self.to_v(t)

        q, k, v = tokenwise(qkv, x, with_index=True)
        o = neighborhood_attention(q, k, v, self.kernel, heads=heads, scale=1.0)
        return tokenwise(lambda r, t: self.to_out(t), x, o, residual=True)


def mlp_hidden(dim: int, ratio: float = 4.0) -> int:
    return (int(dim * ratio) + 15) // 16 * 16


class NABlock(nnx.Module):
    """Stages 1-4: ``x + attn(norm1 x)``, then ``x + mlp(norm2 x)`` (RMS norms with a gain)."""

    def __init__(self, dim: int, head_dim: int, kernel: Kernel, *, dtype: Any, rngs: nnx.Rngs):
        self.norm1 = RMSNorm(dim, eps=EPS)
        self.attn = NeighborhoodAttention(dim, head_dim, kernel, dtype=dtype, rngs=rngs)
        self.norm2 = RMSNorm(dim, eps=EPS)
        self.mlp = GatedFeedForward(dim, mlp_hidden(dim), dtype=dtype, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = self.attn(x, pre=self.norm1)
        return tokenwise(lambda t: self.mlp(self.norm2(t), seq=None), x, residual=True)


class DiffusionBlock(nnx.Module):
    """Stage 5: the context added through ``context_proj``, then attention and MLP on RMS-normed inputs scaled and
    shifted by the shared AdaLN plus the block's ``scale_shift_table``; residuals ungated."""

    def __init__(self, dim: int, head_dim: int, kernel: Kernel, context: int, *, dtype: Any, rngs: nnx.Rngs):
        self.context_proj = Linear(context, dim, (EMBED, EMBED), dtype=dtype, rngs=rngs)
        self.scale_shift_table = param(jnp.zeros((MOD_PARAMS, dim), dtype), (None, EMBED))
        self.norm1 = RMSNorm(dim, eps=EPS)
        self.attn = NeighborhoodAttention(dim, head_dim, kernel, dtype=dtype, rngs=rngs)
        self.norm2 = RMSNorm(dim, eps=EPS)
        self.mlp = GatedFeedForward(dim, mlp_hidden(dim), dtype=dtype, rngs=rngs)

    def __call__(self, x: jax.Array, context: jax.Array, modulation: jax.Array) -> jax.Array:
        """``modulation`` (B, 7, C): the shared AdaLN's chunks, each applied per batch entry to (B, S, C) chunks."""
        m = (modulation + self.scale_shift_table[...][None].astype(modulation.dtype))[:, :, None, :]
        x = tokenwise(lambda t, c: self.context_proj(c), x, context, residual=True)
        x = self.attn(x, pre=lambda t: self.norm1(t) * (1 + m[:, 0]) + m[:, 1])
        return tokenwise(lambda t: self.mlp(self.norm2(t) * (1 + m[:, 3]) + m[:, 4], seq=None), x, residual=True)


class Upsampler(nnx.Module):
    """Linear to ``prod(stride) * out`` channels, then a channels-last pixel shuffle (channel-major packing)."""

    def __init__(self, dim: int, stride: Kernel, reduction: int, *, dtype: Any, rngs: nnx.Rngs):
        self.stride = tuple(stride)
        total = int(np.prod(self.stride)) * dim // reduction
        self.out = total // int(np.prod(self.stride))
        self.proj = Linear(dim, total, (EMBED, None), dtype=dtype, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        b, t, h, w, _ = x.shape
        st, sh, sw = self.stride
        y = tokenwise(lambda v: self.proj(v), x).reshape(b, t, h, w, self.out, st, sh, sw)
        y = y.transpose(0, 1, 5, 2, 6, 3, 7, 4).reshape(b, t * st, h * sh, w * sw, self.out)
        return y[:, 1:] if st == 2 else y


def patchify(x: jax.Array, p: int) -> jax.Array:
    """Pixels (B, C, F, H, W) -> channels-last tokens (B, F, H/p, W/p, C p p), channels packed (c, w off, h off)."""
    b, c, f, h, w = x.shape
    y = x.reshape(b, c, f, h // p, p, w // p, p).transpose(0, 2, 3, 5, 1, 6, 4)
    return y.reshape(b, f, h // p, w // p, c * p * p)


def unpatchify(y: jax.Array, p: int, channels: int) -> jax.Array:
    """The inverse of :func:`patchify`: (B, F, h, w, C p p) -> (B, C, F, h p, w p)."""
    b, f, h, w, _ = y.shape
    x = y.reshape(b, f, h, w, channels, p, p).transpose(0, 4, 1, 2, 6, 3, 5)
    return x.reshape(b, channels, f, h * p, w * p)


class LTX2DiffusionDecoder(nnx.Module):
    """The decoder's parameters; the stages run through :func:`run_stage`, :func:`diffusion_step` (jit units)."""

    def __init__(self, cfg: LTX2DiffusionDecoderConfig, *, rngs: nnx.Rngs | None = None):
        cfg.check_supported()
        rngs = rngs or nnx.Rngs(0)
        self.cfg = cfg
        dt, hd, ch = jnp.dtype(cfg.dtype), cfg.decoder_head_dim, cfg.decoder_stage_channels
        self.conv_in = Linear(cfg.latent_channels, ch[0], (None, EMBED), dtype=dt, rngs=rngs)
        self.det_stages = nnx.List([
            stacked(lambda r, c=c, k=k: NABlock(c, hd, k, dtype=dt, rngs=r), depth, rngs)
            for c, k, depth in zip(ch, cfg.decoder_stage_kernels, cfg.decoder_stage_depths)])
        self.upsamples = nnx.List([Upsampler(c, s, r, dtype=dt, rngs=rngs) for c, s, r in
                                   zip(ch, cfg.decoder_upsample_strides, cfg.decoder_upsample_channel_reductions)])
        self.t_embedder = TimestepEmbedding(256, cfg.decoder_t_emb_dim, dtype=dt, rngs=rngs)
        c5, pixels = ch[-1], cfg.out_channels * cfg.patch_size**2
        self.conv_in_x_t = Linear(pixels, c5, (None, EMBED), dtype=dt, rngs=rngs)
        self.shared_adaln = Linear(cfg.decoder_t_emb_dim, MOD_PARAMS * c5, (None, None), dtype=dt, rngs=rngs)
        self.diff_blocks = stacked(
            lambda r: DiffusionBlock(c5, hd, cfg.decoder_stage5_kernel, c5, dtype=dt, rngs=r),
            cfg.decoder_stage_depths[-1], rngs)
        self.norm_out = RMSNorm(c5, eps=EPS)
        self.conv_out = Linear(c5, pixels, (EMBED, None), dtype=dt, rngs=rngs)


def split_grid(x: jax.Array) -> jax.Array:
    """Pin a channels-last (B, T, H, W, C) volume's layout under an active mesh: one grid axis over ``seq`` (sp), the
    first of H, W, T that ``sp`` divides (an uneven split would leave the unit's output whole on every device)."""
    ctx = active()
    n = ctx.size("seq") if ctx is not None else 1
    for axis in (2, 3, 1):
        if x.shape[axis] % n == 0:
            return constrain(x, tuple("seq" if a == axis else "batch" if a == 0 else None for a in range(5)))
    return x


def unit_parts(model: LTX2DiffusionDecoder, unit: int) -> tuple:
    """The modules compiled unit ``unit`` reads: stage ``unit`` (0-based; stage 0 with ``conv_in``) or, for
    ``unit == len(strides)``, the stage-5 step's. A unit's parameters can be placed (or streamed) on their own."""
    m = model
    if unit == len(model.cfg.decoder_upsample_strides):
        return (m.t_embedder, m.conv_in_x_t, m.shared_adaln, m.diff_blocks, m.norm_out, m.conv_out)
    return ((m.conv_in,) if unit == 0 else ()) + (m.det_stages[unit], m.upsamples[unit])


def stage(cfg: LTX2DiffusionDecoderConfig, parts: tuple, index: int, x: jax.Array) -> jax.Array:
    """Deterministic stage ``index`` (0-based; ``parts`` from :func:`unit_parts`) on channels-last features: its
    blocks, then its upsampler. Stage 0 takes the raw latents (B, C, F, h, w) and applies the trailing pad and
    ``conv_in`` first; the last stage crops the ghost frames. One grid axis is split over ``seq`` (sp)."""
    if index == 0:
        conv_in, *parts = parts
        pad = cfg.trailing_pad
        if pad:
            x = jnp.concatenate([x, jnp.repeat(x[:, :, -1:], pad, axis=2)], axis=2)
        x = tokenwise(lambda t: conv_in(t), jnp.moveaxis(x.astype(jnp.dtype(cfg.dtype)), 1, -1))
    blocks, upsampler = parts
    graphdef, state = nnx.split(blocks)
    x = scan_blocks(graphdef, state, split_grid(x))
    x = upsampler(x)
    if index == len(cfg.decoder_upsample_strides) - 1 and cfg.trailing_pad:
        x = x[:, : x.shape[1] - cfg.trailing_pad * cfg.temporal_compression_ratio]
    return split_grid(x)


def diffusion_step(cfg: LTX2DiffusionDecoderConfig, parts: tuple, context: jax.Array, x_t: jax.Array,
                   t: jax.Array) -> jax.Array:
    """One stage-5 prediction (``parts`` from :func:`unit_parts`): noisy pixels (B, C, F, H, W) at time ``t`` (B,)
    -> pixels (B, C, F, H, W)."""
    t_embedder, conv_in_x_t, shared_adaln, diff_blocks, norm_out, conv_out = parts
    dt = jnp.dtype(cfg.dtype)
    emb = timestep_embedding(cfg.decoder_timestep_scale_multiplier * t.astype(jnp.float32), 256,
                             flip_sin_to_cos=True, downscale_freq_shift=0)
    emb = t_embedder(emb.astype(dt)).astype(dt)
    modulation = shared_adaln(jax.nn.silu(emb)).reshape(t.shape[0], MOD_PARAMS, -1)
    h = tokenwise(lambda v: conv_in_x_t(v), patchify(x_t.astype(dt), cfg.patch_size))
    graphdef, state = nnx.split(diff_blocks)
    h = scan_blocks(graphdef, state, split_grid(h), split_grid(context), modulation)
    h = tokenwise(lambda v: conv_out(rms_norm(v, norm_out.scale[...], eps=EPS)), split_grid(h))
    return unpatchify(h, cfg.patch_size, cfg.out_channels)


def pixel_shape(cfg: LTX2DiffusionDecoderConfig, batch: int, context_grid: Sequence[int]) -> tuple[int, ...]:
    """Shape of the pixels stage 5 denoises (the noise draw): (B, C, T5, H5 p, W5 p)."""
    t, h, w = context_grid
    return (batch, cfg.out_channels, t, h * cfg.patch_size, w * cfg.patch_size)


#: diffusers ``LTX2VideoDiffusionDecoderModel`` names -> :class:`LTX2DiffusionDecoder` paths. The model's
#: ``latents_mean`` / ``latents_std`` buffers are read separately (:func:`vidax_ltx.ltx2_diffusion_decode.load`).
def _block_rules(src: str, dst: str, layer: int) -> list[KeyRule]:
    rules = [*norm_rules(rf"{src}\.norm1", f"{dst}/norm1", layer, bias=False),
             *norm_rules(rf"{src}\.norm2", f"{dst}/norm2", layer, bias=False),
             *norm_rules(rf"{src}\.attn\.norm_q", f"{dst}/attn/norm_q", layer, bias=False),
             *norm_rules(rf"{src}\.attn\.norm_k", f"{dst}/attn/norm_k", layer, bias=False),
             *linear_rules(rf"{src}\.attn\.to_out\.0", f"{dst}/attn/to_out", layer)]
    for proj in ("to_q", "to_k", "to_v"):
        rules += linear_rules(rf"{src}\.attn\.{proj}", f"{dst}/attn/{proj}", layer)
    for ours, theirs in (("gate_proj", "w_gate"), ("up_proj", "w_up"), ("down_proj", "w_down")):
        rules += linear_rules(rf"{src}\.mlp\.{theirs}", f"{dst}/mlp/{ours}", layer, bias=False)
    return rules


DECODER_RULES: list[KeyRule] = [
    *linear_rules(r"decoder\.(conv_in|conv_in_x_t|conv_out)", "{1}"),
    *_block_rules(r"decoder\.det_stages\.(\d+)\.(\d+)", "det_stages/{1}", 2),
    *linear_rules(r"decoder\.upsamples\.(\d+)\.proj", "upsamples/{1}/proj"),
    *linear_rules(r"decoder\.t_embedder\.timestep_embedder\.(linear_1|linear_2)", "t_embedder/{1}"),
    *linear_rules(r"decoder\.shared_adaln\.proj", "shared_adaln"),
    *_block_rules(r"decoder\.diff_blocks\.(\d+)", "diff_blocks", 1),
    *linear_rules(r"decoder\.diff_blocks\.(\d+)\.context_proj", "diff_blocks/context_proj", 1),
    KeyRule(r"decoder\.diff_blocks\.(\d+)\.scale_shift_table", "diff_blocks/scale_shift_table", None, 1),
    *norm_rules(r"decoder\.norm_out", "norm_out", bias=False),
]
#: Buffers of the reference model that are not parameters here.
DECODER_IGNORED = (r"latents_mean", r"latents_std")

__all__ = ["DECODER_IGNORED", "DECODER_RULES", "LTX2DiffusionDecoder", "LTX2DiffusionDecoderConfig",
           "diffusion_step", "patchify", "pixel_shape", "stage", "tokenwise", "unit_parts", "unpatchify"]
