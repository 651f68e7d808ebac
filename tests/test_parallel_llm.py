"""The decoder-LLM text encoder tensor-parallel on 8 fake CPU devices equals one device.

Runs tests/parallel_scripts/llm_tp.py in a subprocess (fake devices must be configured before jax is imported).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "parallel_scripts", "llm_tp.py")
CASES = [f"{m}_dp{dp}_tp{tp}" for m in ("llama", "gemma") for dp, tp in ((1, 2), (1, 4), (2, 4))]


@pytest.fixture(scope="module")
def out():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, SCRIPT], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", CASES)
def test_tensor_parallel_encoder_equals_one_device(out, case):
    r = out[case]
    tp = int(case.rsplit("tp", 1)[1])
    print(f"{case}: rel {r['rel']:.2e}, max abs {r['max_abs']:.2e}, all-reduces {r['all_reduce']}")
    assert r["rel"] < 1e-5
    # column-parallel q/k/v and gate/up, row-parallel o and down: each device holds 1/tp of the heads
    assert "'tp'" in r["q_spec"] and "'tp'" in r["k_spec"] and "'tp'" in r["o_spec"] and "'tp'" in r["down_spec"]
    assert r["q_shard_shape"][-1] == 8 * 8 // tp
    assert r["all_reduce"] >= 2  # attention output and MLP output reduced once each per layer (scan body)
