"""Wan 2.1 video VAE (diffusers ``AutoencoderKLWan``) in Flax NNX.

Layout: activations are channel-last ``(B, T, H, W, C)`` inside the model; the public ``decode``/``encode``
take and return diffusers' channel-first ``(B, C, T, H, W)`` as host arrays. Both run through
:func:`vidax_core.vae.tiling.run_tiled`: untiled, or in spatial tiles exactly as diffusers' ``enable_tiling``
(``tiling=``), optionally spread over several devices (``devices=``). :func:`decode_video` / :func:`encode_video`
are the pipeline's normalised-latents <-> [0, 1] frames steps.

Causal streaming: like the reference, the decoder runs one latent frame at a time and the encoder runs the first
frame, then chunks of 4 frames. Every causal 3D conv (time kernel 3) keeps the last ``CACHE_T`` = 2 frames of its
*input* as a cache; the next chunk's conv sees ``concat(cache, x)`` and needs no time padding. The cache is an
explicit list of arrays passed into and returned from one jitted call per chunk. The decoder compiles ONE program
for every chunk and every spatial tile (:func:`_decode_unit_impl`): the first chunk runs with zero caches through
the later chunks' shapes, its one real frame in front (the reference's ``first_chunk`` / ``"Rep"`` behaviour under a
traced flag), and tiles are padded to the tile shape with their padding zeroed before every spatial conv (identical
ResBlocks may run as one ``lax.scan``: :data:`SCAN_BLOCKS`). So a first decode waits for one program's compile,
whatever the frame count and the tile shapes. The encoder keeps a program for its first chunk and one for the later
chunks.

Equivalence with the reference's cache rules (``feat_cache`` in ``autoencoder_kl_wan.py``):

* A kernel-3 causal conv pads 2 zero frames in front when it has no cache, and a 1-frame cache ``c`` is padded
  with one zero frame; both equal a 2-frame cache that holds zeros in the missing places. The reference's new cache
  (last 2 input frames, or the old cache's last frame + the single new frame) is ``concat(cache, x)[-2:]``.
* ``upsample3d``: the first chunk skips the time conv and marks the cache ``"Rep"``; the next chunk then runs the
  time conv with zero padding. That is a 2-frame *zero* cache after the first chunk.
* ``downsample3d`` (encoder): the first chunk stores the frame and skips the stride-2 time conv; later chunks
  prepend the cached last frame (no padding). That is a 1-frame cache.
"""

from __future__ import annotations

import collections
import functools
import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core.attention import attention
from vidax_core.errors import UserError
from vidax_core.io.arch import from_config_dict

from .causal_conv import CACHE_T, CausalConv3d, FeatureCache
from .chunks import chunk_runner, unit_runner
from .tiling import TilePlan, TiledStream, TilingOptions, run_tiled, stride_decode_plan, stride_encode_plan
from .tile_area import tile_area

#: Python-side trace counter: incremented while a chunk program is being traced (i.e. once per compilation).
TRACE_COUNTS: collections.Counter = collections.Counter()

_WAN21_LATENTS_MEAN = (
    -0.7571, -0.7089, -0.9113, 0.1075, -0.1745, 0.9653, -0.1517, 1.5508,
    0.4134, -0.0715, 0.5517, -0.3632, -0.1922, -0.9497, 0.2503, -0.2921,
)
_WAN21_LATENTS_STD = (
    2.8184, 1.4541, 2.3275, 2.6558, 1.2196, 1.7708, 2.6052, 2.0743,
    3.2687, 2.1526, 2.8652, 1.5579, 1.6382, 1.1253, 2.8251, 1.9160,
)


