"""Ulysses (plain and joint text+video) attention and a sharded Wan DiT forward on 8 fake CPU devices.

Runs tests/parallel_scripts/units.py in a subprocess (fake devices must be configured before jax is imported).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "parallel_scripts", "units.py")


@pytest.fixture(scope="module")
def out():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, SCRIPT], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


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
