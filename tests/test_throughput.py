"""FLOPs per step, MFU and the attention backend per call site in the run metrics; the device peak table."""

from __future__ import annotations

import json

import pytest

from vidax_core.cli import main
from vidax_core.errors import UserError
from vidax_core.report import throughput

TINY = ["model.id=wan2.1-t2v-1.3b", "model.checkpoint=builtin:tiny-random", "prompt=a fox", "negative_prompt=blur",
        "sampling.num_steps=3", "sampling.height=32", "sampling.width=32", "sampling.num_frames=5",
        "sampling.max_sequence_length=16", "output.path="]


@pytest.mark.parametrize("kind, name", [("NVIDIA H200", "h200"), ("NVIDIA H100 80GB HBM3", "h100"),
                                        ("NVIDIA H100 PCIe", "h100-pcie"), ("NVIDIA A100-SXM4-80GB", "a100"),
                                        ("NVIDIA L40S", "l40s"), ("NVIDIA B200", "b200"), ("TPU v4", "tpu-v4"),
                                        ("TPU v5 lite", "tpu-v5e"), ("TPU v5p", "tpu-v5p"),
                                        ("TPU v6 lite", "tpu-v6e"), ("cpu", None)])
def test_device_kinds_find_their_peak(kind, name):
    found = throughput.for_kind(kind)
    assert (found.name if found else None) == name


def test_peaks_by_precision_and_override(monkeypatch):
    h200 = throughput.named("H200")
    assert throughput.peak_flops(h200, "bfloat16")[0] == pytest.approx(989.4e12)
    assert throughput.peak_flops(h200, "float8_e4m3fn")[0] == pytest.approx(1978.9e12)
    monkeypatch.setenv("VIDAX_PEAK_TFLOPS", "100")
    assert throughput.peak_flops(None, "bfloat16") == (1e14, "VIDAX_PEAK_TFLOPS")
    with pytest.raises(UserError, match="not in the peak table"):
        throughput.named("h300")


def test_run_metrics_report_flops_mfu_and_attention_sites(tmp_path, monkeypatch):
    from vidax_core.io.checkpoint import Checkpoint
    from vidax_core.plugins import get_plugins
    from vidax_wan.dit import WanDiTConfig
    from vidax_wan.flops import dit_flops

    monkeypatch.setenv("VIDAX_PEAK_TFLOPS", "0.5")
    import jax

    jax.clear_caches()  # the compile counts below must not depend on which test of this process ran the same programs
    path = tmp_path / "m.json"
    assert main(["run", *TINY, f"output.metrics={path}", "--quiet"]) == 0
    m = json.loads(path.read_text())
    plugins = get_plugins()  # the built-in checkpoint's own DiT config
    spec = plugins.registry.get("wan2.1-t2v-1.3b")
    ckpt = Checkpoint(plugins.call("builtin_checkpoint", spec, name="tiny-random"), source="builtin")
    cfg = WanDiTConfig.from_config(ckpt.config("transformer"))
    # CFG: one batch-2 call per step, 16 text tokens
    assert m["model_calls_per_step"] == [["cond", "uncond"]]
    assert m["flops_per_step"] == pytest.approx(dit_flops(cfg, 2, tuple(m["latent_shape"][2:]), 16))
    assert m["achieved_flops_per_s"] == pytest.approx(m["flops_per_step"] / m["per_step_s"])
    assert m["mfu"] == pytest.approx(m["achieved_flops_per_s"] / 0.5e12)
    sites = {k: v for k, v in m["attention_calls"].items() if k.startswith("vidax_core.wan_dit")}
    assert {v["backend"] for v in sites.values()} == {"xla"}
    f, h, w = m["latent_shape"][2:]  # patch 1x2x2
    assert sorted(v["kv_len"] for v in sites.values()) == sorted([16, f * (h // 2) * (w // 2)])  # cross, self
    # the wall time accounted for: phases add up to the total, compiles named per phase, the cache's part
    from vidax_core.report.metrics import summary

    assert sum(m["phases_s"].values()) == pytest.approx(m["total_s"], abs=0.01)
    assert m["phases_s"]["startup"] > 0 and m["startup_s"] == pytest.approx(m["phases_s"]["startup"], abs=1e-3)
    assert m["compile_by_phase"]["decode"]["programs"] >= 1 and m["compile_by_phase"]["sampling"]["programs"] >= 1
    cache = m["compilation_cache"]
    assert cache["programs"] == sum(p["programs"] for p in m["compile_by_phase"].values())
    assert cache["hits"] + cache["misses"] <= cache["programs"]
    text = summary(m, wall_s=m["total_s"] + 1.25)
    assert text.startswith(f"done in {m['total_s'] + 1.25:.1f}s: start-up ") and "writing and exit 1.2s" in text
    assert "decode" in text and "(compiling " in text
    miss = dict(m, compilation_cache=dict(cache, enabled=True, dir="/c", hits=0, misses=3, compile_s=12.0))
    assert "3 programs compiled and kept in the compilation cache (/c): the next run" in summary(miss)
    hit = dict(m, compilation_cache=dict(cache, enabled=True, dir="/c", programs=4, hits=4, misses=0, saved_s=9.6))
    assert "4 of 4 loaded from the compilation cache (/c), about 10s of compiling saved" in summary(hit)
    off = dict(m, compilation_cache=dict(cache, enabled=False, programs=5, compile_s=2.0))
    assert "the compilation cache is off" in summary(off)
