"""``vidax bench`` on the tiny built-in checkpoint: JSON + markdown outputs, the diffusers reference, sweeps."""

from __future__ import annotations

import json
import statistics
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
    assert m["second_video_same"] is True  # the loaded model's second video is the first, bit for bit
    assert len(m["step_times_s"]) == len(m["second_video_step_times_s"]) == 3  # each call's every step
    assert m["second_video_per_step_s"] == pytest.approx(statistics.median(m["second_video_step_times_s"][1:]))
    assert m["device_peak_bytes"] is None  # the CPU backend reports no memory stats: "n/a" in the table
    assert m["peak_resident_weight_bytes"] > 0
    assert report["isolation"] == "subprocess per case"
    assert report["machine"]["cpu_count"] >= 1 and report["config"]["model"]["id"] == "wan2.1-t2v-1.3b"
    assert report["config"]["output"]["path"] == ""  # the bench writes no video
    assert "| base | vidax |" in md and "per-step s" in md and "n/a" in md
    assert md in capsys.readouterr().out
    # FLOPs per step and the attention backend per call site come with every case (MFU: n/a without a known peak)
    assert m["flops_per_step"] > 0 and m["achieved_flops_per_s"] == m["flops_per_step"] / m["per_step_s"]
    assert m["mfu"] is None and {v["backend"] for v in m["attention_calls"].values()} == {"xla"}
    assert "TFLOP/step" in md and "| xla |" in md


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


def test_bench_cache_sweep_adds_the_uncached_case_and_ratios(tmp_path, cache_dir):
    """``--sweep cache=mag`` runs an uncached case first (the sweep names none) and reports each cached case's
    per-video sampling time as a ratio to it, with the steps it skipped (the shipped Wan2.1 ratios resampled to 3
    steps skip step 1)."""
    report, md = _bench(tmp_path, *TINY, cache_dir, "--sweep", "cache=mag", "--in-process")
    base, mag = report["rows"]
    assert [base["label"], mag["label"]] == ["cache=off", "cache=mag"]
    assert base["uncached"] and not mag["uncached"] and base["vidax"]["cache_skipped_steps"] == 0
    assert mag["vidax"]["cache_skipped_steps"] == 1
    want = mag["vidax"]["second_video_sampling_s"] / base["vidax"]["second_video_sampling_s"]
    assert mag["sampling_vs_uncached"] == pytest.approx(want)
    line = f"cache=mag: {want:.2f}× the uncached DiT time per video (1 of 3 steps skipped)"
    assert report["vs_uncached"] == [line] and f"- {line}" in md
    assert bench.uncached_point("cache", ["off", "mag"]) is None  # the sweep's own off case is the baseline
    assert bench.uncached_point("cache.threshold", ["0.1"]) == ("cache=off", ["cache=null"])
    assert bench.uncached_point("sampling.num_steps", ["2"]) is None


def test_bench_sweep_lora_prints_with_and_without_rows_and_their_ratio(tmp_path, cache_dir, capsys):
    import numpy as np

    from vidax_core.testing.lora import save_adapter

    rng = np.random.default_rng(0)
    path = save_adapter(tmp_path / "a.safetensors", {
        f"diffusion_model.blocks.{b}.self_attn.q.lora_{p}.weight": rng.normal(0, 0.3, shape).astype(np.float32)
        for b in range(2) for p, shape in (("down", (4, 24)), ("up", (24, 4)))})
    report, md = _bench(tmp_path, *TINY, cache_dir, "--sweep", f"lora=off,{path}", "--in-process")
    assert [r["label"] for r in report["rows"]] == ["lora=off", f"lora={path}"]
    assert report["rows"][0]["overrides"] == ["lora=[]"]
    line = next(ln for ln in md.splitlines() if ln.startswith("per-step with / without the adapter"))
    a, b = (report["rows"][i]["vidax"]["per_step_s"] for i in (1, 0))
    assert f"{a / b:.3f}x" in line and "lora_mode fused" in line and "same bench run" in line
    assert line in capsys.readouterr().out


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
    assert bench.sweep_overrides("lora", "off") == ["lora=[]"]
    assert bench.sweep_overrides("lora", "/a/b.safetensors") == ["lora=[{path: '/a/b.safetensors'}]"]
    assert bench.sweep_overrides("offload", "off") == ["offload.enabled=false"]
    assert bench.sweep_overrides("offload", "2") == ["offload.enabled=true", "offload.chunk_size=2"]
    assert bench.sweep_overrides("offload", "all", lambda: 30) == ["offload.enabled=true", "offload.chunk_size=30"]
    with pytest.raises(UserError):
        bench.sweep_overrides("offload", "many")


def test_ratios_skip_missing_values():
    r = bench.ratios({"per_step_s": 1.0, "device_peak_bytes": None, "compile_s": 2.0},
                     {"per_step_s": 4.0, "device_peak_bytes": 10, "compile_s": 0.0})
    assert r["per_step_s"] == 0.25 and r["device_peak_bytes"] is None and r["compile_s"] is None


# ---- the reference and the DiT microbenchmark come from the model's plugin -----------------------------------


