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
(:func:`vidax_core.attention.neighborhood.neighborhood_attention`, scale 1). The SwiGLU MLPs (hidden
``ceil16(4 dim)``) and the projections are applied in token chunks (:func:`tokenwise`), so a 3M-token grid never
holds a hidden-width activation whole.

Parameters carry logical axes (``heads``/``mlp`` for tensor parallelism); identical blocks of a stage are one
stacked tree run with ``lax.scan``. Weight names: diffusers' (:data:`DECODER_RULES`).
"""

from __future__ import annotations

import dataclasses
import math
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


def rope_angles(grid: Sequence[int], head_dim: int, base: float = 10000.0) -> list[np.ndarray]:
    """Per axis, the (n, dim/2) float32 angles ``position * base^(-2i/dim)`` (frequencies built in float64, cast
    once, as the reference)."""
    out = []
    for n, dim in zip(grid, rope_split(head_dim)):
        inv = (1.0 / base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)).astype(np.float32)
        out.append(np.arange(n, dtype=np.float32)[:, None] * inv[None, :])
    return out


def apply_rope(x: jax.Array, angles: Sequence[Any], head_dim: int) -> jax.Array:
    """Rotate (B, T, H, W, heads, head_dim) by the 3-D RoPE: each axis chunk in interleaved (even, odd) pairs."""
    parts, start = [], 0
    for axis, (dim, ang) in enumerate(zip(rope_split(head_dim), angles)):
        chunk = x[..., start:start + dim].astype(jnp.float32)
        start += dim
        shape = [1, 1, 1, 1, 1, dim // 2]
        shape[axis + 1] = ang.shape[0]
        cos, sin = jnp.cos(ang).reshape(shape), jnp.sin(ang).reshape(shape)
        pairs = chunk.reshape(*chunk.shape[:-1], dim // 2, 2)
        even, odd = pairs[..., 0], pairs[..., 1]
        rotated = jnp.stack([even * cos - odd * sin, even * sin + odd * cos], axis=-1)
        parts.append(rotated.reshape(chunk.shape))
    return jnp.concatenate(parts, axis=-1).astype(x.dtype)


def tokenwise(fn, x: jax.Array, chunk: int = TOKEN_CHUNK) -> jax.Array:
    """``fn`` over the tokens of a channels-last (B, ..., C) array, ``chunk`` tokens at a time (``lax.map``); ``fn``
    maps (B, S, C) -> (B, S, C')."""
    b, c = x.shape[0], x.shape[-1]
    grid = x.shape[1:-1]
    s = int(np.prod(grid))
    flat = x.reshape(b, s, c)
    if s <= chunk:
        y = fn(flat)
        return y.reshape(b, *grid, y.shape[-1])
    n = -(-s // chunk)
    pad = n * chunk - s
    flat = jnp.pad(flat, ((0, 0), (0, pad), (0, 0))) if pad else flat
    y = jax.lax.map(fn, jnp.moveaxis(flat.reshape(b, n, chunk, c), 1, 0))  # (n, B, chunk, C')
    y = jnp.moveaxis(y, 0, 1).reshape(b, n * chunk, y.shape[-1])[:, :s]
    return y.reshape(b, *grid, y.shape[-1])


class NeighborhoodAttention(nnx.Module):
    def __init__(self, dim: int, head_dim: int, kernel: Kernel, *, dtype: Any, rngs: nnx.Rngs):
        self.heads, self.head_dim, self.kernel = dim // head_dim, head_dim, tuple(kernel)
        self.to_q = Linear(dim, dim, (EMBED, HEADS), dtype=dtype, rngs=rngs)
        self.to_k = Linear(dim, dim, (EMBED, HEADS), dtype=dtype, rngs=rngs)
        self.to_v = Linear(dim, dim, (EMBED, HEADS), dtype=dtype, rngs=rngs)
        self.to_out = Linear(dim, dim, (HEADS, EMBED), dtype=dtype, rngs=rngs)
        self.norm_q = RMSNorm(head_dim, eps=EPS)
        self.norm_k = RMSNorm(head_dim, eps=EPS)

    def __call__(self, x: jax.Array, angles: Sequence[Any]) -> jax.Array:
        """x (B, T, H, W, C) -> (B, T, H, W, C)."""
        heads, hd = self.heads, self.head_dim

        def split(y):
            return y.reshape(*y.shape[:-1], heads, hd)

        q = tokenwise(lambda t: self.to_q(t), x)
        k = tokenwise(lambda t: self.to_k(t), x)
        v = tokenwise(lambda t: self.to_v(t), x)
        q = self.norm_q(split(q)) * jnp.asarray(hd**-0.5, q.dtype)
        k = self.norm_k(split(k))
        q, k = apply_rope(q, angles, hd), apply_rope(k, angles, hd)
        o = neighborhood_attention(q, k, split(v), self.kernel, scale=1.0)
        return tokenwise(lambda t: self.to_out(t), o.reshape(x.shape[:-1] + (heads * hd,)))


def mlp_hidden(dim: int, ratio: float = 4.0) -> int:
    return (int(dim * ratio) + 15) // 16 * 16


class NABlock(nnx.Module):
    """Stages 1-4: ``x + attn(norm1 x)``, then ``x + mlp(norm2 x)`` (RMS norms with a gain)."""

    def __init__(self, dim: int, head_dim: int, kernel: Kernel, *, dtype: Any, rngs: nnx.Rngs):
        self.norm1 = RMSNorm(dim, eps=EPS)
        self.attn = NeighborhoodAttention(dim, head_dim, kernel, dtype=dtype, rngs=rngs)
        self.norm2 = RMSNorm(dim, eps=EPS)
        self.mlp = GatedFeedForward(dim, mlp_hidden(dim), dtype=dtype, rngs=rngs)

    def __call__(self, x: jax.Array, angles: Sequence[Any]) -> jax.Array:
        x = x + self.attn(self.norm1(x), angles)
        return x + tokenwise(lambda t: self.mlp(self.norm2(t), seq=None), x)


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

    def __call__(self, x: jax.Array, context: jax.Array, modulation: jax.Array, angles: Sequence[Any]) -> jax.Array:
        """``modulation`` (B, 7, C): the shared AdaLN's chunks."""
        m = (modulation + self.scale_shift_table[...][None].astype(modulation.dtype))[:, :, None, None, None, :]
        x = x + tokenwise(lambda t: self.context_proj(t), context)
        x = x + self.attn(self.norm1(x) * (1 + m[:, 0]) + m[:, 1], angles)

        def mlp(t):  # modulation per batch entry: (B, 1, C) against (B, S, C)
            return self.mlp(self.norm2(t) * (1 + m[:, 3, 0, 0]) + m[:, 4, 0, 0], seq=None)

        return x + tokenwise(mlp, x)


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


def _angles(grid: Sequence[int], head_dim: int) -> list[jax.Array]:
    return [jnp.asarray(a) for a in rope_angles(grid, head_dim)]


def stage(model: LTX2DiffusionDecoder, index: int, x: jax.Array) -> jax.Array:
    """Deterministic stage ``index`` (0-based) on channels-last features: its blocks, then its upsampler. Stage 0
    takes the raw latents (B, C, F, h, w) and applies the trailing pad and ``conv_in`` first; the last stage crops
    the ghost frames."""
    cfg = model.cfg
    if index == 0:
        pad = cfg.trailing_pad
        if pad:
            x = jnp.concatenate([x, jnp.repeat(x[:, :, -1:], pad, axis=2)], axis=2)
        x = tokenwise(lambda t: model.conv_in(t), jnp.moveaxis(x.astype(jnp.dtype(cfg.dtype)), 1, -1))
    angles = _angles(x.shape[1:4], cfg.decoder_head_dim)
    graphdef, state = nnx.split(model.det_stages[index])
    x = scan_blocks(graphdef, state, x, angles)
    x = model.upsamples[index](x)
    if index == len(cfg.decoder_upsample_strides) - 1 and cfg.trailing_pad:
        x = x[:, : x.shape[1] - cfg.trailing_pad * cfg.temporal_compression_ratio]
    return x


def diffusion_step(model: LTX2DiffusionDecoder, context: jax.Array, x_t: jax.Array, t: jax.Array) -> jax.Array:
    """One stage-5 prediction: noisy pixels (B, C, F, H, W) at time ``t`` (B,) -> pixels (B, C, F, H, W)."""
    cfg = model.cfg
    dt = jnp.dtype(cfg.dtype)
    emb = timestep_embedding(cfg.decoder_timestep_scale_multiplier * t.astype(jnp.float32), 256,
                             flip_sin_to_cos=True, downscale_freq_shift=0)
    emb = model.t_embedder(emb.astype(dt)).astype(dt)
    modulation = model.shared_adaln(jax.nn.silu(emb)).reshape(t.shape[0], MOD_PARAMS, -1)
    h = tokenwise(lambda v: model.conv_in_x_t(v), patchify(x_t.astype(dt), cfg.patch_size))
    angles = _angles(h.shape[1:4], cfg.decoder_head_dim)
    graphdef, state = nnx.split(model.diff_blocks)
    h = scan_blocks(graphdef, state, h, context, modulation, angles)
    h = tokenwise(lambda v: model.conv_out(rms_norm(v, model.norm_out.scale[...], eps=EPS)), h)
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
           "diffusion_step", "patchify", "pixel_shape", "stage", "tokenwise", "unpatchify"]