@dataclass(frozen=True)
class WanVAEConfig:
    """Fields carry the diffusers ``AutoencoderKLWan`` config.json names (``temperal`` sic)."""

    base_dim: int = 96
    decoder_base_dim: int | None = None
    z_dim: int = 16
    dim_mult: tuple[int, ...] = (1, 2, 4, 4)
    num_res_blocks: int = 2
    attn_scales: tuple[float, ...] = ()
    temperal_downsample: tuple[bool, ...] = (False, True, True)
    dropout: float = 0.0
    latents_mean: tuple[float, ...] = _WAN21_LATENTS_MEAN
    latents_std: tuple[float, ...] = _WAN21_LATENTS_STD
    is_residual: bool = False
    in_channels: int = 3
    out_channels: int = 3
    patch_size: int | None = None
    scale_factor_temporal: int | None = 4
    scale_factor_spatial: int | None = 8
    dtype: Any = jnp.float32

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> "WanVAEConfig":
        """Build from a diffusers config.json dict; unknown keys (``_class_name``...) are ignored."""
        kw = {**dict(config), **overrides}
        for k in ("dim_mult", "attn_scales", "temperal_downsample", "latents_mean", "latents_std"):
            if isinstance(kw.get(k), list):  # a scalar or a mapping is refused by the field check, naming the key
                kw[k] = tuple(kw[k])
        return from_config_dict(cls, kw)

    @property
    def temperal_upsample(self) -> tuple[bool, ...]:
        return tuple(self.temperal_downsample[::-1])

    def check_supported(self) -> None:
        if self.is_residual or self.patch_size is not None:
            raise NotImplementedError("this is the Wan 2.2 VAE (is_residual / patch_size): build wan22.WanVAE22")
        if len(self.latents_mean) != self.z_dim or len(self.latents_std) != self.z_dim:
            raise UserError(f"vae/config.json: latents_mean/latents_std need z_dim={self.z_dim} entries, got "
                            f"{len(self.latents_mean)}/{len(self.latents_std)}: fix or re-download it")
        if len(self.temperal_downsample) < len(self.dim_mult) - 1:
            raise UserError("vae/config.json: temperal_downsample needs len(dim_mult) - 1 entries: fix or "
                            "re-download it")


# --------------------------------------------------------------------------------------------------------------
# layers


def _silu(x: jax.Array) -> jax.Array:
    return x * jax.nn.sigmoid(x)


class Conv2d(nnx.Module):
    """Per-frame 2D conv on (B, T, H, W, C); ``kernel`` (kh, kw, in, out)."""

    def __init__(self, cin: int, cout: int, k: int = 3, *, stride: int = 1, padding=((1, 1), (1, 1)),
                 dtype=jnp.float32):
        self.kernel = nnx.Param(jnp.zeros((k, k, cin, cout), dtype))
        self.bias = nnx.Param(jnp.zeros((cout,), dtype))
        self.stride = stride
        self.padding = tuple(tuple(p) for p in padding)

    def __call__(self, x: jax.Array) -> jax.Array:
        b, t = x.shape[:2]
        y = jax.lax.conv_general_dilated(
            x.reshape((b * t,) + x.shape[2:]),
            self.kernel[...].astype(x.dtype),
            window_strides=(self.stride, self.stride),
            padding=self.padding,
            dimension_numbers=("NHWC", "HWIO", "NHWC"),
        )
        y = y + self.bias[...].astype(x.dtype)
        return y.reshape((b, t) + y.shape[1:])


class Dense(nnx.Module):
    """A 1x1 Conv2d as a matmul on the channel axis; ``kernel`` (in, out)."""

    def __init__(self, cin: int, cout: int, *, dtype=jnp.float32):
        self.kernel = nnx.Param(jnp.zeros((cin, cout), dtype))
        self.bias = nnx.Param(jnp.zeros((cout,), dtype))

    def __call__(self, x: jax.Array) -> jax.Array:
        return x @ self.kernel[...].astype(x.dtype) + self.bias[...].astype(x.dtype)


class RMSNorm(nnx.Module):
    """The reference's ``WanRMS_norm``: ``x / max(||x||_2, 1e-12) * sqrt(C) * gamma`` over channels (fp32 math)."""

    def __init__(self, dim: int, *, dtype=jnp.float32):
        self.gamma = nnx.Param(jnp.ones((dim,), dtype))
        self.scale = float(dim) ** 0.5

    def __call__(self, x: jax.Array) -> jax.Array:
        x32 = x.astype(jnp.float32)
        norm = jnp.sqrt(jnp.sum(x32 * x32, axis=-1, keepdims=True))
        y = (x32 / jnp.maximum(norm, 1e-12)).astype(x.dtype)
        return y * self.scale * self.gamma[...].astype(x.dtype)


class ResBlock(nnx.Module):
    def __init__(self, cin: int, cout: int, *, dtype=jnp.float32):
        self.norm1 = RMSNorm(cin, dtype=dtype)
        self.conv1 = CausalConv3d(cin, cout, dtype=dtype)
        self.norm2 = RMSNorm(cout, dtype=dtype)
        self.conv2 = CausalConv3d(cout, cout, dtype=dtype)
        self.conv_shortcut = CausalConv3d(cin, cout, (1, 1, 1), dtype=dtype) if cin != cout else None

    def __call__(self, x: jax.Array, cache: FeatureCache) -> jax.Array:
        h = self.conv_shortcut(x) if self.conv_shortcut is not None else x
        x = cache.conv(self.conv1, _silu(self.norm1(x)))
        x = cache.conv(self.conv2, _silu(self.norm2(x)))  # dropout: inference no-op
        return x + h


