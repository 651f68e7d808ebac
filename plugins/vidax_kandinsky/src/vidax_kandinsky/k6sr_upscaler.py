"""The latent upscalers of Kandinsky 6's super-resolution stage (diffusers ``Kandinsky6SRLatentUpscalerBank``).

The bank holds one model per spatial scale (``scales``, 2 and 4); a run loads only the one it uses, from the keys
``_models.<index of its scale>.``. Channel-last K-VAE latents (B, t, h, w, C), scaled by ``scaling_factor``, in
and out; every norm is an RMS norm (float32) FiLM-modulated by the input latents ``zq`` nearest-upsampled to the
features' grid; convolutions replicate the edge frames in time and zero-pad in space.

* x4 (``forward`` of the scale-4 model): ``input_proj`` -> pre blocks -> 2x -> mid blocks -> 2x -> post blocks ->
  output head;
* x2: ``mid_input_proj`` -> the x2 branch (adapter blocks, a finisher on the input grid, mid blocks, 2x, blocks,
  output head). The scale-2 entry also stores a backbone and a deep-supervision head that its forward never runs
  (diffusers keeps them only so the weights load): they are not built here and their keys are dropped.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
from flax import nnx

from vidax_core import CheckedConfig
from vidax_core.nn.conv import Conv

from .k6sr_vae import RMSNorm, conv3d, mirror_rules, nearest


@dataclasses.dataclass(frozen=True)
class Kandinsky6SRUpscalerConfig(CheckedConfig):
    """diffusers' ``Kandinsky6SRLatentUpscalerBank`` config.json fields (defaults the reference's: the published
    repos' config is the vendor's ``models`` list, of which diffusers reads nothing)."""

    in_channels: int = 64
    stage_channels: tuple[int, int, int] = (2048, 1024, 512)
    num_pre_blocks: int = 5
    num_mid_blocks: int = 3
    num_post_blocks: int = 3
    num_x2_adapter_blocks: int = 2
    scales: tuple[int, ...] = (2, 4)
    scaling_factor: float = 0.910344004631042
    dtype: Any = jnp.float32

    label: ClassVar[str] = "latent_upscaler/config.json (Kandinsky 6 SR)"

    def problems(self) -> list[str]:
        bad = [s for s in self.scales if s not in (2, 4)]
        return [f"scales {list(self.scales)}: each must be 2 or 4"] if bad or not self.scales else []


class PadConv(Conv):
    """``Kandinsky6SRLatentUpscalerConv3d``: edge frames replicated in time, zeros in space, odd kernel."""

    def __init__(self, cin: int, cout: int, k: int, dtype=jnp.float32):
        super().__init__(cin, cout, (k, k, k), padding=[(0, 0), (k // 2, k // 2), (k // 2, k // 2)], dtype=dtype)
        self.pad_t = k // 2

    def __call__(self, x: jax.Array) -> jax.Array:
        p = self.pad_t
        return super().__call__(jnp.pad(x, ((0, 0), (p, p), (0, 0), (0, 0), (0, 0)), mode="edge") if p else x)


class ModulatedNorm(nnx.Module):
    def __init__(self, channels: int, zq_channels: int, dtype=jnp.float32):
        self.norm = RMSNorm(channels, dtype)
        self.conv_y = conv3d(zq_channels, channels, 1, dtype=dtype)
        self.conv_b = conv3d(zq_channels, channels, 1, dtype=dtype)

    def __call__(self, x: jax.Array, zq: jax.Array) -> jax.Array:
        z = nearest(zq, x.shape[1:4])
        return self.norm(x) * self.conv_y(z) + self.conv_b(z)


class ResidualBlock(nnx.Module):
    """norm -> SiLU -> conv 3x3x3, twice, plus the (1x1 when the width changes) input."""

    def __init__(self, cin: int, cout: int, zq_channels: int, dtype=jnp.float32):
        self.norm1 = ModulatedNorm(cin, zq_channels, dtype)
        self.conv1 = PadConv(cin, cout, 3, dtype)
        self.norm2 = ModulatedNorm(cout, zq_channels, dtype)
        self.conv2 = PadConv(cout, cout, 3, dtype)
        self.shortcut = conv3d(cin, cout, 1, dtype=dtype) if cin != cout else None

    def __call__(self, x: jax.Array, zq: jax.Array) -> jax.Array:
        r = self.conv1(jax.nn.silu(self.norm1(x, zq)))
        r = self.conv2(jax.nn.silu(self.norm2(r, zq)))
        return (x if self.shortcut is None else self.shortcut(x)) + r


class Mix(nnx.Module):
    """``x + spatial_conv(x)`` (a (1, 3, 3) conv) through a 1x1 ``linear``; with ``up`` nearest 2x first."""

    def __init__(self, channels: int, dtype=jnp.float32, *, up: bool = True):
        self.up = up
        self.spatial_conv = conv3d(channels, channels, (1, 3, 3), pad=(0, 1, 1), dtype=dtype)
        self.linear = conv3d(channels, channels, 1, dtype=dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        if self.up:
            x = jnp.repeat(jnp.repeat(x, 2, axis=2), 2, axis=3)
        return self.linear(x + self.spatial_conv(x))


class OutputHead(nnx.Module):
    def __init__(self, cin: int, cout: int, zq_channels: int, dtype=jnp.float32):
        self.norm = ModulatedNorm(cin, zq_channels, dtype)
        self.conv = PadConv(cin, cout, 3, dtype)

    def __call__(self, x: jax.Array, zq: jax.Array) -> jax.Array:
        return self.conv(jax.nn.silu(self.norm(x, zq)))


def _blocks(widths: list[int], zq: int, dtype) -> nnx.List:
    return nnx.List([ResidualBlock(a, b, zq, dtype) for a, b in zip(widths[:-1], widths[1:])])


def _run(blocks, x, zq):
    for block in blocks:
        x = block(x, zq)
    return x


class X2Branch(nnx.Module):
    def __init__(self, cfg: Kandinsky6SRUpscalerConfig):
        (w1, w2, w3), c, dt = cfg.stage_channels, cfg.in_channels, cfg.dtype
        self.adapter = _blocks([w1] * (cfg.num_x2_adapter_blocks + 1), c, dt)
        self.finisher = Mix(w1, dt, up=False)
        self.mid_blocks = _blocks([w1] + [w2] * cfg.num_mid_blocks, c, dt)
        self.upsample = Mix(w2, dt)
        self.blocks = _blocks([w2] + [w3] * cfg.num_post_blocks, c, dt)
        self.output_proj = OutputHead(w3, c, c, dt)

    def __call__(self, x: jax.Array, zq: jax.Array) -> jax.Array:
        x = self.finisher(_run(self.adapter, x, zq))
        x = self.upsample(_run(self.mid_blocks, x, zq))
        return self.output_proj(_run(self.blocks, x, zq), zq)


class LatentUpscaler(nnx.Module):
    """The bank's model for ``scale`` (module docstring)."""

    def __init__(self, cfg: Kandinsky6SRUpscalerConfig, scale: int):
        cfg.check_supported()
        (w1, w2, w3), c, dt = cfg.stage_channels, cfg.in_channels, cfg.dtype
        self.scale = scale
        if scale == 2:
            self.mid_input_proj = nnx.List([PadConv(c, w1, 3, dt)])
            self.x2_branch = X2Branch(cfg)
        else:
            self.input_proj = nnx.List([PadConv(c, w1, 3, dt)])
            self.pre_blocks = _blocks([w1] * (cfg.num_pre_blocks + 1), c, dt)
            self.upsample_1 = Mix(w1, dt)
            self.mid_blocks = _blocks([w1] + [w2] * cfg.num_mid_blocks, c, dt)
            self.upsample_2 = Mix(w2, dt)
            self.post_blocks = _blocks([w2] + [w3] * cfg.num_post_blocks, c, dt)
            self.output_proj = OutputHead(w3, c, c, dt)

    def __call__(self, latents: jax.Array) -> jax.Array:
        zq = latents
        if self.scale == 2:
            return self.x2_branch(self.mid_input_proj[0](latents), zq)
        x = _run(self.pre_blocks, self.input_proj[0](latents), zq)
        x = _run(self.mid_blocks, self.upsample_1(x), zq)
        return self.output_proj(_run(self.post_blocks, self.upsample_2(x), zq), zq)


# the scale-2 entry's stored but unused backbone and deep-supervision head
_X2_UNUSED = r"(input_proj|pre_blocks|upsample_1|mid_blocks|upsample_2|post_blocks|output_proj|mid_output_head)\..*"


def used_tensors(cfg: Kandinsky6SRUpscalerConfig, tensors: Any, scale: int) -> dict:
    """The tensors of the bank's model for ``scale`` that its forward uses, under that model's own names."""
    import re

    prefix = f"_models.{cfg.scales.index(scale)}."
    unused = re.compile(_X2_UNUSED if scale == 2 else r"mid_output_head\..*")
    return {k[len(prefix):]: v for k, v in tensors.items()
            if k.startswith(prefix) and not unused.fullmatch(k[len(prefix):])}


def load_upscaler(cfg: Kandinsky6SRUpscalerConfig, tensors: Any, scale: int, put=None) -> LatentUpscaler:
    """The model of the bank for ``scale`` from a diffusers ``latent_upscaler/`` folder's tensors."""
    from vidax_core.io.load import load_model

    return load_model(lambda: LatentUpscaler(cfg, scale), used_tensors(cfg, tensors, scale), mirror_rules(".*"),
                      component="latent_upscaler", put=put)
