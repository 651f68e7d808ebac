"""The AnyFlow DiTs' stated FLOPs per call against XLA's cost analysis of the compiled call (CPU, 1 block): the
bidirectional DiT, and FAR's sampling call over a cached past and cache-writing call (compressed and full chunks,
chunk-causal)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from vidax_core.causal.kv import CacheSpec, Segment, View, allocate
from vidax_core.testing.flops import check_flops, staged_call
from vidax_anyflow.dit import AnyFlowDiT, AnyFlowDiTConfig
from vidax_anyflow.flops import counter, far_call_flops

# Wide enough that the matmuls dominate as they do at real widths (elementwise work is not counted).
WIDE = dict(patch_size=(1, 2, 2), num_attention_heads=4, attention_head_dim=64, in_channels=16, out_channels=16,
            text_dim=256, freq_dim=256, ffn_dim=1024, num_layers=1, compressed_patch_size=(1, 4, 4),
            full_chunk_limit=3, chunk_partition=(1, 2, 2))
B, TEXT = 2, 24


def inputs(cfg, frames):
    return (jnp.zeros((B, cfg.in_channels, frames, 16, 16), jnp.float32), jnp.ones((B,), jnp.float32),
            jnp.zeros((B, TEXT, cfg.text_dim), jnp.float32))


def test_bidirectional_flops_match_xla():
    cfg = AnyFlowDiTConfig.from_config(WIDE)
    check_flops(counter(cfg)(B, (3, 16, 16), TEXT), AnyFlowDiT(cfg, rngs=nnx.Rngs(0)), *inputs(cfg, 3),
                next_timestep=jnp.zeros((B,), jnp.float32))


@pytest.mark.parametrize("kind", ["sampling", "cache-writing"])
def test_far_call_flops_match_xla(kind):
    cfg = AnyFlowDiTConfig.from_config(WIDE, far=True)
    model = AnyFlowDiT(cfg, rngs=nnx.Rngs(0))
    spec = CacheSpec(1, 4, 64, (Segment("far", 96), Segment("near", 256)))
    offset = jnp.zeros((B,), jnp.int32)
    if kind == "sampling":  # 2 frames (128 tokens) over 80 compressed + 128 recent cached keys, 0 zero keys
        view = View(read=(("far", 80), ("near", 128)))
        cache = allocate(spec, B).with_view(view)
        counted = far_call_flops(cfg, B, (2, 16, 16), TEXT, past=208)
        check_flops(counted, model, *inputs(cfg, 2), jnp.zeros((B,), jnp.float32), kv_cache=cache,
                    frame_offset=offset)
    else:  # a compressed chunk of 2 frames (32 tokens) then 2 full chunks of 2 frames, over 16 cached keys
        view = View(read=(("far", 16),), blocks=(32, 128, 128), write=(("far", 32, 0), ("near", 256, 32)))
        cache = allocate(spec, B).with_view(view, jnp.asarray(np.zeros(2, np.int32)))
        counted = far_call_flops(cfg, B, (4, 16, 16), TEXT, past=16, compressed=32, blocks=(32, 128, 128))
        check_flops(counted, model, *inputs(cfg, 4), jnp.zeros((B,), jnp.float32), kv_cache=cache,
                    frame_offset=offset, compressed=jnp.zeros((B, 16, 2, 16, 16), jnp.float32),
                    compressed_offset=offset, call=staged_call)  # the last block's output kept live
