"""Ulysses (plain and joint text+video) attention and a sharded Wan DiT forward on 8 fake CPU devices.

Runs tests/parallel_scripts/units.py in a subprocess (fake devices must be configured before jax is imported).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vidax_core.testing.devices import run_script

SCRIPTS = Path(__file__).parent / "parallel_scripts"


@pytest.fixture(scope="module")
def out():
    return run_script(SCRIPTS / "units.py", timeout=600)


@pytest.mark.parametrize("mesh", ["dp1_sp4_tp1", "dp1_sp2_tp2", "dp2_sp2_tp2"])
def test_ulysses_attention_variants_match_plain_attention(out, mesh):
    r = out[f"attn_{mesh}"]
    for key in ("self", "cross", "joint_text", "joint_video"):
        assert r[key] < 1e-6, (key, r[key])
    # the video output stays sequence-sharded; only the video part went through the all-to-all (3 in, 1 out)
    assert "'sp'" in r["video_out_spec"]
    assert r["joint_all_to_all"] == 4


def test_sharded_dit_forward(out):
    r = out["dit_dp1_sp2_tp2"]
    assert r["rel"] < 1e-5
    assert r["all_to_all"] == 4  # q, k, v in and the output back, around self-attention only (scan body)
    assert r["all_reduce"] >= 1  # row-parallel reductions / full-width q,k RMS statistics