#: Run a stack of identical ResBlocks as one ``lax.scan`` (``VIDAX_VAE_SCAN_BLOCKS=1``). Off by default: on XLA:CPU
#: the loop doubles the decode program's compile (3.6 against 1.5 CPU seconds at 480x832, base width), while fewer
#: conv instances may shorten a TPU's; ``benchmarks/vae_compile.py`` measures both there.
SCAN_BLOCKS = os.environ.get("VIDAX_VAE_SCAN_BLOCKS", "0") == "1"


def _same_block(a: nnx.Module, b: nnx.Module) -> bool:
    """Two ResBlocks a scan can run as one body: no shortcut conv, the same parameter shapes."""
    if not (isinstance(a, ResBlock) and isinstance(b, ResBlock)) or a.conv_shortcut or b.conv_shortcut:
        return False
    shapes = lambda m: jax.tree.map(lambda v: (v.shape, v.dtype), nnx.state(m))  # noqa: E731
    return jax.tree.structure(nnx.state(a)) == jax.tree.structure(nnx.state(b)) and shapes(a) == shapes(b)


def run_resnets(resnets: Sequence[nnx.Module], x: jax.Array, cache: FeatureCache) -> jax.Array:
    """The ResBlocks in order; with :data:`SCAN_BLOCKS` a run of identical ones is one ``lax.scan`` over their
    stacked weights and caches (the compiled program then holds one such block however deep the stack). The caches
    keep the layout of the blocks run one after another either way."""
    blocks = list(resnets)
    i = 0
    while i < len(blocks):
        j = i + 1
        while j < len(blocks) and _same_block(blocks[i], blocks[j]):
            j += 1
        if j - i < 2 or not SCAN_BLOCKS:
            x = blocks[i](x, cache)
            i += 1
            continue
        graphdef = nnx.split(blocks[i])[0]
        stacked = jax.tree.map(lambda *a: jnp.stack(a), *[nnx.state(b) for b in blocks[i:j]])
        k, n = len(cache.outputs), j - i
        ins = None if cache.inputs is None else tuple(jnp.stack(cache.inputs[k + p : k + 2 * n : 2]) for p in (0, 1))

        def body(h, xs, graphdef=graphdef):
            weights, caches = xs
            sub = FeatureCache(None if caches is None else list(caches), valid=cache.valid, area=cache.area)
            h = nnx.merge(graphdef, weights)(h, sub)
            return h, tuple(sub.outputs)

        x, (first, second) = jax.lax.scan(body, x, (stacked, ins))
        for t in range(n):
            cache.put(first[t])
            cache.put(second[t])
        i = j
    return x


class AttentionBlock(nnx.Module):
    """Single-head self-attention over the H*W positions of each frame separately, through the run's attention
    backend (:func:`vidax_core.attention.attention`) in query blocks of at most :data:`SCORE_BYTES` of float32
    scores: a frame's dense (H*W, H*W) scores grow with the square of its area (0.8 GB per latent frame at 720p,
    4.2 GB at 1080p), a block's do not."""

    def __init__(self, dim: int, *, dtype=jnp.float32):
        self.norm = RMSNorm(dim, dtype=dtype)
        self.to_qkv = Dense(dim, 3 * dim, dtype=dtype)
        self.proj = Dense(dim, dim, dtype=dtype)

    def __call__(self, x: jax.Array, cache: FeatureCache | None = None) -> jax.Array:
        b, t, h, w, c = x.shape
        qkv = self.to_qkv(self.norm(x)).reshape(b * t, h * w, 1, 3 * c)
        q, k, v = jnp.split(qkv, 3, axis=-1)
        keys = None  # a padded tile: its padding is no key
        if cache is not None and cache.area is not None:
            keys = cache.area.key_mask(x).reshape(b * t, h * w)
        o = attention_in_query_blocks(q, k, v, kv_mask=keys, score_bytes=SCORE_BYTES)
        return x + self.proj(o.reshape(b, t, h, w, c))


SCORE_BYTES = 256 * 2**20


