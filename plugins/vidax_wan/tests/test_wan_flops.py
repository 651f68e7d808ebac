"""The Wan DiT's stated FLOPs per call against XLA's cost analysis of the compiled call (CPU, 1 block)."""

from __future__ import annotations

import jax.numpy as jnp
import pytest
from flax import nnx

from vidax_core.testing.flops import check_flops
from vidax_wan.dit import WanDiT, WanDiTConfig
from vidax_wan.flops import counter

# Wide enough that the matmuls dominate as they do at real widths (elementwise work is not counted).
WIDE = dict(patch_size=(1, 2, 2), num_attention_heads=4, attention_head_dim=64, in_channels=16, out_channels=16,
            text_dim=256, freq_dim=256, ffn_dim=1024, num_layers=1)


@pytest.mark.parametrize("variant", ["t2v", "i2v"])
def test_flops_match_xla(variant):
    extra = dict(image_dim=128, added_kv_proj_dim=256) if variant == "i2v" else {}
    cfg = WanDiTConfig.from_config({**WIDE, **extra})
    model = WanDiT(cfg, rngs=nnx.Rngs(0))
    batch, grid, text = 2, (3, 16, 16), 24
    x = jnp.zeros((batch, cfg.in_channels, *grid), jnp.float32)
    t = jnp.ones((batch,), jnp.float32)
    ctx = jnp.zeros((batch, text, cfg.text_dim), jnp.float32)
    args = (x, t, ctx) + ((jnp.zeros((batch, 257, 128), jnp.float32),) if extra else ())
    check_flops(counter(cfg)(batch, grid, text), model, *args)


def test_flops_scale_with_blocks_and_batch():
    f = {n: counter(WanDiTConfig.from_config({**WIDE, "num_layers": n}))(1, (3, 16, 16), 24) for n in (1, 2, 5)}
    assert f[5] - f[1] == pytest.approx(4 * (f[2] - f[1])) and f[2] - f[1] < f[1]
    assert counter(WanDiTConfig.from_config(WIDE))(2, (3, 16, 16), 24) == pytest.approx(2 * f[1])
