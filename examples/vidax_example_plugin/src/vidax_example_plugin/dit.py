"""The toy denoiser: patchify -> N DiT blocks (stacked, run with ``lax.scan``) -> unpatchify, in Flax NNX.

Each block is a small transformer block with AdaLN modulation: self-attention and an MLP over the video tokens,
both shifted/scaled/gated by one conditioning vector (timestep embedding + mean-pooled text). It has no positional
embedding and no cross-attention, so it is a toy; everything vidax asks of a real family is here, though:

* a frozen config read from the checkpoint's own ``transformer/config.json``;
* identical blocks in ONE parameter tree stacked on a leading ``layers`` axis, run with ``jax.lax.scan``;
* parameters carrying logical axis names (``embed``, ``heads``, ``mlp``, ``layers``) for the family's shard rules;
* a declarative key table (:data:`DIT_RULES`) from the PyTorch/diffusers checkpoint layout onto the NNX tree.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import jax
import jax.numpy as jnp
from flax import nnx

from vidax_core.attention import attention
from vidax_core.io.convert import KeyRule, linear

# Logical axis names; shard_rules (plugin.py) maps them onto mesh axes.
EMBED, HEADS, MLP, LAYERS = "embed", "heads", "mlp", "layers"


@dataclasses.dataclass(frozen=True)
class ExampleDiTConfig:
    """Field names are the keys of ``transformer/config.json``; ``dtype`` is the parameter dtype."""

    in_channels: int = 4
    patch_size: int = 2
    hidden_dim: int = 32
    num_heads: int = 2
    num_layers: int = 2
    mlp_ratio: int = 2
    text_dim: int = 16
    freq_dim: int = 32
    dtype: Any = jnp.float32

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> "ExampleDiTConfig":
        """Build from a config.json dict; keys the model does not use (``_class_name`` ...) are ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in {**config, **overrides}.items() if k in names})


def dense(d_in: int, d_out: int, names: tuple[str | None, str | None], cfg: ExampleDiTConfig, rngs: nnx.Rngs) -> nnx.Linear:
    """``nnx.Linear`` whose kernel (in, out) and bias carry logical axis names (metadata, applied when sharded)."""

    def meta(axes: tuple[str | None, ...]) -> dict[str, Any]:
        return {"out_sharding": axes, "eager_sharding": False}

    return nnx.Linear(d_in, d_out, dtype=cfg.dtype, param_dtype=cfg.dtype, rngs=rngs,
                      kernel_metadata=meta(names), bias_metadata=meta(names[1:]))


def layer_norm(x: jax.Array, eps: float = 1e-6) -> jax.Array:
    """LayerNorm without affine parameters, statistics in float32."""
    x = x.astype(jnp.float32)
    mean = x.mean(-1, keepdims=True)
    var = jnp.square(x - mean).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps)


def timestep_embedding(t: jax.Array, dim: int) -> jax.Array:
    """Sinusoidal embedding of (B,) timesteps in [0, 1000] -> (B, dim), cos first."""
    half = dim // 2
    freqs = jnp.exp(-jnp.log(10000.0) * jnp.arange(half, dtype=jnp.float32) / half)
    args = t.astype(jnp.float32)[:, None] * freqs[None]
    return jnp.concatenate([jnp.cos(args), jnp.sin(args)], axis=-1)


class Block(nnx.Module):
    """AdaLN transformer block: x += gate1 * attn(mod1(norm(x))); x += gate2 * mlp(mod2(norm(x)))."""

    def __init__(self, cfg: ExampleDiTConfig, *, rngs: nnx.Rngs):
        d, m = cfg.hidden_dim, cfg.hidden_dim * cfg.mlp_ratio
        self.cfg = cfg
        self.modulation = dense(d, 6 * d, (None, EMBED), cfg, rngs)
        self.qkv = dense(d, 3 * d, (EMBED, HEADS), cfg, rngs)
        self.attn_out = dense(d, d, (HEADS, EMBED), cfg, rngs)
        self.mlp_in = dense(d, m, (EMBED, MLP), cfg, rngs)
        self.mlp_out = dense(m, d, (MLP, EMBED), cfg, rngs)

    def __call__(self, x: jax.Array, cond: jax.Array) -> jax.Array:
        b, s, d = x.shape
        dt = self.cfg.dtype
        mod = self.modulation(jax.nn.silu(cond)).astype(jnp.float32)[:, None]  # (B, 1, 6d)
        shift1, scale1, gate1, shift2, scale2, gate2 = jnp.split(mod, 6, axis=-1)
        h = (layer_norm(x) * (1 + scale1) + shift1).astype(dt)
        qkv = self.qkv(h).reshape(b, s, 3, self.cfg.num_heads, d // self.cfg.num_heads)
        a = attention(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]).reshape(b, s, d)
        x = x.astype(jnp.float32) + gate1 * self.attn_out(a).astype(jnp.float32)  # residuals in float32
        h = (layer_norm(x) * (1 + scale2) + shift2).astype(dt)
        x = x + gate2 * self.mlp_out(jax.nn.gelu(self.mlp_in(h))).astype(jnp.float32)
        return x.astype(dt)


