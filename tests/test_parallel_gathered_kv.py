"""Replicated queries over sequence-sharded keys (``ulysses.gathered_kv_attention``) under SP x TP on 8 fake CPU
devices equal the single-device attention, with and without a key mask.

Runs tests/parallel_scripts/gathered_kv.py in a subprocess (fake devices must be configured before jax is imported).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vidax_core.testing.devices import run_script

SCRIPTS = Path(__file__).parent / "parallel_scripts"

MESHES = ("dp1_sp4_tp1", "dp1_sp2_tp2", "dp2_sp2_tp2", "dp1_sp8_tp1")


@pytest.fixture(scope="module")
def out():
    return run_script(SCRIPTS / "gathered_kv.py", timeout=300)


@pytest.mark.parametrize("mesh", MESHES)
def test_gathered_kv_attention_matches_single_device(out, mesh):
    r = out[mesh]
    assert r["err"] < 1e-6 and r["err_masked"] < 1e-6, r
    assert r["mask_moves"] > 0.1, r  # the mask reaches keys on other shards: a per-shard mask would miss it
    assert "'sp'" not in r["spec"], r  # the output stays replicated over sp like the queries
    assert r["all_gather"] >= 1 and r["all_to_all"] == 0, r  # keys/values gathered; nothing else exchanged
