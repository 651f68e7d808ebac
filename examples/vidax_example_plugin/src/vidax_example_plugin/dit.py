"""The toy denoiser in Flax NNX: patchify -> N AdaLN transformer blocks (stacked, ``lax.scan``) -> unpatchify.

It is built the way every vidax family's DiT is (``plugins/vidax_wan/src/vidax_wan/dit.py`` is the full-size one):

* a frozen config whose fields are the keys of the checkpoint's ``transformer/config.json``;
* the core's layers and functions (``Linear``, ``TimestepEmbedding``, ``layer_norm``, ``modulate``/``gate``,
  ``patchify``), whose parameters carry logical axis names;
* identical blocks in ONE parameter tree stacked on a leading ``layers`` axis (``stacked``), run with ``lax.scan``
  (``scan_blocks``), so compile time does not grow with depth and offload can stream any slice of the stack;
* activations constrained by logical name and self-attention through the core's Ulysses entry point, so tensor
  and sequence parallelism come from the family's ``shard_rules`` alone;
* a declarative key table (:data:`DIT_RULES`) from the PyTorch checkpoint layout onto the NNX tree.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from vidax_core import (
    KeyRule,
    Linear,
    TimestepEmbedding,
    constrain,
    from_config_dict,
    gate,
    layer_norm,
    linear,
    modulate,
    patchify,
    scan_blocks,
    self_attention,
    stacked,
    timestep_embedding,
    unpatchify,
)

# Logical axis names. Parameters: embed (model width), heads (attention width), mlp (MLP hidden); the core's
# `stacked` adds `layers`. Activations: batch, seq. shard_rules (plugin.py) maps them onto the mesh.
EMBED, HEADS, MLP = "embed", "heads", "mlp"
BATCH, SEQ = "batch", "seq"
EPS = 1e-6  # LayerNorm epsilon


@dataclasses.dataclass(frozen=True)
class ExampleDiTConfig:
    """Field names are the keys of ``transformer/config.json``; ``dtype`` is the parameter dtype."""

    in_channels: int = 4
    patch_size: int = 2
    hidden_dim: int = 32
    num_heads: int = 4
    num_layers: int = 2
    mlp_ratio: int = 2
    text_dim: int = 16
    freq_dim: int = 32
    dtype: Any = jnp.float32

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> ExampleDiTConfig:
        """From a config.json dict: values are type-checked, keys the model does not use are ignored."""
        return from_config_dict(cls, config, **overrides)


class Block(nnx.Module):
    """AdaLN block: x += gate1 * attn(modulate(norm(x))); x += gate2 * mlp(modulate(norm(x))).

    Norms, modulation and the residual stream run in float32, matmuls in the parameter dtype."""

    def __init__(self, cfg: ExampleDiTConfig, *, rngs: nnx.Rngs):
        d, m, dt = cfg.hidden_dim, cfg.hidden_dim * cfg.mlp_ratio, cfg.dtype
        self.heads, self.dtype = cfg.num_heads, dt
        self.modulation = Linear(d, 6 * d, (None, EMBED), dtype=dt, rngs=rngs)
        # Megatron tensor parallelism: (embed, heads|mlp) kernels are column-parallel, (heads|mlp, embed) row-parallel.
        self.to_q = Linear(d, d, (EMBED, HEADS), dtype=dt, rngs=rngs)
        self.to_k = Linear(d, d, (EMBED, HEADS), dtype=dt, rngs=rngs)
        self.to_v = Linear(d, d, (EMBED, HEADS), dtype=dt, rngs=rngs)
        self.to_out = Linear(d, d, (HEADS, EMBED), dtype=dt, rngs=rngs)
        self.mlp_in = Linear(d, m, (EMBED, MLP), dtype=dt, rngs=rngs)
        self.mlp_out = Linear(m, d, (MLP, EMBED), dtype=dt, rngs=rngs)

    def __call__(self, x: jax.Array, cond: jax.Array) -> jax.Array:
        """x (B, S, hidden_dim) float32 tokens (sharded over sp); cond (B, hidden_dim) conditioning."""
        mod = self.modulation(jax.nn.silu(cond))
        shift1, scale1, gate1, shift2, scale2, gate2 = jnp.split(mod.astype(jnp.float32), 6, axis=-1)
        b, s, _ = x.shape

        h = modulate(layer_norm(x, EPS), shift1, scale1).astype(self.dtype)
        q, k, v = (constrain(p(h), (BATCH, SEQ, HEADS)).reshape(b, s, self.heads, -1)
                   for p in (self.to_q, self.to_k, self.to_v))
        a = self_attention(q, k, v).reshape(b, s, -1)  # Ulysses all-to-all around the attention when sp > 1
        x = x + gate(constrain(self.to_out(a), (BATCH, SEQ, EMBED)), gate1)

        h = modulate(layer_norm(x, EPS), shift2, scale2).astype(self.dtype)
        f = jax.nn.gelu(constrain(self.mlp_in(h), (BATCH, SEQ, MLP)), approximate=True)
        x = x + gate(constrain(self.mlp_out(f), (BATCH, SEQ, EMBED)), gate2)
        return constrain(x, (BATCH, SEQ, EMBED))


class ExampleDiT(nnx.Module):
    """``model(latents (B, C, F, H, W), timestep (B,), context (B, L, text_dim))`` -> prediction like latents.

    The forward pass is split into the stages the core's offload executor drives separately: ``pre``, then each
    group named in ``block_groups`` (streamed from host memory in chunks), then ``post``; ``__call__`` chains them.
    """

    block_groups = ("blocks",)

    def __init__(self, cfg: ExampleDiTConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        d, p, c, dt = cfg.hidden_dim, cfg.patch_size, cfg.in_channels, cfg.dtype
        self.patch_embed = Linear(c * p * p, d, (None, EMBED), dtype=dt, rngs=rngs)
        self.time_embed = TimestepEmbedding(cfg.freq_dim, d, rngs=rngs)  # float32, like diffusers' time embedders
        self.text_proj = Linear(cfg.text_dim, d, (None, EMBED), dtype=dt, rngs=rngs)
        self.blocks = stacked(lambda r: Block(cfg, rngs=r), cfg.num_layers, rngs)  # leading 'layers' axis
        self.norm_out = Linear(d, 2 * d, (None, EMBED), dtype=dt, rngs=rngs)
        self.proj_out = Linear(d, c * p * p, (EMBED, None), dtype=dt, rngs=rngs)

    def pre(self, latents: jax.Array, timestep: jax.Array, context: jax.Array) -> tuple[jax.Array, dict]:
        """Patchify and embed: (tokens (B, F*H/p*W/p, hidden_dim) float32, aux for the blocks and ``post``)."""
        cfg = self.cfg
        # (B, C, F, H, W) -> (B, S, C*p*p), features ordered (C, p, p) like the torch Conv2d kernel
        tokens, _ = patchify(latents, (1, cfg.patch_size, cfg.patch_size), order="cthw")
        x = constrain(self.patch_embed(tokens).astype(jnp.float32), (BATCH, SEQ, EMBED))
        t = timestep_embedding(timestep, cfg.freq_dim, flip_sin_to_cos=True, downscale_freq_shift=0)
        text = self.text_proj(context).astype(jnp.float32).mean(axis=1)
        return x, {"cond": self.time_embed(t) + text}

    @staticmethod
    def run_block_group(name: str, graphdef: nnx.GraphDef, state: nnx.State, x: jax.Array, aux: dict) -> jax.Array:
        """Run the blocks stacked on the leading axis of ``state`` (all of them, or any slice) with lax.scan."""
        if name != "blocks":
            raise KeyError(f"ExampleDiT has no block group {name!r}")
        return scan_blocks(graphdef, state, x, aux["cond"])

    def post(self, x: jax.Array, aux: dict, latent_shape: tuple[int, ...]) -> jax.Array:
        """Final modulation, projection and unpatchify -> (B, C, F, H, W) float32."""
        p = self.cfg.patch_size
        f, hh, ww = latent_shape[-3:]
        shift, scale = jnp.split(self.norm_out(jax.nn.silu(aux["cond"])).astype(jnp.float32), 2, axis=-1)
        y = self.proj_out(modulate(layer_norm(x, EPS), shift, scale).astype(self.cfg.dtype))
        return unpatchify(y.astype(jnp.float32), (f, hh // p, ww // p), (1, p, p), order="cthw")

    def __call__(self, latents: jax.Array, timestep: jax.Array, context: jax.Array) -> jax.Array:
        x, aux = self.pre(latents, timestep, context)
        graphdef, state = nnx.split(self.blocks)
        x = self.run_block_group("blocks", graphdef, state, x, aux)
        return self.post(x, aux, latents.shape)


# The checkpoint stores weights the way a PyTorch model saves them: Linear weights (out, in), the patch embedding
# as a Conv2d kernel (out, C, p, p), blocks as blocks.<i>.*. DIT_RULES maps them onto the NNX tree; group 1 of
# _BLOCK is the index into the stacked 'layers' axis.
_BLOCK = r"blocks\.(\d+)\."


def patch_kernel(w):
    """torch Conv2d kernel (d, C, p, p) -> Linear kernel (C*p*p, d), the (C, p, p) order of ``patchify``."""
    return linear(w.reshape(w.shape[0], -1))


def _linear(src: str, dst: str, layer_group: int | None = None) -> list[KeyRule]:
    return [KeyRule(src + r"\.weight", dst + "/kernel", linear, layer_group),
            KeyRule(src + r"\.bias", dst + "/bias", None, layer_group)]


DIT_RULES: list[KeyRule] = [
    KeyRule(r"patch_embed\.weight", "patch_embed/kernel", patch_kernel),
    KeyRule(r"patch_embed\.bias", "patch_embed/bias"),
    *_linear(r"time_embed\.linear_1", "time_embed/linear_1"),
    *_linear(r"time_embed\.linear_2", "time_embed/linear_2"),
    *_linear(r"text_proj", "text_proj"),
    *_linear(_BLOCK + r"adaLN_modulation", "blocks/modulation", 1),
    *_linear(_BLOCK + r"attn\.to_q", "blocks/to_q", 1),
    *_linear(_BLOCK + r"attn\.to_k", "blocks/to_k", 1),
    *_linear(_BLOCK + r"attn\.to_v", "blocks/to_v", 1),
    *_linear(_BLOCK + r"attn\.to_out", "blocks/to_out", 1),
    *_linear(_BLOCK + r"ff\.proj_in", "blocks/mlp_in", 1),
    *_linear(_BLOCK + r"ff\.proj_out", "blocks/mlp_out", 1),
    *_linear(r"norm_out\.linear", "norm_out"),
    *_linear(r"proj_out", "proj_out"),
]


def checkpoint_shapes(cfg: ExampleDiTConfig) -> dict[str, tuple[int, ...]]:
    """Checkpoint key -> shape for ``cfg`` (what the built-in checkpoint writes)."""
    d, m, p, c = cfg.hidden_dim, cfg.hidden_dim * cfg.mlp_ratio, cfg.patch_size, cfg.in_channels

    def lin(name: str, d_in: int, d_out: int) -> dict[str, tuple[int, ...]]:
        return {f"{name}.weight": (d_out, d_in), f"{name}.bias": (d_out,)}

    shapes = {"patch_embed.weight": (d, c, p, p), "patch_embed.bias": (d,)}
    shapes |= lin("time_embed.linear_1", cfg.freq_dim, d) | lin("time_embed.linear_2", d, d)
    shapes |= lin("text_proj", cfg.text_dim, d)
    for i in range(cfg.num_layers):
        shapes |= lin(f"blocks.{i}.adaLN_modulation", d, 6 * d)
        for name in ("to_q", "to_k", "to_v", "to_out"):
            shapes |= lin(f"blocks.{i}.attn.{name}", d, d)
        shapes |= lin(f"blocks.{i}.ff.proj_in", d, m) | lin(f"blocks.{i}.ff.proj_out", m, d)
    shapes |= lin("norm_out.linear", d, 2 * d) | lin("proj_out", d, c * p * p)
    return shapes