class ExampleDiT(nnx.Module):
    """``__call__(latents (B, C, F, H, W), timestep (B,), context (B, L, text_dim))`` -> prediction like latents."""

    def __init__(self, cfg: ExampleDiTConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        d, p, c = cfg.hidden_dim, cfg.patch_size, cfg.in_channels
        self.patch_embed = dense(c * p * p, d, (None, EMBED), cfg, rngs)
        self.time_1 = dense(cfg.freq_dim, d, (None, EMBED), cfg, rngs)
        self.time_2 = dense(d, d, (None, EMBED), cfg, rngs)
        self.text_proj = dense(cfg.text_dim, d, (None, EMBED), cfg, rngs)

        # num_layers identical blocks in ONE tree, stacked on a leading 'layers' axis.
        @nnx.split_rngs(splits=cfg.num_layers)
        @nnx.vmap(in_axes=(0,), out_axes=0, transform_metadata={nnx.PARTITION_NAME: LAYERS})
        def make_blocks(r: nnx.Rngs) -> Block:
            return Block(cfg, rngs=r)

        self.blocks = make_blocks(rngs)
        self.norm_out = dense(d, 2 * d, (None, EMBED), cfg, rngs)
        self.proj_out = dense(d, c * p * p, (EMBED, None), cfg, rngs)

    # The forward pass in three stages. The core's offload executor drives them separately (pre, then each chunk of
    # the stacked group named in `block_groups` streamed from host memory, then post); __call__ chains them.
    block_groups = ("blocks",)

    def pre(self, latents: jax.Array, timestep: jax.Array, context: jax.Array) -> tuple[jax.Array, dict]:
        """Patchify and embed the conditioning: (tokens (B, S, hidden_dim), aux for the blocks and post)."""
        cfg, p = self.cfg, self.cfg.patch_size
        b, c, f, hh, ww = latents.shape
        h, w = hh // p, ww // p
        # (B, C, F, H, W) -> (B, F*h*w, C*p*p): features ordered (C, p, p) like a torch Conv2d kernel.
        x = latents.reshape(b, c, f, h, p, w, p).transpose(0, 2, 3, 5, 1, 4, 6).reshape(b, f * h * w, c * p * p)
        x = self.patch_embed(x.astype(cfg.dtype))
        temb = self.time_1(timestep_embedding(timestep, cfg.freq_dim).astype(cfg.dtype))
        cond = self.time_2(jax.nn.silu(temb)) + self.text_proj(context.astype(cfg.dtype)).mean(axis=1)
        return x, {"cond": cond}

    @staticmethod
    def run_block_group(name: str, graphdef: nnx.GraphDef, state: nnx.State, x: jax.Array, aux: dict) -> jax.Array:
        """Run the blocks stacked on the leading axis of ``state`` (all of them, or any slice) with lax.scan."""
        if name != "blocks":
            raise KeyError(f"ExampleDiT has no block group {name!r}")

        def body(x, layer_state):
            return nnx.merge(graphdef, layer_state)(x, aux["cond"]), None

        x, _ = jax.lax.scan(body, x, state)  # one compiled block, whatever num_layers is
        return x

    def post(self, x: jax.Array, aux: dict, latent_shape: tuple[int, ...]) -> jax.Array:
        """Final modulation, projection and unpatchify -> (B, C, F, H, W) float32."""
        cfg, p = self.cfg, self.cfg.patch_size
        f, hh, ww = latent_shape[-3:]
        b, c, h, w = x.shape[0], cfg.in_channels, hh // p, ww // p
        shift, scale = jnp.split(self.norm_out(jax.nn.silu(aux["cond"])).astype(jnp.float32)[:, None], 2, axis=-1)
        y = self.proj_out((layer_norm(x) * (1 + scale) + shift).astype(cfg.dtype)).astype(jnp.float32)
        y = y.reshape(b, f, h, w, c, p, p).transpose(0, 4, 1, 2, 5, 3, 6)
        return y.reshape(b, c, f, hh, ww)

    def __call__(self, latents: jax.Array, timestep: jax.Array, context: jax.Array) -> jax.Array:
        x, aux = self.pre(latents, timestep, context)
        graphdef, state = nnx.split(self.blocks)
        x = self.run_block_group("blocks", graphdef, state, x, aux)
        return self.post(x, aux, latents.shape)


# ---- checkpoint layout -------------------------------------------------------------------------------------------
# The weights are stored the way a PyTorch/diffusers model would save them: Linear weights (out, in), the patch
# embedding as a Conv2d kernel (out, C, p, p), blocks as blocks.<i>.*. DIT_RULES maps them onto the NNX tree.

_BLOCK = r"blocks\.(\d+)\."  # group 1 = layer index into the stacked 'layers' axis


def patch_kernel(w):
    """torch Conv2d kernel (d, C, p, p) -> Linear kernel (C*p*p, d) matching the (C, p, p) patch feature order."""
    return linear(w.reshape(w.shape[0], -1))


def _linear(src: str, dst: str, layer_group: int | None = None) -> list[KeyRule]:
    return [
        KeyRule(src + r"\.weight", dst + "/kernel", linear, layer_group),
        KeyRule(src + r"\.bias", dst + "/bias", None, layer_group),
    ]


DIT_RULES: list[KeyRule] = [
    KeyRule(r"patch_embed\.weight", "patch_embed/kernel", patch_kernel),
    KeyRule(r"patch_embed\.bias", "patch_embed/bias"),
    *_linear(r"time_embed\.linear_1", "time_1"),
    *_linear(r"time_embed\.linear_2", "time_2"),
    *_linear(r"text_proj", "text_proj"),
    *_linear(_BLOCK + r"adaLN_modulation", "blocks/modulation", layer_group=1),
    *_linear(_BLOCK + r"attn\.to_qkv", "blocks/qkv", layer_group=1),
    *_linear(_BLOCK + r"attn\.to_out", "blocks/attn_out", layer_group=1),
    *_linear(_BLOCK + r"ff\.proj_in", "blocks/mlp_in", layer_group=1),
    *_linear(_BLOCK + r"ff\.proj_out", "blocks/mlp_out", layer_group=1),
    *_linear(r"norm_out\.linear", "norm_out"),
    *_linear(r"proj_out", "proj_out"),
]


def checkpoint_shapes(cfg: ExampleDiTConfig) -> dict[str, tuple[int, ...]]:
    """Source key -> shape of a checkpoint for ``cfg`` (used to write the built-in tiny checkpoint)."""
    d, m, p, c = cfg.hidden_dim, cfg.hidden_dim * cfg.mlp_ratio, cfg.patch_size, cfg.in_channels

    def lin(name: str, d_in: int, d_out: int) -> dict[str, tuple[int, ...]]:
        return {f"{name}.weight": (d_out, d_in), f"{name}.bias": (d_out,)}

    shapes = {"patch_embed.weight": (d, c, p, p), "patch_embed.bias": (d,)}
    shapes |= lin("time_embed.linear_1", cfg.freq_dim, d) | lin("time_embed.linear_2", d, d)
    shapes |= lin("text_proj", cfg.text_dim, d)
    for i in range(cfg.num_layers):
        shapes |= lin(f"blocks.{i}.adaLN_modulation", d, 6 * d) | lin(f"blocks.{i}.attn.to_qkv", d, 3 * d)
        shapes |= lin(f"blocks.{i}.attn.to_out", d, d)
        shapes |= lin(f"blocks.{i}.ff.proj_in", d, m) | lin(f"blocks.{i}.ff.proj_out", m, d)
    shapes |= lin("norm_out.linear", d, 2 * d) | lin("proj_out", d, c * p * p)
    return shapes
