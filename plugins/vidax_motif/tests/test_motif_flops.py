"""The Motif-Video DiT's stated FLOPs per call against XLA's cost analysis of the compiled call (CPU, one block per
stacked group): every stage with the text cross-attention in both block kinds and SigLIP image tokens in the
conditioning stream; and how the count scales with blocks and batch."""

from __future__ import annotations

import jax.numpy as jnp
import pytest
from flax import nnx

from vidax_core.testing.flops import check_flops, staged_call
from vidax_motif.dit import MotifDiT, MotifDiTConfig
from vidax_motif.flops import counter

# Wide enough that the matmuls dominate as they do at real widths (elementwise work is not counted).
WIDE = dict(in_channels=33, out_channels=16, num_attention_heads=4, attention_head_dim=64, num_layers=1,
            num_single_layers=2, num_decoder_layers=1, text_embed_dim=256, image_embed_dim=128,
            rope_axes_dim=(16, 24, 24), enable_text_cross_attention_dual=True, enable_text_cross_attention_single=True)
BATCH, GRID, TEXT, IMAGE = 2, (3, 16, 16), 24, 16


def test_flops_match_xla():
    cfg = MotifDiTConfig.from_config(WIDE)
    b = BATCH
    ctx = {"hidden": jnp.zeros((b, TEXT, cfg.text_embed_dim), jnp.float32), "mask": jnp.ones((b, TEXT), jnp.int32)}
    args = (jnp.zeros((b, cfg.in_channels, *GRID), jnp.float32), jnp.full((b,), 900.0), ctx)
    check_flops(counter(cfg, IMAGE)(b, GRID, TEXT), MotifDiT(cfg, rngs=nnx.Rngs(0)), *args, call=staged_call,
                image_embeds=jnp.ones((b, IMAGE, cfg.image_embed_dim), jnp.float32))


def test_flops_scale_with_blocks_and_batch():
    def f(**over):
        return counter(MotifDiTConfig.from_config({**WIDE, **over}))(1, GRID, TEXT)

    assert f(num_layers=5) - f() == pytest.approx(4 * (f(num_layers=2) - f()))
    assert f(num_single_layers=4, num_decoder_layers=3) - f() == pytest.approx(2 * (f(num_single_layers=3,
                                                                                      num_decoder_layers=2) - f()))
    cfg = MotifDiTConfig.from_config({**WIDE, "num_layers": 5})
    assert counter(cfg)(1, GRID, TEXT, {"dual_blocks": 1}) == f()
    assert counter(cfg)(2, GRID, TEXT) == pytest.approx(2 * counter(cfg)(1, GRID, TEXT))
    assert counter(MotifDiTConfig.from_config(WIDE), IMAGE)(1, GRID, TEXT) > f()
