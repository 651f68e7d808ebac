"""Tiny Cosmos3 DiTs (Nano- and Edge-style, GQA 4/2) under dp2 x SP2 x TP2 on 8 fake CPU devices equal
one device. Runs parallel_cosmos3.py (beside this file) in a subprocess: fake devices must be configured before JAX
is imported. The tolerance is the unsharded forward's own fp32 noise floor (one-ulp parameter nudge)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from vidax_core.testing.devices import xla_flags

pytestmark = pytest.mark.xdist_group("cosmos3_parallel")

MESHES = ["dp2_sp2_tp2"]


@pytest.fixture(scope="module")
def out():
    script = os.path.join(os.path.dirname(__file__), "parallel_cosmos3.py")
    env = dict(os.environ, XLA_FLAGS=xla_flags(8), JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, script], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mesh", MESHES)
@pytest.mark.parametrize("kind", ["nano", "edge"])
def test_sharded_dit_equals_one_device(out, kind, mesh):
    r, floor = out[f"{kind}_{mesh}"], out[f"{kind}_floor"]
    print(f"cosmos3 {kind} {mesh}: rel {r['rel']:.2e} (floor {floor:.2e}), k spec {r['k_spec']}, "
          f"all-reduces {r['all_reduce']}, all-to-alls {r['all_to_all']}")
    assert r["rel"] <= 4 * floor
    if "tp2" in mesh:  # the key/value projections really split by KV head, and the partial sums were reduced
        assert r["k_spec"] == "P(None, None, 'tp')" and r["all_reduce"] >= 1
    if "sp2" in mesh:  # Ulysses: the video tokens went through the all-to-all
        assert r["all_to_all"] >= 1
