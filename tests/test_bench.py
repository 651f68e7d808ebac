"""``vidax bench`` on the tiny built-in checkpoint: JSON + markdown outputs, the diffusers reference, sweeps."""

from __future__ import annotations

import json
import sys

import pytest

from vidax_core.bench import command as bench
from vidax_core.cli import main
from vidax_core.errors import UserError

pytestmark = pytest.mark.xdist_group("bench")  # the cases share a compilation cache: keep them on one worker

TINY = ["model.id=wan2.1-t2v-1.3b", "model.checkpoint=builtin:tiny-random", "prompt=a fox", "negative_prompt=blur",
        "sampling.num_steps=3", "sampling.height=32", "sampling.width=32", "sampling.num_frames=1",
        "sampling.max_sequence_length=16", "runtime.compilation_cache=true"]
METRICS = ("load_s", "compile_s", "per_step_s", "decode_s", "total_s", "peak_rss_mb")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return f"runtime.compilation_cache_dir={tmp_path_factory.mktemp('jaxcache')}"


def _bench(tmp_path, *args):
    rc = main(["bench", *args, "--out", str(tmp_path), "--name", "b", "--quiet"])
    assert rc == 0
    report = json.loads((tmp_path / "b.json").read_text())
    md = (tmp_path / "b.md").read_text()
    return report, md


def test_bench_writes_json_and_markdown(tmp_path, cache_dir, capsys):
    # the default mode: every case in its own subprocess
    report, md = _bench(tmp_path, *TINY, cache_dir)
    assert [r["label"] for r in report["rows"]] == ["base"]
    m = report["rows"][0]["vidax"]
    for key in METRICS:
        assert isinstance(m[key], float) and m[key] >= 0, key
    assert m["num_steps"] == 3 and m["engine"] == "vidax" and m["backend"] == "cpu"
    assert m["device_peak_bytes"] is None  # the CPU backend reports no memory stats: "n/a" in the table
    assert m["peak_resident_weight_bytes"] > 0
    assert report["isolation"] == "subprocess per case"
    assert report["machine"]["cpu_count"] >= 1 and report["config"]["model"]["id"] == "wan2.1-t2v-1.3b"
    assert report["config"]["output"]["path"] == ""  # the bench writes no video
    assert "| base | vidax |" in md and "per-step s" in md and "n/a" in md
    assert md in capsys.readouterr().out


def test_bench_reference_diffusers_ratio(tmp_path, cache_dir):
    pytest.importorskip("torch")
    pytest.importorskip("diffusers")
    report, md = _bench(tmp_path, *TINY, cache_dir, "--reference", "diffusers", "--in-process")
    row = report["rows"][0]
    ref = row["reference"]
    assert ref["engine"] == "diffusers" and ref["num_steps"] == 3 and len(ref["step_times_s"]) == 3
    assert ref["latent_shape"] == row["vidax"]["latent_shape"]
    for key in ("per_step_s", "total_s", "decode_s", "load_s"):
        assert row["ratio"][key] == pytest.approx(row["vidax"][key] / ref[key])
    assert "| base | diffusers |" in md and "| base | vidax/diffusers |" in md


def test_bench_sweep_gives_one_row_per_value(tmp_path, cache_dir):
    report, md = _bench(tmp_path, *TINY, cache_dir, "--sweep", "sampling.num_steps=2,3", "--in-process")
    assert [r["label"] for r in report["rows"]] == ["sampling.num_steps=2", "sampling.num_steps=3"]
    assert [r["vidax"]["num_steps"] for r in report["rows"]] == [2, 3]
    assert report["sweep"] == {"key": "sampling.num_steps", "values": ["2", "3"]}
    assert "per-step / first case" in md and md.count("| sampling.num_steps=") == 2


def test_reference_without_torch_is_one_line_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "diffusers", None)  # import diffusers -> ImportError
    rc = main(["bench", *TINY, "--reference", "diffusers", "--out", str(tmp_path)])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: --reference diffusers needs the test extra: pip install 'vidax-core[test]'"
    assert not list(tmp_path.iterdir())


def test_sweep_parsing_and_offload_shorthand():
    assert bench.parse_sweep("offload.chunk_size=1,2,4") == ("offload.chunk_size", ["1", "2", "4"])
    assert bench.parse_sweep(None) == (None, [])
    with pytest.raises(UserError):
        bench.parse_sweep("offload.chunk_size")
    assert bench.sweep_overrides("parallel.sp", "2") == ["parallel.sp=2"]
    assert bench.sweep_overrides("offload", "off") == ["offload.enabled=false"]
    assert bench.sweep_overrides("offload", "2") == ["offload.enabled=true", "offload.chunk_size=2"]
    assert bench.sweep_overrides("offload", "all", lambda: 30) == ["offload.enabled=true", "offload.chunk_size=30"]
    with pytest.raises(UserError):
        bench.sweep_overrides("offload", "many")


def test_ratios_skip_missing_values():
    r = bench.ratios({"per_step_s": 1.0, "device_peak_bytes": None, "compile_s": 2.0},
                     {"per_step_s": 4.0, "device_peak_bytes": 10, "compile_s": 0.0})
    assert r["per_step_s"] == 0.25 and r["device_peak_bytes"] is None and r["compile_s"] is None
