"""The HunyuanVideo-1.5 DiT's stated FLOPs per call against XLA's cost analysis of the compiled call (CPU, one
double block): text-to-video, image-to-video (SigLIP tokens join the joint attention) and the meanflow variant
(``timestep_r``); and how the count scales with blocks and batch."""

from __future__ import annotations

import jax.numpy as jnp
import pytest
from flax import nnx

from vidax_core.testing.flops import check_flops, staged_call
from vidax_hunyuan.dit15 import HunyuanDiT15, HunyuanDiT15Config
from vidax_hunyuan.flops import counter15
from vidax_hunyuan.hunyuan15_presets import BYT5_LENGTH, IMAGE_TOKENS

# Wide enough that the matmuls dominate as they do at real widths (elementwise work is not counted).
WIDE = dict(in_channels=33, out_channels=16, num_attention_heads=4, attention_head_dim=64, num_layers=1,
            num_refiner_layers=1, text_embed_dim=256, text_embed_2_dim=128, image_embed_dim=128,
            rope_axes_dim=(16, 24, 24), task_type="t2v")
BATCH, GRID, TEXT = 2, (3, 16, 16), 24


def inputs(cfg: HunyuanDiT15Config) -> tuple:
    """(latents, timestep, context[, timestep_r]) of one call as the pipelines make it: Qwen and byT5 states at
    their padded lengths, SigLIP tokens for image-to-video, ``timestep_r`` for meanflow."""
    b = BATCH
    ctx = {"hidden": jnp.zeros((b, TEXT, cfg.text_embed_dim), jnp.float32), "mask": jnp.ones((b, TEXT), jnp.int32),
           "hidden_2": jnp.zeros((b, BYT5_LENGTH, cfg.text_embed_2_dim), jnp.float32),
           "mask_2": jnp.ones((b, BYT5_LENGTH), jnp.int32)}
    if cfg.task_type == "i2v":
        ctx["image"] = jnp.ones((b, IMAGE_TOKENS, cfg.image_embed_dim), jnp.float32)
    args = (jnp.zeros((b, cfg.in_channels, *GRID), jnp.float32), jnp.full((b,), 900.0), ctx)
    return args + ((jnp.full((b,), 500.0),) if cfg.use_meanflow else ())


@pytest.mark.parametrize("over", [{}, {"task_type": "i2v"}, {"task_type": "i2v", "use_meanflow": True}],
                         ids=["t2v", "i2v", "i2v-meanflow"])
def test_flops_match_xla(over):
    cfg = HunyuanDiT15Config.from_config({**WIDE, **over})
    model = HunyuanDiT15(cfg, rngs=nnx.Rngs(0))
    check_flops(counter15(cfg)(BATCH, GRID, TEXT), model, *inputs(cfg), call=staged_call)


def test_image_tokens_count_only_for_image_to_video():
    t2v, i2v = (counter15(HunyuanDiT15Config.from_config({**WIDE, "task_type": k}))(1, GRID, TEXT)
                for k in ("t2v", "i2v"))
    explicit = counter15(HunyuanDiT15Config.from_config(WIDE), image_tokens=IMAGE_TOKENS)(1, GRID, TEXT)
    assert i2v > t2v and explicit == i2v


def test_flops_scale_with_blocks_and_batch():
    cfg = HunyuanDiT15Config.from_config(WIDE)

    def f(n):
        return counter15(HunyuanDiT15Config.from_config({**WIDE, "num_layers": n}))(1, GRID, TEXT)

    assert f(5) - f(1) == pytest.approx(4 * (f(2) - f(1))) and f(2) - f(1) < f(1)
    assert counter15(HunyuanDiT15Config.from_config({**WIDE, "num_layers": 5}))(1, GRID, TEXT,
                                                                                 {"double_blocks": 2}) == f(2)
    assert counter15(cfg)(2, GRID, TEXT) == pytest.approx(2 * f(1))
