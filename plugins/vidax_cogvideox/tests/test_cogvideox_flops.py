"""The CogVideoX DiT's stated FLOPs per call against XLA's cost analysis of the compiled call (CPU, 1 block)."""

from __future__ import annotations

import jax.numpy as jnp
import pytest
from flax import nnx

from vidax_cogvideox.dit import CogVideoXDiT, CogVideoXDiTConfig
from vidax_cogvideox.flops import counter
from vidax_core.testing.flops import check_flops, staged_call

# Wide enough that the matmuls dominate as they do at real widths (elementwise work is not counted).
WIDE = dict(num_attention_heads=4, attention_head_dim=64, in_channels=16, out_channels=16, time_embed_dim=256,
            text_embed_dim=256, num_layers=1, sample_width=32, sample_height=32, sample_frames=9, patch_size=2,
            max_text_seq_length=24)


@pytest.mark.parametrize("variant", ["1.0-2b", "1.5"])
def test_flops_match_xla(variant):
    extra = dict(patch_size_t=2, use_rotary_positional_embeddings=True, ofs_embed_dim=256) if variant == "1.5" else {}
    cfg = CogVideoXDiTConfig.from_config({**WIDE, **extra})
    model = CogVideoXDiT(cfg, rngs=nnx.Rngs(0))
    batch, grid, text = 2, (4, 16, 16), 24
    x = jnp.zeros((batch, grid[0], cfg.in_channels, grid[1], grid[2]), jnp.float32)
    t = jnp.ones((batch,), jnp.float32)
    ctx = jnp.zeros((batch, text, cfg.text_embed_dim), jnp.float32)
    args = (x, t, ctx) + ((jnp.full((batch,), 2.0, jnp.float32),) if extra else ())
    check_flops(counter(cfg)(batch, grid, text), model, *args, call=staged_call)


def test_flops_scale_with_blocks_and_batch():
    f = {n: counter(CogVideoXDiTConfig.from_config({**WIDE, "num_layers": n}))(1, (4, 16, 16), 24) for n in (1, 2, 5)}
    assert f[5] - f[1] == pytest.approx(4 * (f[2] - f[1])) and f[2] - f[1] < f[1]
    assert counter(CogVideoXDiTConfig.from_config(WIDE))(2, (4, 16, 16), 24) == pytest.approx(2 * f[1])
