"""The HunyuanVideo DiT's stated FLOPs per call against XLA's cost analysis of the compiled call (CPU, one block
per stacked group)."""

from __future__ import annotations

import jax.numpy as jnp
import pytest
from flax import nnx

from vidax_core.testing.flops import check_flops, staged_call
from vidax_hunyuan.dit import HunyuanDiT, HunyuanDiTConfig
from vidax_hunyuan.flops import counter

# Wide enough that the matmuls dominate as they do at real widths (elementwise work is not counted).
WIDE = dict(in_channels=16, out_channels=16, num_attention_heads=4, attention_head_dim=64, num_layers=1,
            num_single_layers=1, num_refiner_layers=1, text_embed_dim=256, pooled_projection_dim=128,
            rope_axes_dim=(16, 24, 24))


def test_flops_match_xla():
    cfg = HunyuanDiTConfig.from_config(WIDE)
    model = HunyuanDiT(cfg, rngs=nnx.Rngs(0))
    batch, grid, text = 2, (3, 16, 16), 24
    x = jnp.zeros((batch, cfg.in_channels, *grid), jnp.float32)
    t = jnp.ones((batch,), jnp.float32)
    ctx = {"hidden": jnp.zeros((batch, text, cfg.text_embed_dim), jnp.float32),
           "mask": jnp.ones((batch, text), jnp.int32), "pooled": jnp.zeros((batch, 128), jnp.float32)}
    check_flops(counter(cfg)(batch, grid, text), model, x, t, ctx, jnp.full((batch,), 6000.0), call=staged_call)


def test_flops_scale_with_blocks_and_batch():
    def f(n, m=1):
        return counter(HunyuanDiTConfig.from_config({**WIDE, "num_layers": n,
                                                     "num_single_layers": m}))(1, (3, 16, 16), 24)

    assert f(5) - f(1) == pytest.approx(4 * (f(2) - f(1))) and f(2) - f(1) < f(1)
    assert f(1, 5) - f(1) == pytest.approx(4 * (f(1, 2) - f(1)))
    assert counter(HunyuanDiTConfig.from_config(WIDE))(2, (3, 16, 16), 24) == pytest.approx(2 * f(1))
