"""Kandinsky 6's stated FLOPs per DiT call against XLA's cost analysis of the compiled call (CPU, one block per
stack): the fused video+audio DiT with both streams and with the video alone, and the SR DiT (its NABLA attention
swapped for one dense einsum, the count it states: NABLA computes fewer, data-dependent blocks). Wide enough that
the matmuls dominate, as at real widths. A count missing the cross-stream attention, or the SR's self-attention,
lands outside the 5% tolerance."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from flax import nnx

from vidax_core import attention
from vidax_core import flops as F
from vidax_core.testing.flops import check_flops
from vidax_kandinsky import k6_flops, k6sr_flops
from vidax_kandinsky.k6_dit import Kandinsky6DiT, Kandinsky6DiTConfig
from vidax_kandinsky.k6sr_dit import Kandinsky6SRDiT, Kandinsky6SRDiTConfig

pytestmark = pytest.mark.xdist_group("kandinsky6_flops")

WIDE = dict(in_visual_dim=4, out_visual_dim=4, in_text_dim=64, in_text_dim2=32, time_dim=64, patch_size=(1, 2, 2),
            model_dim=512, ff_dim=1024, num_text_blocks=1, num_visual_blocks=1, axes_dims=(16, 24, 24),
            visual_cond=True, in_audio_dim=6, out_audio_dim=6, model_dim_a=384, time_dim_a=64, ff_dim_a=768,
            axes_dims_a=(16, 24, 24), ca_rope=True, cross_gates=True, fix_modulation=True,
            visual_token_type_num_embeddings=2)
BATCH, GRID, TEXT, AUDIO = 2, (3, 16, 16), 24, 192


def staged(model, latents, t, ctx):
    """The staged forward returning the prediction and the last carry (no stream of the last block dead)."""
    x, aux = model.pre(latents, t, ctx)
    for name in model.block_groups:
        graphdef, state = nnx.split(getattr(model, name))
        x = model.run_block_group(name, graphdef, state, x, aux)
    return model.post(x, aux, jax.tree.map(lambda a: a.shape, latents)), x


def ti2va_case(audio: bool):
    cfg = Kandinsky6DiTConfig.from_config(WIDE)
    video = jnp.zeros((BATCH, *GRID, cfg.in_channels), jnp.float32)
    latents = {"video": video, "audio": jnp.zeros((BATCH, AUDIO, cfg.in_audio_dim), jnp.float32)} if audio else video
    ctx = {"hidden": jnp.zeros((BATCH, TEXT, cfg.in_text_dim)), "pooled": jnp.zeros((BATCH, cfg.in_text_dim2))}
    return cfg, Kandinsky6DiT(cfg, rngs=nnx.Rngs(0)), (latents, jnp.full((BATCH,), 900.0), ctx)


@pytest.mark.parametrize("audio", [True, False], ids=["video+audio", "video"])
def test_ti2va_flops_match_xla(audio):
    cfg, model, args = ti2va_case(audio)
    counted = k6_flops.dit_flops(cfg, BATCH, GRID, TEXT, AUDIO if audio else 0)
    xla = counted / check_flops(counted, model, *args, call=staged)
    if audio:  # the cross-stream attention is counted: without it the count is far off
        s = F.tokens(GRID, cfg.patch_size)
        wrong = counted - F.attention(BATCH, cfg.heads, s, AUDIO, cfg.head_dim) \
            - F.attention(BATCH, cfg.heads_a, AUDIO, s, cfg.head_dim_a)
        assert abs(wrong / xla - 1) > 0.05


def test_sr_flops_match_xla(monkeypatch):
    from vidax_core.attention import nabla

    monkeypatch.setattr(nabla, "nabla_attention", lambda q, k, v, **kw: attention.einsum_attention(q, k, v))
    cfg = Kandinsky6SRDiTConfig(in_visual_dim=8, out_visual_dim=8, time_dim=64, model_dim=512, ff_dim=1024,
                                num_visual_blocks=1, axes_dims=(16, 24, 24))
    grid = (2, 16, 16)
    args = (jnp.zeros((BATCH, *grid, cfg.in_channels), jnp.float32), jnp.full((BATCH,), 900.0))
    model = Kandinsky6SRDiT(cfg, rngs=nnx.Rngs(0))
    counted = k6sr_flops.counter(cfg)(BATCH, grid, 0)
    xla = counted / check_flops(counted, model, *args, call=lambda m, *a: staged(m, *a, None))
    s = F.tokens(grid, cfg.patch_size)
    assert abs((counted - F.attention(BATCH, cfg.heads, s, s, cfg.head_dim)) / xla - 1) > 0.05


def test_counts_scale_with_blocks_and_batch():
    cfg = Kandinsky6DiTConfig.from_config({**WIDE, "num_visual_blocks": 5})
    f = lambda n, b=1: k6_flops.dit_flops(cfg, b, GRID, TEXT, AUDIO, {"visual_blocks": n})  # noqa: E731
    assert f(5) - f(1) == pytest.approx(4 * (f(2) - f(1)))
    assert f(1, 2) == pytest.approx(2 * f(1))
    sr = Kandinsky6SRDiTConfig(num_visual_blocks=4, model_dim=128, ff_dim=256, axes_dims=(8, 12, 12))
    g = lambda n: k6sr_flops.dit_flops(sr, 1, (2, 16, 16), {"visual_blocks": n})  # noqa: E731
    assert g(4) - g(1) == pytest.approx(3 * (g(2) - g(1)))
