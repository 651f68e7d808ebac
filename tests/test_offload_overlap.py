"""Offload streams its chunks from pinned host memory, holds the streamed weights on the host once, and reports
how much of each chunk's transfer its compute hides (``output.metrics.offload``), with latents equal to the
resident run's.

The CPU client has ``pinned_host`` memory, so with ``VIDAX_OFFLOAD_COPY=1`` the path an accelerator takes (pinned
chunks copied to the device by the transfer thread) is the one tested here; without it the CPU keeps each chunk
as device arrays and uses it in place.
"""

from __future__ import annotations

import os

import jax
import numpy as np
from flax import nnx

import vidax

DEMO = os.path.join(os.path.dirname(__file__), "..", "configs", "demo.yaml")
FAST = ("sampling.num_steps=4", "sampling.height=64", "sampling.width=64", "sampling.num_frames=5",
        "output.path=null")


def test_pinned_chunks_overlap_metrics_and_equal_latents(monkeypatch):
    monkeypatch.setenv("VIDAX_OFFLOAD_COPY", "1")
    with vidax.load(DEMO, *FAST) as pipe:
        resident = pipe().latents
    with vidax.load(DEMO, *FAST, "offload.enabled=true") as pipe:
        expert = pipe._model.experts[0]
        pool = expert.host["blocks"]
        leaves = jax.tree.leaves(pool.chunks)
        assert leaves and all(a.sharding.memory_kind == "pinned_host" for a in leaves)
        assert len(pool) == pool.num_blocks  # chunk_size 1: one chunk per block
        # the module keeps only shapes of the streamed group: the host holds those weights once, in the chunks
        assert all(isinstance(a, jax.ShapeDtypeStruct) for a in jax.tree.leaves(nnx.state(expert.model.blocks)))
        out = pipe()
    np.testing.assert_allclose(np.asarray(out.latents), np.asarray(resident), rtol=0, atol=1e-5)
    off = out.metrics["offload"]
    assert off["host_memory"] == "pinned_host"
    ov = off["overlap"]["blocks"]
    assert ov is not None, off
    assert ov["h2d_s_per_chunk"] > 0 and ov["compute_s_per_chunk"] > 0 and ov["streamed_s_per_chunk"] > 0
    assert 0.0 <= ov["hidden_fraction"] <= 1.0
    # the timing probe keeps the two-chunk bound on resident weights
    assert (out.metrics["peak_resident_weight_bytes"]
            == off["non_block_weight_bytes"] + 2 * off["chunk_weight_bytes"]["blocks"])
