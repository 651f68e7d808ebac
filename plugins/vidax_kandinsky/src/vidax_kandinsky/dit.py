"""The Kandinsky 5 video diffusion transformer (diffusers ``Kandinsky5Transformer3DModel``) in Flax NNX.

Latents are channel-last, as the pipelines hold them: ``(B, T, H, W, C)``. The model:

* embeds the timestep (diffusers' sinusoid over ``model_dim`` then an MLP to ``time_dim``, float32) plus the pooled
  CLIP text vector (Linear + LayerNorm); every block's AdaLN modulation reads ``silu`` of that sum;
* embeds the Qwen2.5-VL text states (Linear + LayerNorm) and runs ``num_text_blocks`` encoder blocks over them
  (self-attention with 1-D RoPE, feed-forward), held whole on every sequence-parallel rank;
* patchifies the channel-last video (the core's ``patchify``, ``layout="fhwc"``; patch ``(pt, ph, pw)``, features
  in the order ``(pt, ph, pw, C)``) and runs
  ``num_visual_blocks`` decoder blocks: self-attention with 3-D RoPE over (frame, row, column), cross-attention to
  the text blocks' output, feed-forward, each with its own (shift, scale, gate);
* unpatchifies through a modulated LayerNorm and a Linear (features ``(C, pt, ph, pw)``).

A checkpoint with ``attention_type: "nabla"`` (the 10 s Lite and the Pro releases) runs its video self-attention
block-sparse: the video tokens (and their RoPE) go in NABLA's fractal order (:func:`fractal`) between ``pre`` and
``post``, and each video self-attention runs :func:`vidax_core.attention.nabla.nabla_attention` after the Ulysses
all-to-all (the block grid travels in ``aux["nabla_grid"]``, a zero-size array whose shape is the grid).

What the reference does that a plain port would miss, reproduced exactly:

* **q and k are rounded to bfloat16 after RoPE**, in every self-attention (text and video), whatever the model's
  dtype: diffusers' ``apply_rotary`` casts its float32 result ``.to(torch.bfloat16)`` before the attention (the
  cross-attention has no RoPE and no rounding). In a float32 run this bounds the agreement of two float32
  implementations: where their q or k differ by one float32 ulp across a bfloat16 rounding boundary, the rounded
  values differ by one bfloat16 ulp (``2**-8`` relative). The family kit's tolerance is derived from this model's
  own sensitivity for that reason (:mod:`vidax_core.testing.family`);
* the q/k RMS norms use ``eps = finfo(float32).eps`` (torch ``nn.RMSNorm``'s default on float32 input);
* the RoPE angles are divided by a **run-size input**, the pipeline's ``scale_factor`` (``(1, 2, 2)`` when both
  pixel sides are in [480, 854], else ``(1, 3.16, 3.16)``): the model takes it as the keyword input
  ``scale_factor`` (B, 3), which :mod:`.conditioning` builds from the run's height and width;
* the residual streams are rounded to the parameter dtype after every block (``.type_as(x)``); norms, modulation
  and the residual additions run in float32, as the reference's ``.float()`` calls do; the time embedder and the
  modulation layers are float32 (the reference's ``_keep_in_fp32_modules``).

Inputs of ``__call__``: ``latents`` (B, T, H, W, C_in) (``C_in = 2 C + 1`` with ``visual_cond``: noise, condition
latent, mask, which the conditioning concatenates), ``timestep`` (B,) in [0, 1000], ``context`` a dict
``{"hidden": (B, L, in_text_dim), "pooled": (B, in_text_dim2)}``, ``scale_factor`` (B, 3) or None (no scaling).
Returns the velocity (B, T, H, W, out_visual_dim) float32.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, ClassVar, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vidax_core import (Attention, CheckedConfig, FeedForward, LayerNorm, Linear, TimestepEmbedding, constrain,
                        layer_norm, modulate, patchify, replicated_attention, scan_blocks, self_attention,
                        split_modulation, stacked, timestep_embedding, unpatchify)

EMBED, BATCH, SEQ = "embed", "batch", "seq"
LN_EPS = 1e-5  # torch LayerNorm default (the blocks' and the output's norms, the embedders' norms)
QK_EPS = float(np.finfo(np.float32).eps)  # torch nn.RMSNorm(eps=None) on float32 input
MAX_PERIOD = 10000.0
TEXT_MAX_POS = 1024  # Kandinsky5RoPE1D's table: text positions below this
VISUAL_MAX_POS = (128, 128, 128)  # Kandinsky5RoPE3D's tables: (frame, row, column) positions below these
ATTENTION_TYPES = ("regular", "nabla")
NABLA_METHODS = (None, "topcdf")  # how the block mask is chosen: the reference has only its top-CDF
FRACTAL = 8  # NABLA's token blocks: 8 x 8 patches of one frame (its 64-token mask blocks)


class AxesHeads:
    """Every Kandinsky DiT's attention width: ``head_dim = sum(axes_dims)`` (the RoPE axes fill a head) and
    ``heads = model_dim / head_dim``."""

    @property
    def head_dim(self) -> int:
        return sum(self.axes_dims)

    @property
    def heads(self) -> int:
        return self.model_dim // self.head_dim


@dataclasses.dataclass(frozen=True)
class KandinskyDiTConfig(AxesHeads, CheckedConfig):
    """The fields of diffusers' ``Kandinsky5Transformer3DModel`` config.json, under their names; ``dtype`` is the
    parameter dtype of the matmul weights."""

    in_visual_dim: int = 4
    in_text_dim: int = 3584
    in_text_dim2: int = 768
    time_dim: int = 512
    out_visual_dim: int = 4
    patch_size: tuple[int, int, int] = (1, 2, 2)
    model_dim: int = 2048
    ff_dim: int = 5120
    num_text_blocks: int = 2
    num_visual_blocks: int = 32
    axes_dims: tuple[int, int, int] = (16, 24, 24)
    visual_cond: bool = False
    attention_type: str = "regular"
    attention_causal: bool | None = None
    attention_local: bool | None = None
    attention_glob: bool | None = None
    attention_window: int | None = None
    attention_P: float | None = None
    attention_wT: int | None = None
    attention_wW: int | None = None
    attention_wH: int | None = None
    attention_add_sta: bool | None = None
    attention_method: str | None = None
    dtype: Any = jnp.float32

    label: ClassVar[str] = "transformer/config.json (Kandinsky 5)"

    @property
    def in_channels(self) -> int:
        """The DiT's input channels: the noise, then (``visual_cond``) the condition latent and its mask."""
        return 2 * self.in_visual_dim + 1 if self.visual_cond else self.in_visual_dim

    def build_fields(self) -> dict[str, Any]:
        """What the denoiser build reads of this architecture: channel-last latents (B, T, H, W, C), as the
        pipelines hold them, and the text blocks before the visual ones."""
        c = self.in_visual_dim
        return {"in_channels": c, "heads": self.heads, "patch_size": tuple(self.patch_size),
                "block_counts": {"text_blocks": self.num_text_blocks, "visual_blocks": self.num_visual_blocks},
                "latent_shapes": lambda batch, grid: (batch, *grid, c)}

    def problems(self) -> list[str]:
        out = []
        if any(a % 2 for a in self.axes_dims):
            out.append(f"axes_dims {list(self.axes_dims)} must be even (RoPE rotates pairs)")
        if self.model_dim % self.head_dim:
            out.append(f"model_dim={self.model_dim} is not a multiple of the head size sum(axes_dims)="
                       f"{self.head_dim}")
        if self.model_dim % 2:
            out.append(f"model_dim={self.model_dim} must be even (the time embedding's sinusoid)")
        if self.out_visual_dim != self.in_visual_dim:
            out.append(f"out_visual_dim={self.out_visual_dim} must equal in_visual_dim={self.in_visual_dim} "
                       "(the sampler steps the noise channels with the velocity)")
        if self.attention_type not in ATTENTION_TYPES:
            out.append(f"attention_type={self.attention_type!r}: expected one of {list(ATTENTION_TYPES)}")
        if self.attention_P is not None and not 0 < self.attention_P <= 1:  # the top-CDF mass NABLA keeps
            out.append(f"attention_P={self.attention_P} must be above 0 and at most 1 (the share of each query "
                       "block's attention mass NABLA keeps: 0.8 or 0.9 in the released configs)")
        if self.attention_method not in NABLA_METHODS:
            out.append(f"attention_method={self.attention_method!r}: expected "
                       f"{' or '.join(repr(m) for m in NABLA_METHODS if m)} (or null)")
        if self.attention_type == "nabla":
            missing = [n for n in ("attention_P", "attention_wT", "attention_wW", "attention_wH")
                       if getattr(self, n) is None]
            if missing:
                out.append(f"attention_type='nabla' needs {', '.join(missing)}")
            if self.patch_size[0] != 1:
                out.append(f"attention_type='nabla' needs patch_size[0] == 1 (the pipeline asserts it), got "
                           f"{self.patch_size[0]}")
        return out


