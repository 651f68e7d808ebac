"""The LTX-Video DiT's stated FLOPs per call against XLA's cost analysis of the compiled call (CPU, 1 block)."""

from __future__ import annotations

import jax.numpy as jnp
import pytest
from flax import nnx

from vidax_core.testing.flops import check_flops
from vidax_ltx.dit import LTXDiT, LTXDiTConfig, video_coords
from vidax_ltx.flops import counter

# Wide enough that the matmuls dominate as they do at real widths (elementwise work is not counted).
WIDE = dict(in_channels=128, out_channels=128, num_attention_heads=4, attention_head_dim=64, cross_attention_dim=256,
            num_layers=1, caption_channels=256)


def test_flops_match_xla():
    cfg = LTXDiTConfig.from_config(WIDE)
    model = LTXDiT(cfg, rngs=nnx.Rngs(0))
    batch, grid, text = 2, (3, 8, 12), 24
    s = grid[0] * grid[1] * grid[2]
    x = jnp.zeros((batch, s, cfg.in_channels), jnp.float32)
    t = jnp.ones((batch,), jnp.float32)
    ctx = {"hidden": jnp.zeros((batch, text, cfg.caption_channels), jnp.float32),
           "mask": jnp.ones((batch, text), bool)}
    coords = jnp.broadcast_to(jnp.asarray(video_coords(grid, 25.0)), (batch, s, 3))
    check_flops(counter(cfg)(batch, grid, text), model, x, t, ctx, coords)


def test_flops_scale_with_blocks_and_batch():
    f = {n: counter(LTXDiTConfig.from_config({**WIDE, "num_layers": n}))(1, (3, 8, 12), 24) for n in (1, 2, 5)}
    assert f[5] - f[1] == pytest.approx(4 * (f[2] - f[1])) and f[2] - f[1] < f[1]
    assert counter(LTXDiTConfig.from_config(WIDE))(2, (3, 8, 12), 24) == pytest.approx(2 * f[1])
