"""Block offload on the tiny Wan pipeline (4 blocks): chunk 1 and 2, composed with sp2 and tp2, equals the
resident run, and the resident-weight peak stays within two chunks plus the non-block params."""

from __future__ import annotations

import pytest

from test_parallel_runs import TOL, run_configs


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("off")
    return run_configs(
        tmp,
        "base=parallel.dp=1",
        "off1=parallel.dp=1,offload.enabled=true,offload.chunk_size=1",
        "off2=parallel.dp=1,offload.enabled=true,offload.chunk_size=2",
        "off1sp2=parallel.dp=1,parallel.sp=2,offload.enabled=true,offload.chunk_size=1",
        "off2tp2=parallel.dp=1,parallel.tp=2,offload.enabled=true,offload.chunk_size=2",
        "bad_chunk=parallel.dp=1,offload.enabled=true,offload.chunk_size=3",
    )


@pytest.mark.parametrize("name", ["off1", "off2", "off1sp2", "off2tp2"])
def test_offload_matches_resident(results, name):
    r = results[name]
    assert "error" not in r, r
    assert r["offload"]["enabled"]
    print(f"{name}: final latents relative error vs resident {r['rel']:.3e}; "
          f"peak DiT weight bytes per device {r['peak_resident_weight_bytes']}")
    assert r["rel"] < TOL, (name, r["rel"])


@pytest.mark.parametrize("name", ["off1", "off2", "off1sp2", "off2tp2"])
def test_resident_peak_is_two_chunks_plus_non_block(results, name):
    r = results[name]
    off = r["offload"]
    bound = off["non_block_weight_bytes"] + 2 * off["chunk_weight_bytes"]["blocks"]
    assert r["peak_resident_weight_bytes"] <= bound


def test_chunk_one_holds_less_than_resident(results):
    full = results["base"]["peak_resident_weight_bytes"]
    assert results["off1"]["peak_resident_weight_bytes"] < 0.75 * full
    assert results["off2tp2"]["peak_resident_weight_bytes"] < results["off2"]["peak_resident_weight_bytes"]


def test_chunk_size_must_divide_the_blocks(results):
    assert "offload.chunk_size=3 must divide the 4 blocks" in results["bad_chunk"]["error"]