def rope_freqs(pairs: int) -> np.ndarray:
    """diffusers' ``get_freqs(pairs)``: ``exp(-log(10000) * i / pairs)``, float32."""
    exponent = np.float32(-math.log(MAX_PERIOD)) * np.arange(pairs, dtype=np.float32) / np.float32(pairs)
    return np.exp(exponent).astype(np.float32)


def text_rope(length: int, head_dim: int) -> tuple[jax.Array, jax.Array]:
    """(cos, sin) (L, head_dim / 2) of text positions 0..L-1 (``Kandinsky5RoPE1D``)."""
    ang = jnp.arange(length, dtype=jnp.float32)[:, None] * jnp.asarray(rope_freqs(head_dim // 2))[None]
    return jnp.cos(ang), jnp.sin(ang)


def visual_rope(grid: tuple[int, int, int], axes_dims: tuple[int, int, int],
                scale: jax.Array | None) -> tuple[jax.Array, jax.Array]:
    """(cos, sin) (F*H*W, head_dim / 2) of the patch grid in (frame, row, column) order (``Kandinsky5RoPE3D``):
    per axis ``position * freq / scale_factor[axis]``, the three axes' angles side by side."""
    parts = []
    for axis, (n, dim) in enumerate(zip(grid, axes_dims)):
        ang = jnp.arange(n, dtype=jnp.float32)[:, None] * jnp.asarray(rope_freqs(dim // 2))[None]
        if scale is not None:
            ang = ang / scale[axis]
        shape = [1, 1, 1, dim // 2]
        shape[axis] = n
        parts.append(jnp.broadcast_to(ang.reshape(shape), (*grid, dim // 2)))
    ang = jnp.concatenate(parts, axis=-1).reshape(-1, sum(axes_dims) // 2)
    return jnp.cos(ang), jnp.sin(ang)


def bf16_round(x: jax.Array) -> jax.Array:
    """``x`` rounded to bfloat16 and back to its dtype (the reference's ``.to(torch.bfloat16).type_as(x)``)."""
    return x.astype(jnp.bfloat16).astype(x.dtype)


class KandinskyAttention(Attention):
    """The core attention block with Kandinsky's bfloat16 rounding of q and k after RoPE (module docstring)."""

    def qkv(self, x, seq=SEQ, rope=None):
        q, k, v = super().qkv(x, seq, rope)
        if rope is not None:
            q, k = bf16_round(q), bf16_round(k)
        return q, k, v


def attention_block(cfg: KandinskyDiTConfig, rngs: nnx.Rngs) -> KandinskyAttention:
    return KandinskyAttention(cfg.model_dim, cfg.heads, dtype=cfg.dtype, rngs=rngs, qk_norm="rms_norm",
                              qk_eps=QK_EPS, rope="interleaved")


def fractal(x: jax.Array, grid: tuple[int, int, int], axis: int, inverse: bool = False) -> jax.Array:
    """Tokens in (frame, row, column) order along ``axis`` -> NABLA's order (frame, block row, block column, then
    row and column inside the 8 x 8 block), or back with ``inverse`` (the reference's ``fractal_flatten`` /
    ``fractal_unflatten``)."""
    f, h, w = grid
    lead, rest = x.shape[:axis], x.shape[axis + 1:]
    shape = (f, h // FRACTAL, FRACTAL, w // FRACTAL, FRACTAL) if not inverse else \
        (f, h // FRACTAL, w // FRACTAL, FRACTAL, FRACTAL)
    y = x.reshape(*lead, *shape, *rest)
    a = len(lead)
    perm = list(range(a)) + [a, a + 1, a + 3, a + 2, a + 4] + list(range(a + 5, y.ndim))
    return y.transpose(perm).reshape(x.shape)


def modulation(cfg: KandinskyDiTConfig, n: int, rngs: nnx.Rngs) -> Linear:
    """``Kandinsky5Modulation``'s Linear (float32, as the reference keeps it): ``silu(time) -> n * model_dim``."""
    return Linear(cfg.time_dim, n * cfg.model_dim, (None, EMBED), dtype=jnp.float32, rngs=rngs, fp32_out=True)


def residual(x: jax.Array, out: jax.Array, g: jax.Array) -> jax.Array:
    """``(x.float() + gate * out.float()).type_as(x)``."""
    return (x.astype(jnp.float32) + g[:, None, :] * out.astype(jnp.float32)).astype(x.dtype)


def normed(x: jax.Array, shift: jax.Array, scale: jax.Array, dtype: Any) -> jax.Array:
    """``(LayerNorm(x.float()) * (scale + 1) + shift).type_as(x)`` (no affine)."""
    return modulate(layer_norm(x, LN_EPS), shift, scale).astype(dtype)


class TextBlock(nnx.Module):
    """``Kandinsky5TransformerEncoderBlock``: modulated self-attention (1-D RoPE) and feed-forward over the text,
    which every sequence-parallel rank holds whole. Carry ``(video, text)``; only the text changes."""

    def __init__(self, cfg: KandinskyDiTConfig, *, rngs: nnx.Rngs):
        self.dtype = cfg.dtype
        self.text_modulation = modulation(cfg, 6, rngs)
        self.self_attention = attention_block(cfg, rngs)
        self.feed_forward = FeedForward(cfg.model_dim, cfg.ff_dim, dtype=cfg.dtype, rngs=rngs, bias=False,
                                        activation="gelu")

    def __call__(self, carry: tuple[jax.Array, jax.Array], aux: Mapping[str, Any]) -> tuple[jax.Array, jax.Array]:
        vid, txt = carry
        shift, scale, g, ff_shift, ff_scale, ff_g = split_modulation(
            self.text_modulation(jax.nn.silu(aux["temb"])), 6)
        q, k, v = self.self_attention.qkv(normed(txt, shift, scale, self.dtype), None, aux["text_rope"])
        txt = residual(txt, self.self_attention.out(replicated_attention(q, k, v), None), g)
        txt = residual(txt, self.feed_forward(normed(txt, ff_shift, ff_scale, self.dtype), None), ff_g)
        return vid, constrain(txt, (BATCH, None, EMBED))


class VisualBlock(nnx.Module):
    """``Kandinsky5TransformerDecoderBlock``: modulated self-attention (3-D RoPE; Ulysses under sequence
    parallelism), cross-attention to the text blocks' output and feed-forward over the video tokens."""

    def __init__(self, cfg: KandinskyDiTConfig, *, rngs: nnx.Rngs):
        self.dtype = cfg.dtype
        self.nabla = ((cfg.attention_wT, cfg.attention_wH, cfg.attention_wW), float(cfg.attention_P)) \
            if cfg.attention_type == "nabla" else None
        self.visual_modulation = modulation(cfg, 9, rngs)
        self.self_attention = attention_block(cfg, rngs)
        self.cross_attention = attention_block(cfg, rngs)
        self.feed_forward = FeedForward(cfg.model_dim, cfg.ff_dim, dtype=cfg.dtype, rngs=rngs, bias=False,
                                        activation="gelu")

    def __call__(self, carry: tuple[jax.Array, jax.Array], aux: Mapping[str, Any]) -> tuple[jax.Array, jax.Array]:
        vid, txt = carry
        m = split_modulation(self.visual_modulation(jax.nn.silu(aux["temb"])), 9)
        vid = residual(vid, self._self_attention(normed(vid, m[0], m[1], self.dtype), aux), m[2])
        vid = residual(vid, self.cross_attention(normed(vid, m[3], m[4], self.dtype), txt), m[5])
        vid = residual(vid, self.feed_forward(normed(vid, m[6], m[7], self.dtype)), m[8])
        return constrain(vid, (BATCH, SEQ, EMBED)), txt

    def _self_attention(self, x: jax.Array, aux: Mapping[str, Any]) -> jax.Array:
        """Dense, or NABLA's block-sparse attention on the tokens in fractal order (:mod:`vidax_core.attention.
        nabla`; run after the Ulysses all-to-all on the whole sequence of each device's heads)."""
        if self.nabla is None:
            return self.self_attention(x, rope=aux["visual_rope"])
        from vidax_core.attention.nabla import nabla_attention

        window, threshold = self.nabla
        grid = aux["nabla_grid"].shape[:3]  # (frames, block rows, block columns), static
        q, k, v = self.self_attention.qkv(x, SEQ, aux["visual_rope"])
        fn = functools.partial(nabla_attention, grid=grid, window=window, threshold=threshold)
        return self.self_attention.out(self_attention(q, k, v, fn=fn))


class TextEmbedding(nnx.Module):
    """``Kandinsky5TextEmbeddings``: Linear then an affine LayerNorm, in the parameter dtype."""

    def __init__(self, d_in: int, d_out: int, dtype: Any, rngs: nnx.Rngs):
        self.dtype = dtype
        self.in_layer = Linear(d_in, d_out, (None, EMBED), dtype=dtype, rngs=rngs)
        self.norm = LayerNorm(d_out, (EMBED,), eps=LN_EPS)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.norm(self.in_layer(x)).astype(self.dtype)


class KandinskyDiT(nnx.Module):
    """``Kandinsky5Transformer3DModel`` (module docstring); ``pre`` -> text blocks -> visual blocks -> ``post`` for
    the core's offload executor, with the carry ``(video tokens, text tokens)``."""

    block_groups = ("text_blocks", "visual_blocks")

    def __init__(self, cfg: KandinskyDiTConfig, *, rngs: nnx.Rngs):
        cfg.check_supported()
        self.cfg = cfg
        d, dt = cfg.model_dim, cfg.dtype
        self.time_embeddings = TimestepEmbedding(d, cfg.time_dim, rngs=rngs)  # float32 (_keep_in_fp32_modules)
        self.text_embeddings = TextEmbedding(cfg.in_text_dim, d, dt, rngs)
        self.pooled_text_embeddings = TextEmbedding(cfg.in_text_dim2, cfg.time_dim, dt, rngs)
        self.visual_embeddings = Linear(math.prod(cfg.patch_size) * cfg.in_channels, d, (None, EMBED), dtype=dt,
                                        rngs=rngs)
        self.text_blocks = stacked(lambda r: TextBlock(cfg, rngs=r), cfg.num_text_blocks, rngs)
        self.visual_blocks = stacked(lambda r: VisualBlock(cfg, rngs=r), cfg.num_visual_blocks, rngs)
        self.out_modulation = modulation(cfg, 2, rngs)
        self.out_layer = Linear(d, math.prod(cfg.patch_size) * cfg.out_visual_dim, (EMBED, None), dtype=dt,
                                rngs=rngs)

    def grid(self, latent_shape: tuple[int, ...]) -> tuple[int, int, int]:
        """The patch grid (T', H', W') of channel-last latents (B, T, H, W, C)."""
        return tuple(n // p for n, p in zip(latent_shape[1:4], self.cfg.patch_size))

    def pre(self, latents: jax.Array, timestep: jax.Array, context: Mapping[str, jax.Array],
            scale_factor: jax.Array | None = None) -> tuple[tuple[jax.Array, jax.Array], dict]:
        cfg = self.cfg
        b = latents.shape[0]
        t = jnp.broadcast_to(jnp.asarray(timestep, jnp.float32).reshape(-1), (b,))
        temb = self.time_embeddings(timestep_embedding(t, cfg.model_dim, flip_sin_to_cos=True,
                                                       downscale_freq_shift=0, max_period=MAX_PERIOD))
        temb = temb + self.pooled_text_embeddings(context["pooled"]).astype(jnp.float32)
        txt = constrain(self.text_embeddings(context["hidden"]), (BATCH, None, EMBED))
        tokens, _ = patchify(latents.astype(cfg.dtype), cfg.patch_size, order="thwc", layout="fhwc")
        vid = self.visual_embeddings(tokens)
        scale = None if scale_factor is None else jnp.asarray(scale_factor, jnp.float32).reshape(-1, 3)[0]
        grid = self.grid(latents.shape)
        cos, sin = visual_rope(grid, cfg.axes_dims, scale)
        aux = {"temb": temb, "text_rope": text_rope(txt.shape[1], cfg.head_dim)}
        if cfg.attention_type == "nabla":  # NABLA's blocks: the tokens (and their RoPE) in fractal order
            if grid[1] % FRACTAL or grid[2] % FRACTAL:
                raise ValueError(f"NABLA needs patch rows and columns in multiples of {FRACTAL}, got {grid}")
            vid, cos, sin = fractal(vid, grid, 1), fractal(cos, grid, 0), fractal(sin, grid, 0)
            # a zero-size array carries the block grid through jit and scan as its (static) shape
            aux["nabla_grid"] = jnp.zeros((grid[0], grid[1] // FRACTAL, grid[2] // FRACTAL, 0), jnp.float32)
        aux["visual_rope"] = (constrain(cos, (SEQ, None)), constrain(sin, (SEQ, None)))
        return (constrain(vid, (BATCH, SEQ, EMBED)), txt), aux

    @staticmethod
    def run_block_group(name: str, graphdef: nnx.GraphDef, state: nnx.State, x: Any, aux: dict) -> Any:
        """Run the stacked blocks of ``name`` in ``state`` (all of them, or any slice) with lax.scan."""
        if name not in KandinskyDiT.block_groups:
            raise KeyError(f"KandinskyDiT has no block group {name!r}")
        return scan_blocks(graphdef, state, x, aux)

    def post(self, x: tuple[jax.Array, jax.Array], aux: dict, latent_shape: tuple[int, ...]) -> jax.Array:
        cfg = self.cfg
        shift, scale = split_modulation(self.out_modulation(jax.nn.silu(aux["temb"])), 2)
        vid = x[0]
        if "nabla_grid" in aux:
            vid = fractal(vid, self.grid(latent_shape), 1, inverse=True)
        y = self.out_layer(normed(vid, shift, scale, cfg.dtype))
        return unpatchify(y.astype(jnp.float32), self.grid(latent_shape), cfg.patch_size, order="cthw",
                          layout="fhwc")

    def __call__(self, latents: jax.Array, timestep: jax.Array, context: Mapping[str, jax.Array],
                 scale_factor: jax.Array | None = None) -> jax.Array:
        x, aux = self.pre(latents, timestep, context, scale_factor)
        for name in self.block_groups:
            graphdef, state = nnx.split(getattr(self, name))
            x = self.run_block_group(name, graphdef, state, x, aux)
        return self.post(x, aux, latents.shape)

