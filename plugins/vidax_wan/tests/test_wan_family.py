"""The core's family checks (vidax_core.testing.FamilyTests) on a tiny Wan2.1 T2V (4 heads, 4 blocks), plus what
is particular to Wan's numbers: TP 4, SP 4, DP over the two CFG halves, offload chunk sizes, the resident-weight
peak, and the one-line refusals (dp that does not divide the CFG batch, a chunk size that does not divide)."""

from __future__ import annotations

import os

import pytest

from vidax_core.testing.family import FamilyTests
from vidax_core.testing.tiny.wan import save_tiny_wan

pytestmark = pytest.mark.xdist_group("wan_family")


class TestWanFamily(FamilyTests):
    model_id = "wan2.1-t2v-1.3b"
    overrides = ("prompt=a small red fox runs in the snow", "negative_prompt=blurry", "sampling.num_steps=2",
                 "sampling.height=64", "sampling.width=64", "sampling.num_frames=5", "sampling.guidance_scale=5.0",
                 "sampling.max_sequence_length=16")
    golden = os.path.join(os.path.dirname(__file__), "golden", "wan_tiny_sharding.json")
    tp2_weight_fraction = 0.7
    parallel_configs = {
        **FamilyTests.TP_ONLY,
        **FamilyTests.parallel_configs,
        "tp4": ("parallel.dp=1", "parallel.tp=4"),
        "sp4": ("parallel.dp=1", "parallel.sp=4"),
        "dp2": ("parallel.dp=2",),
    }
    offload_configs = {
        **FamilyTests.OFFLOAD_ONLY,
        **FamilyTests.offload_configs,
        "off2": ("parallel.dp=1", "offload.enabled=true", "offload.chunk_size=2"),
        "off2tp2": ("parallel.dp=1", "parallel.tp=2", "offload.enabled=true", "offload.chunk_size=2"),
    }

    extra_configs = {
        "dp_null": ("parallel.tp=1",),  # 8 devices -> dp 8 does not divide the CFG batch of 2
        "bad_chunk": ("parallel.dp=1", "offload.enabled=true", "offload.chunk_size=3"),
    }

    @staticmethod
    def make_checkpoint(folder):
        save_tiny_wan(folder, seed=3, dit={"num_attention_heads": 4, "num_layers": 4})

    def test_tp4_shards_more_than_tp2_and_sp4_not_at_all(self, family_runs):
        full = family_runs["single"]["peak_resident_weight_bytes"]
        assert family_runs["tp4"]["peak_resident_weight_bytes"] < family_runs["tp2"]["peak_resident_weight_bytes"]
        assert family_runs["sp4"]["peak_resident_weight_bytes"] == full

    def test_offload_peak_is_two_chunks_plus_non_block(self, family_runs):
        full = family_runs["single"]["peak_resident_weight_bytes"]
        for name in self.offload_configs:
            off = family_runs[name]["offload"]
            bound = off["non_block_weight_bytes"] + 2 * off["chunk_weight_bytes"]["blocks"]
            assert family_runs[name]["peak_resident_weight_bytes"] <= bound, name
        assert family_runs["offload"]["peak_resident_weight_bytes"] < 0.75 * full
        assert family_runs["off2tp2"]["peak_resident_weight_bytes"] < family_runs["off2"]["peak_resident_weight_bytes"]

    def test_refusals_name_the_key(self, family_runs):
        err = family_runs["dp_null"]["error"]
        assert "parallel.dp" in err and "batch of 2" in err
        assert "offload.chunk_size=3 must divide the 4 blocks" in family_runs["bad_chunk"]["error"]
