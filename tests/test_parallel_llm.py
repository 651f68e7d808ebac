"""The decoder-LLM text encoder tensor-parallel on 8 fake CPU devices equals one device.

Runs tests/parallel_scripts/llm_tp.py in a subprocess (fake devices must be configured before jax is imported).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vidax_core.testing.devices import run_script

SCRIPTS = Path(__file__).parent / "parallel_scripts"

CASES = [f"{m}_dp{dp}_tp{tp}" for m in ("llama", "gemma") for dp, tp in ((1, 2), (1, 4), (2, 4))]


@pytest.fixture(scope="module")
def out():
    return run_script(SCRIPTS / "llm_tp.py", timeout=600)


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
