"""The tiny Wan pipeline under tensor, sequence and data parallelism on 8 fake CPU devices equals one device.

One subprocess (the fake device count must be set before jax is imported) runs every configuration through
``vidax_core.runner.pipeline.run`` and reports the relative error of the final latents against the 1-device run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(__file__)
SCRIPT = os.path.join(HERE, "parallel_scripts", "parallel_runs.py")
TOL = 1e-5


def run_configs(tmp_path, *configs: str) -> dict:
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu",
               JAX_DEFAULT_MATMUL_PRECISION="highest")
    proc = subprocess.run([sys.executable, SCRIPT, str(tmp_path / "ckpt"), str(tmp_path / "work"), *configs],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("par")
    return run_configs(
        tmp,
        "base=parallel.dp=1",
        "tp2=parallel.dp=1,parallel.tp=2",
        "tp4=parallel.dp=1,parallel.tp=4",
        "sp2=parallel.dp=1,parallel.sp=2",
        "sp4=parallel.dp=1,parallel.sp=4",
        "tp2sp2=parallel.dp=1,parallel.tp=2,parallel.sp=2",
        "dp2=parallel.dp=2",
        "dp_null=parallel.tp=1",  # 8 devices -> dp 8 does not divide the CFG batch of 2
    )


@pytest.mark.parametrize("name, dp, tp, sp", [("tp2", 1, 2, 1), ("tp4", 1, 4, 1), ("sp2", 1, 1, 2),
                                              ("sp4", 1, 1, 4), ("tp2sp2", 1, 2, 2), ("dp2", 2, 1, 1)])
def test_matches_single_device(results, name, dp, tp, sp):
    r = results[name]
    assert "error" not in r, r
    assert r["parallel"]["dp"] == dp and r["parallel"]["tp"] == tp and r["parallel"]["sp"] == sp
    print(f"{name}: final latents relative error vs 1 device {r['rel']:.3e}; "
          f"DiT weight bytes per device {r.get('peak_resident_weight_bytes', 'n/a')}")
    assert r["rel"] < TOL, (name, r["rel"])


def test_tp_shards_the_weights(results):
    full = results["base"]["peak_resident_weight_bytes"]
    assert results["tp2"]["peak_resident_weight_bytes"] < 0.7 * full
    assert results["tp4"]["peak_resident_weight_bytes"] < results["tp2"]["peak_resident_weight_bytes"]
    assert results["sp2"]["peak_resident_weight_bytes"] == full  # sp replicates weights


def test_dp_null_on_8_devices_is_refused_with_the_key(results):
    err = results["dp_null"]["error"]
    assert "parallel.dp" in err and "batch of 2" in err