@pytest.fixture
def toy_plugins(monkeypatch, tmp_path):
    """The process-wide plugins replaced by the toy family only (a model with no bench_reference / bench_dit)."""
    from vidax_core import plugins as plugins_mod
    from vidax_core.plugins import Plugins
    from vidax_core.testing.toy_groups import ToyGroupsPlugin, toy_checkpoint

    p = Plugins()
    p.add(ToyGroupsPlugin(2, 1), "toy")
    monkeypatch.setattr(plugins_mod, "_DEFAULT", p)
    return ["model.id=toy-groups", f"model.checkpoint={toy_checkpoint(tmp_path / 'toy')}"]


def test_family_without_reference_is_one_line_error(tmp_path, toy_plugins, capsys):
    out = tmp_path / "out"
    rc = main(["bench", *toy_plugins, "--reference", "diffusers", "--out", str(out), "--in-process"])
    assert rc == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert err == ["error: --reference diffusers: the plugin of toy-groups (toy) provides no diffusers reference "
                   "pipeline; run vidax bench without --reference"], err
    assert not out.exists()  # refused before any case ran


def test_dit_only_without_plugin_parts_is_one_line_error(tmp_path, toy_plugins, capsys):
    rc = main(["bench", "--dit-only", "model.id=toy-groups", "--out", str(tmp_path / "out")])
    assert rc == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith("error: --dit-only: the plugin of toy-groups provides no DiT"), err


def test_dit_only_parts_come_from_the_wan_plugin():
    from vidax_core.bench.dit import dit_parts

    spec, parts = dit_parts([], need_reference=False)  # no model.id: the first model whose plugin answers
    assert spec.family == "wan"
    assert parts.latent_shape == (16, 5, 32, 32) and parts.context_shape == (512, 4096)
    assert parts.video_tokens == 5 * 16 * 16  # latent 5 x 32 x 32 in 1 x 2 x 2 patches


@pytest.fixture(scope="module")
def a14b_dir(tmp_path_factory):
    pytest.importorskip("diffusers")
    from vidax_core.testing.tiny.folders import save_tiny_wan_variant

    folder, _ = save_tiny_wan_variant(tmp_path_factory.mktemp("a14b") / "ckpt", "wan2.2-t2v-a14b")
    return folder


def test_sweep_offload_all_on_two_experts(tmp_path, a14b_dir, monkeypatch):
    """Wan2.2 A14B builds a list of two denoisers: offload=all chunks every block of each (2 blocks each here)."""
    seen = []

    def fake_case(engine, cfg_dict, **kw):
        seen.append((engine, cfg_dict["offload"]))
        return {"per_step_s": 1.0, "compile_s": 0.0, "total_s": 1.0, "num_steps": 2}

    monkeypatch.setattr(bench, "_run_case", fake_case)
    report, _ = _bench(tmp_path, "model.id=wan2.2-t2v-a14b", f"model.checkpoint={a14b_dir}", "prompt=a fox",
                       "sampling.height=32", "sampling.width=32", "sampling.num_frames=5", "sampling.num_steps=2",
                       "--sweep", "offload=off,all", "--in-process")
    assert [r["overrides"] for r in report["rows"]] == [
        ["offload.enabled=false"], ["offload.enabled=true", "offload.chunk_size=2"]]
    assert [s[1]["chunk_size"] for s in seen if s[1]["enabled"]] == [2]


def test_offload_all_chunk_divides_every_group(tmp_path):
    from vidax_core import config as config_mod
    from vidax_core.plugins import Plugins
    from vidax_core.testing.toy_groups import ToyGroupsPlugin, toy_checkpoint

    p = Plugins()
    p.add(ToyGroupsPlugin(6, 4), "toy")
    cfg = config_mod.resolve(None, ["model.id=toy-groups", f"model.checkpoint={toy_checkpoint(tmp_path / 't')}"],
                             p.preset_for)
    from vidax_core.io.run_checkpoint import checkpoint_for_run

    spec = p.registry.get("toy-groups")
    assert bench.offload_all_chunk(spec, checkpoint_for_run(cfg, spec, p), cfg, p) == 2  # divides 6 and 4


def test_dit_only_takes_the_architecture_of_the_given_checkpoint(tmp_path):
    from vidax_core.bench.dit import dit_parts

    folder = tmp_path / "ckpt"
    (folder / "transformer").mkdir(parents=True)
    wide = {"_class_name": "WanTransformer3DModel", "patch_size": [1, 2, 2], "num_attention_heads": 40,
            "attention_head_dim": 128, "in_channels": 16, "out_channels": 16, "text_dim": 4096, "freq_dim": 256,
            "ffn_dim": 13824, "num_layers": 40, "cross_attn_norm": True, "qk_norm": "rms_norm_across_heads",
            "eps": 1e-6, "rope_max_seq_len": 1024}  # Wan2.1-T2V-14B's published transformer config
    (folder / "transformer" / "config.json").write_text(json.dumps(wide))
    (folder / "model_index.json").write_text("{}")
    spec, parts = dit_parts(["model.id=wan2.1-t2v-14b", f"model.checkpoint={folder}"], need_reference=False)
    assert parts.label == "Wan width 5120" and parts.context_shape == (512, 4096)
    from flax import nnx

    model = nnx.eval_shape(parts.abstract_dit(2))
    assert model.cfg.dim == 5120 and model.cfg.ffn_dim == 13824 and model.cfg.num_layers == 2
