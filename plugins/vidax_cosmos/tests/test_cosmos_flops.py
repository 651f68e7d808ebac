"""The Cosmos DiT's stated FLOPs per call against XLA's cost analysis of the compiled call (CPU, 1 block)."""

from __future__ import annotations

import jax.numpy as jnp
import pytest
from flax import nnx

from vidax_core.testing.flops import check_flops
from vidax_cosmos.dit import CosmosDiT, CosmosDiTConfig
from vidax_cosmos.flops import counter

# Wide enough that the matmuls dominate as they do at real widths (elementwise work is not counted).
WIDE = dict(in_channels=17, out_channels=16, num_attention_heads=4, attention_head_dim=64, num_layers=1,
            mlp_ratio=4.0, text_embed_dim=256, adaln_lora_dim=64, max_size=(16, 64, 64), patch_size=(1, 2, 2),
            crossattn_proj_in_channels=512, encoder_hidden_states_channels=256)


def test_flops_match_xla():
    cfg = CosmosDiTConfig.from_config(WIDE)
    model = CosmosDiT(cfg, rngs=nnx.Rngs(0))
    batch, grid, text = 2, (3, 16, 16), 24
    x = jnp.zeros((batch, 16, *grid), jnp.float32)
    t = jnp.ones((batch, grid[0]), jnp.float32)
    ctx = jnp.zeros((batch, text, cfg.context_dim), jnp.float32)
    check_flops(counter(cfg)(batch, grid, text), model, x, t, ctx)


def test_flops_scale_with_blocks_and_batch():
    f = {n: counter(CosmosDiTConfig.from_config({**WIDE, "num_layers": n}))(1, (3, 16, 16), 24) for n in (1, 2, 5)}
    assert f[5] - f[1] == pytest.approx(4 * (f[2] - f[1])) and f[2] - f[1] < f[1]
    assert counter(CosmosDiTConfig.from_config(WIDE))(2, (3, 16, 16), 24) == pytest.approx(2 * f[1])