def attention_in_query_blocks(q: jax.Array, k: jax.Array, v: jax.Array, *, kv_mask: jax.Array | None = None,
                              score_bytes: int = SCORE_BYTES) -> jax.Array:
    """:func:`vidax_core.attention.attention` over (N, S, 1, D) inputs, one call per block of query rows sized so
    that a block's (N, rows, S) float32 scores stay within ``score_bytes`` (exact: every row sees every key)."""
    n, s = q.shape[:2]
    rows = score_bytes // max(1, n * k.shape[1] * 4)
    if rows >= s:
        return attention(q, k, v, kv_mask=kv_mask)
    rows = max(128, rows // 128 * 128)  # whole kernel tiles
    outs = [attention(q[:, i:i + rows], k, v, kv_mask=kv_mask) for i in range(0, s, rows)]
    return jnp.concatenate(outs, axis=1)


class MidBlock(nnx.Module):
    def __init__(self, dim: int, *, dtype=jnp.float32):
        self.resnets = nnx.List([ResBlock(dim, dim, dtype=dtype), ResBlock(dim, dim, dtype=dtype)])
        self.attentions = nnx.List([AttentionBlock(dim, dtype=dtype)])

    def __call__(self, x: jax.Array, cache: FeatureCache) -> jax.Array:
        x = self.resnets[0](x, cache)
        for attn, res in zip(self.attentions, list(self.resnets)[1:]):
            x = res(attn(x, cache), cache)
        return x


class Upsample(nnx.Module):
    """``WanResample`` upsample2d / upsample3d: [time conv doubling frames], nearest 2x, 3x3 conv to ``cout``."""

    def __init__(self, dim: int, cout: int, temporal: bool, *, dtype=jnp.float32):
        self.dim = dim
        self.temporal = temporal
        self.conv = Conv2d(dim, cout, 3, dtype=dtype)
        self.time_conv = CausalConv3d(dim, 2 * dim, (3, 1, 1), dtype=dtype) if temporal else None

    def __call__(self, x: jax.Array, cache: FeatureCache, first: Any) -> jax.Array:
        """``first``: a Python bool (a program per chunk kind) or a traced bool (one program for every chunk: the
        first chunk's frame then sits at the front of the later chunks' doubled frames, :class:`FeatureCache`)."""
        if self.temporal:
            if isinstance(first, bool) and first:
                cache.take()
                cache.put(jnp.zeros((x.shape[0], CACHE_T) + x.shape[2:], x.dtype))  # "Rep": zero padding next
            else:
                traced = not isinstance(first, bool)
                doubled = self._time_doubled(cache.conv(self.time_conv, x))
                if traced:  # the first chunk keeps its frame (in front) and leaves a zero cache ("Rep")
                    new = cache.outputs[-1]
                    cache.outputs[-1] = jnp.where(first, jnp.zeros_like(new), new)
                    doubled = jnp.where(first, jnp.repeat(x, 2, axis=1), doubled)
                x = doubled
        x = jnp.repeat(jnp.repeat(x, 2, axis=2), 2, axis=3)  # nearest-exact at scale 2 == pixel repeat
        return self.conv(cache.mask(x))

    def _time_doubled(self, y: jax.Array) -> jax.Array:
        """The time conv's (B, T, H, W, 2C) output, channel = s * C + c, as (B, 2T, H, W, C)."""
        b, t, h, w, _ = y.shape
        return jnp.moveaxis(y.reshape(b, t, h, w, 2, self.dim), 4, 2).reshape(b, t * 2, h, w, self.dim)


class Downsample(nnx.Module):
    """``WanResample`` downsample2d / downsample3d: pad (right, bottom) 1, 3x3 stride-2 conv, [stride-2 time conv]."""

    def __init__(self, dim: int, temporal: bool, *, dtype=jnp.float32):
        self.temporal = temporal
        self.conv = Conv2d(dim, dim, 3, stride=2, padding=((0, 1), (0, 1)), dtype=dtype)
        self.time_conv = CausalConv3d(dim, dim, (3, 1, 1), stride_t=2, dtype=dtype) if temporal else None

    def __call__(self, x: jax.Array, cache: FeatureCache, first: bool) -> jax.Array:
        x = self.conv(x)
        if self.temporal:
            c = cache.take()
            cache.put(x[:, -1:])
            if not first:
                x = self.time_conv(jnp.concatenate([c[:, -1:].astype(x.dtype), x], axis=1))
        return x


class UpBlock(nnx.Module):
    def __init__(self, cin: int, cout: int, num_res_blocks: int, mode: str | None, *, dtype=jnp.float32):
        blocks = []
        for _ in range(num_res_blocks + 1):
            blocks.append(ResBlock(cin, cout, dtype=dtype))
            cin = cout
        self.resnets = nnx.List(blocks)
        self.upsampler = (
            Upsample(cout, cout // 2, mode == "upsample3d", dtype=dtype) if mode is not None else None
        )

    def __call__(self, x: jax.Array, cache: FeatureCache, first: Any) -> jax.Array:
        x = run_resnets(self.resnets, x, cache)
        if self.upsampler is not None:
            x = self.upsampler(x, cache, first)
        return x


class Decoder(nnx.Module):
    def __init__(self, cfg: WanVAEConfig, *, dtype=jnp.float32):
        dim = cfg.decoder_base_dim or cfg.base_dim
        mult = list(cfg.dim_mult)
        dims = [dim * u for u in [mult[-1]] + mult[::-1]]
        self.conv_in = CausalConv3d(cfg.z_dim, dims[0], dtype=dtype)
        self.mid_block = MidBlock(dims[0], dtype=dtype)
        blocks = []
        tup = cfg.temperal_upsample
        for i, (cin, cout) in enumerate(zip(dims[:-1], dims[1:])):
            if i > 0:
                cin = cin // 2
            up = i != len(mult) - 1
            mode = ("upsample3d" if tup[i] else "upsample2d") if up else None
            blocks.append(UpBlock(cin, cout, cfg.num_res_blocks, mode, dtype=dtype))
        self.up_blocks = nnx.List(blocks)
        self.norm_out = RMSNorm(dims[-1], dtype=dtype)
        self.conv_out = CausalConv3d(dims[-1], cfg.out_channels, dtype=dtype)

    def __call__(self, x: jax.Array, cache: FeatureCache, first: bool) -> jax.Array:
        x = cache.conv(self.conv_in, x)
        x = self.mid_block(x, cache)
        for blk in self.up_blocks:
            x = blk(x, cache, first)
        return cache.conv(self.conv_out, _silu(self.norm_out(x)))


class Encoder(nnx.Module):
    def __init__(self, cfg: WanVAEConfig, *, dtype=jnp.float32):
        if cfg.attn_scales:
            raise NotImplementedError("encoder attention (attn_scales) is not supported (Wan 2.1 uses none)")
        dim = cfg.base_dim
        mult = list(cfg.dim_mult)
        dims = [dim * u for u in [1] + mult]
        self.conv_in = CausalConv3d(cfg.in_channels, dims[0], dtype=dtype)
        blocks: list[nnx.Module] = []
        for i, (cin, cout) in enumerate(zip(dims[:-1], dims[1:])):
            for _ in range(cfg.num_res_blocks):
                blocks.append(ResBlock(cin, cout, dtype=dtype))
                cin = cout
            if i != len(mult) - 1:
                blocks.append(Downsample(cout, bool(cfg.temperal_downsample[i]), dtype=dtype))
        self.down_blocks = nnx.List(blocks)
        self.mid_block = MidBlock(dims[-1], dtype=dtype)
        self.norm_out = RMSNorm(dims[-1], dtype=dtype)
        self.conv_out = CausalConv3d(dims[-1], 2 * cfg.z_dim, dtype=dtype)

    def __call__(self, x: jax.Array, cache: FeatureCache, first: bool) -> jax.Array:
        x = cache.conv(self.conv_in, x)
        run: list[nnx.Module] = []  # consecutive ResBlocks, run together (identical ones as one scan)
        for blk in list(self.down_blocks) + [None]:
            if isinstance(blk, ResBlock):
                run.append(blk)
                continue
            x, run = run_resnets(run, x, cache), []
            if blk is not None:
                x = blk(x, cache, first)
        x = self.mid_block(x, cache)
        return cache.conv(self.conv_out, _silu(self.norm_out(x)))


class WanVAE(nnx.Module):
    """``AutoencoderKLWan`` (Wan 2.1).
    Parameters start at zeros/ones; load real ones with ``convert_wan21.load_vae``."""

    def __init__(self, cfg: WanVAEConfig, *, with_encoder: bool = True):
        cfg.check_supported()
        dtype = jnp.dtype(cfg.dtype)
        self.cfg = cfg
        self.post_quant_conv = CausalConv3d(cfg.z_dim, cfg.z_dim, (1, 1, 1), dtype=dtype)
        self.decoder = Decoder(cfg, dtype=dtype)
        if with_encoder:
            self.quant_conv = CausalConv3d(2 * cfg.z_dim, 2 * cfg.z_dim, (1, 1, 1), dtype=dtype)
            self.encoder = Encoder(cfg, dtype=dtype)
        else:
            self.quant_conv = None
            self.encoder = None

    def decode_frames(self, z: jax.Array, cache: FeatureCache, first: bool) -> jax.Array:
        """One chunk, channel-last: raw latents (B, t, h, w, z) -> unclamped decoder output (B, t', H', W', C').

        For Wan 2.1 that is pixels; for Wan 2.2 patchified pixels (see :meth:`decoder_to_pixels`).
        """
        return self.decoder(self.post_quant_conv(z), cache, first)

    def encode_frames(self, x: jax.Array, cache: FeatureCache, first: bool) -> jax.Array:
        """One chunk, channel-last: encoder input (B, t, H', W', C') -> ``quant_conv`` output (B, t', h, w, 2 z)."""
        return self.quant_conv(self.encoder(x, cache, first))

    def decoder_to_pixels(self, x: Any) -> Any:
        """Decoder output -> pixels (identity here; Wan 2.2 un-patchifies). Works on numpy and jax arrays."""
        return x

    def pixels_to_encoder(self, x: Any) -> Any:
        """Pixels -> encoder input (identity here; Wan 2.2 patchifies). Works on numpy and jax arrays."""
        return x

    def decode(self, latents: Any, *, on_chunk: Callable[[int, int], None] | None = None, tiling: Any = None,
               devices: Sequence[Any] | None = None) -> np.ndarray:
        """Raw (un-normalised) latents (B, z, T, h, w) -> video (B, 3, 1 + 4 (T - 1), H, W) clamped to [-1, 1].

        ``tiling``: :class:`~vidax_core.vae.tiling.TilingOptions` (or a dict / bool), diffusers' ``enable_tiling``.
        ``devices``: spread tiles / batch entries over these. ``on_chunk(done, total)`` after each latent frame.
        """
        return np.moveaxis(decode_pixels(self, latents, on_chunk=on_chunk, tiling=tiling, devices=devices), -1, 1)

    def encode(self, video: Any, *, on_chunk: Callable[[int, int], None] | None = None, tiling: Any = None,
               devices: Sequence[Any] | None = None) -> np.ndarray:
        """Video (B, 3, T, H, W) in [-1, 1] -> raw latent mean (B, z, 1 + (T - 1) // 4, h, w)."""
        return encode_latents(self, video, on_chunk=on_chunk, tiling=tiling, devices=devices)


# --------------------------------------------------------------------------------------------------------------
# jitted chunk programs


def _encode_chunk_impl(graphdef, state, x, caches, *, first, moments=False):
    TRACE_COUNTS["encode_first" if first else "encode_chunk"] += 1
    vae = nnx.merge(graphdef, state)
    cache = FeatureCache(caches)
    out = vae.encode_frames(x, cache, first)
    return (out if moments else out[..., : vae.cfg.z_dim]), cache.outputs


def _decode_unit_impl(graphdef, state, z, caches, first, area):
    """Every latent frame's decode, the first included, in ONE program: ``first`` (traced bool) makes the first
    chunk run with zero caches through the later chunks' shapes (its frame in front, :class:`FeatureCache`);
    ``area`` (None, or (B, 2) traced real latent rows and columns of a padded tile) lets tiles of every shape
    share the program."""
    TRACE_COUNTS["decode_unit" if caches is not None else "decode_unit_cache_shapes"] += 1
    vae = nnx.merge(graphdef, state)
    cache = FeatureCache(caches, valid=jnp.where(first, 1, 1 << 20),
                         area=tile_area(z, area))
    return vae.decode_frames(z, cache, first), cache.outputs


_encode_chunk = jax.jit(_encode_chunk_impl, static_argnames=("graphdef", "first", "moments"))
_encode_moments_chunk = functools.partial(_encode_chunk, moments=True)
_decode_unit = jax.jit(_decode_unit_impl, static_argnames=("graphdef",))

#: Latent frames the first chunk really decodes (the unit program's first output frame; later chunks: all four).
FIRST_FRAMES = 1


def _spatial_ratio(cfg: WanVAEConfig) -> int:
    return int(cfg.scale_factor_spatial or 2 ** (len(cfg.dim_mult) - 1) * (cfg.patch_size or 1))


def decode_plan(cfg: WanVAEConfig, latent_hw: Sequence[int], tiling: Any = None) -> TilePlan:
    """diffusers ``_decode`` / ``tiled_decode``: tile when on and the latent is larger than a tile, else one tile.

    Tiles are laid out in latents (``tile_sample_* // spatial ratio``) and blended in decoder-output pixels (for a
    patchified VAE, patch pixels: ``tile_sample_* // patch_size``), exactly as the reference does.
    """
    return stride_decode_plan(TilingOptions.coerce(tiling), latent_hw, _spatial_ratio(cfg),
                              patch=int(cfg.patch_size or 1))


def encode_plan(cfg: WanVAEConfig, pixel_hw: Sequence[int], tiling: Any = None) -> TilePlan:
    """diffusers ``_encode`` / ``tiled_encode``: the on/off test reads the pixel size, while tiles (``tile_sample_*``
    as given) are laid out on the encoder input, which for a patchified VAE is the patch grid, as in the reference."""
    return stride_encode_plan(TilingOptions.coerce(tiling), pixel_hw, _spatial_ratio(cfg),
                              patch=int(cfg.patch_size or 1))


def decode_pixels(vae: WanVAE, latents: Any, *, on_chunk: Callable[[int, int], None] | None = None,
                  tiling: Any = None, devices: Sequence[Any] | None = None,
                  finish: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
    """Raw latents (B, z, T, h, w) -> channel-last pixels (B, T', H, W, 3) clamped to [-1, 1], float32 on host.

    ONE jitted program for every latent frame and every tile (edge tiles padded to the tile shape and masked to
    their real area), a Python loop over frames and tiles; tiles are blended in decoder space, then un-patchified
    and clamped (then ``finish``), one latent frame at a time.
    """
    z = np.moveaxis(np.asarray(latents), 1, -1)  # (B, T, h, w, z)
    plan = decode_plan(vae.cfg, z.shape[2:4], tiling)

    def done(x: np.ndarray) -> np.ndarray:
        x = np.clip(vae.decoder_to_pixels(x), -1.0, 1.0)
        return finish(x) if finish is not None else x

    return run_tiled(z, unit_runner(vae, _decode_unit, first_frames=FIRST_FRAMES), plan=plan,
                     bounds=[(t, t + 1) for t in range(z.shape[1])], devices=devices, on_chunk=on_chunk, finish=done,
                     pad_tiles=True)


def encode_latents(vae: WanVAE, video: Any, *, on_chunk: Callable[[int, int], None] | None = None,
                   tiling: Any = None, devices: Sequence[Any] | None = None, moments: bool = False) -> np.ndarray:
    """Video (B, 3, T, H, W) in [-1, 1] -> raw latent mean (B, z, 1 + (T - 1) // 4, h, w), float32 on host;
    ``moments``: the posterior's mean and log-variance channels (B, 2 z, ...), as the encoder gives them.

    The reference's chunks: the first frame, then 4 frames at a time, each through one jitted program per tile.
    """
    if vae.encoder is None:
        raise ValueError("this WanVAE was built without its encoder (with_encoder=False)")
    x = np.moveaxis(np.asarray(video), 1, -1)  # (B, T, H, W, 3)
    plan = encode_plan(vae.cfg, x.shape[2:4], tiling)
    x = vae.pixels_to_encoder(x)
    n = x.shape[1]
    bounds = [(0, 1)] + [(1 + 4 * (i - 1), 1 + 4 * i) for i in range(1, 1 + (n - 1) // 4)]
    program = _encode_moments_chunk if moments else _encode_chunk
    mu = run_tiled(x, chunk_runner(vae, program), plan=plan, bounds=bounds, devices=devices, on_chunk=on_chunk)
    return np.moveaxis(mu, -1, 1)


def _latent_stats(cfg: WanVAEConfig) -> tuple[np.ndarray, np.ndarray]:
    shape = (1, cfg.z_dim, 1, 1, 1)
    mean = np.asarray(cfg.latents_mean, np.float32).reshape(shape)
    inv_std = np.float32(1.0) / np.asarray(cfg.latents_std, np.float32).reshape(shape)
    return mean, inv_std


def denormalize_latents(cfg: WanVAEConfig, latents: Any) -> np.ndarray:
    """The pipeline's ``latents / (1 / std) + mean`` per channel, on (B, z, T, h, w), float32 on host."""
    mean, inv_std = _latent_stats(cfg)
    return np.asarray(latents, np.float32) / inv_std + mean


def normalize_latents(cfg: WanVAEConfig, latents: Any) -> np.ndarray:
    """Inverse of :func:`denormalize_latents`: ``(latents - mean) * (1 / std)`` (what image-to-video feeds in)."""
    mean, inv_std = _latent_stats(cfg)
    return (np.asarray(latents, np.float32) - mean) * inv_std


def _to_frames(x: np.ndarray) -> np.ndarray:
    """The pipeline's ``(x / 2 + 0.5).clamp(0, 1)`` in float32."""
    return np.clip(np.asarray(x, np.float32) / np.float32(2) + np.float32(0.5), 0.0, 1.0)


def decode_video(vae: WanVAE, latents: Any, *, on_chunk: Callable[[int, int], None] | None = None,
                 tiling: Any = None, devices: Sequence[Any] | None = None, **params: Any) -> np.ndarray:
    """Normalised DiT latents (B, z, T, h, w) -> frames float32 in [0, 1], shape (B, 1 + 4 (T - 1), H, W, 3).

    Exactly the Wan pipeline's steps: de-normalise, ``vae.decode`` (clamped; tiled as diffusers' ``enable_tiling``
    when ``tiling`` says so), ``(x / 2 + 0.5).clip(0, 1)``, channel-last. Each decoded latent frame comes to the
    host as soon as it is ready. Other ``params`` (e.g. a ``timestep`` for a timestep-conditioned decoder) do not
    apply to Wan and are ignored.
    """
    z = denormalize_latents(vae.cfg, latents)
    return decode_pixels(vae, z, on_chunk=on_chunk, tiling=tiling, devices=devices, finish=_to_frames)


class DecodeStream:
    """:func:`decode_video` over latents that arrive in pieces (a long video's windows): :meth:`push` decodes the
    new latent frames with the causal caches of the frames before them, so the pieces' frames together are
    exactly :func:`decode_video` of the joined latents."""

    def __init__(self, vae: WanVAE, *, tiling: Any = None, devices: Sequence[Any] | None = None, **params: Any):
        self.vae, self.tiling, self.devices = vae, tiling, devices
        self.stream: TiledStream | None = None

    def push(self, latents: Any, on_chunk: Callable[[int, int], None] | None = None) -> np.ndarray:
        """Normalised latents (B, z, t, h, w) following the ones pushed before -> their frames (B, t', H, W, 3)."""
        vae = self.vae
        z = np.moveaxis(denormalize_latents(vae.cfg, latents), 1, -1)

        def done(x: np.ndarray) -> np.ndarray:
            return _to_frames(np.clip(vae.decoder_to_pixels(x), -1.0, 1.0))

        if self.stream is None:
            self.stream = TiledStream(z.shape, unit_runner(vae, _decode_unit, first_frames=FIRST_FRAMES),
                                      devices=self.devices, plan=decode_plan(vae.cfg, z.shape[2:4], self.tiling),
                                      finish=done, pad_tiles=True)
        return self.stream.push(z, [(t, t + 1) for t in range(z.shape[1])], on_chunk)


def encode_posterior(vae: WanVAE, frames: Any, *, on_chunk: Callable[[int, int], None] | None = None,
                     tiling: Any = None, devices: Sequence[Any] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Frames float32 in [0, 1] (B, T, H, W, 3) -> the raw posterior ``(mean, logvar)`` (B, z, t, h, w) each, logvar
    clamped as diffusers' ``DiagonalGaussianDistribution``: for pipelines that sample it (``latent_dist.sample``);
    normalise a sample with :func:`normalize_latents`."""
    from vidax_core.vae.chunks import gaussian_posterior

    pixels = np.moveaxis(np.asarray(frames, np.float32) * np.float32(2) - np.float32(1), -1, 1)
    out = encode_latents(vae, pixels, on_chunk=on_chunk, tiling=tiling, devices=devices, moments=True)
    return gaussian_posterior(np.moveaxis(out, 1, -1), vae.cfg.z_dim)


def encode_video(vae: WanVAE, frames: Any, *, on_chunk: Callable[[int, int], None] | None = None,
                 tiling: Any = None, devices: Sequence[Any] | None = None, **params: Any) -> np.ndarray:
    """Frames float32 in [0, 1] (B, T, H, W, 3) -> normalised DiT latents (B, z, 1 + (T - 1) // 4, h, w).

    The inverse direction of :func:`decode_video`: ``2 x - 1``, the encoder's latent mean, :func:`normalize_latents`.
    """
    pixels = np.moveaxis(np.asarray(frames, np.float32) * np.float32(2) - np.float32(1), -1, 1)
    mu = encode_latents(vae, pixels, on_chunk=on_chunk, tiling=tiling, devices=devices)
    return normalize_latents(vae.cfg, mu)
