"""benchmarks/accelerator.sh runs end to end on CPU (--cpu-check) and refuses without an accelerator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _script(*args, env=None):
    env = {**os.environ, "PYTHON": sys.executable, **(env or {})}
    return subprocess.run(["bash", str(ROOT / "benchmarks" / "accelerator.sh"), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)


def test_refuses_without_an_accelerator(tmp_path):
    proc = _script(str(tmp_path / "out"), env={"JAX_PLATFORMS": "cpu"})
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: JAX sees no accelerator")


def _attention(cases):
    attn = cases["attn_480p"]["result"]
    assert [r["attention"] for r in attn["rows"]] == ["xla", "blockwise"]
    assert all(r["call_s"] > 0 and r["flops_per_step"] == attn["flops_per_call"] > 0 for r in attn["rows"])
    off = cases["offload_480p"]["result"]["rows"][0]["offload"]
    assert [o["chunk"] for o in off] == [1, 2] and all(0.0 <= o["hidden_fraction"] <= 1.0 for o in off)


def _pipeline(cases, out):
    row = cases["pipeline_13b"]["result"]["rows"][0]
    assert row["vidax"]["flops_per_step"] > 0 and row["vidax"]["attention_calls"] and row["reference"]
    assert "| pipeline_13b | 0 |" in (out / "accelerator.md").read_text()
    numerics = cases["numerics"]["result"]["rows"]  # the writer's checkpoint, CPU against CPU here
    assert [(r["backend"], r["dtype"]) for r in numerics] == [("xla", "float32"), ("xla", "bfloat16")]
    assert all(r["ok"] for r in numerics) and numerics[0]["matmul_precision"] == "highest"
    assert numerics[0]["rel_l2"] <= 5e-4 and 0 < numerics[1]["rel_l2"] <= 3e-2
    quant = cases["quant_fusion"]["result"]["rows"]
    assert [r["weights"] for r in quant] == ["bfloat16", "int8", "float8_e4m3fn"]
    assert all(r["temp_bytes"] > 0 and r["call_s"] > 0 for r in quant)
    assert quant[1]["argument_bytes"] < 0.6 * quant[0]["argument_bytes"]  # the 8-bit program's weights halve


def _families(cases):
    families = cases["random_dit_all"]["result"]["rows"]  # every family's tiny demo DiT, one row each
    assert {r["model"] for r in families} >= {"demo", "cosmos3_demo", "ltx_demo", "ltx2_demo", "kandinsky_demo",
                                              "hunyuan15_demo", "motif_demo", "sana_video_demo", "kandinsky6_demo"}
    assert all(r["exit"] == 0 and r["call_s"] > 0 and r["video_tokens"] > 0 for r in families)
    # XLA's temporary bytes of each block program beside the dry run's estimate of them
    assert all(r["temp_bytes"] > 0 and r["activation_estimate_bytes"] > 0 for r in families), families


def _vae_and_splash(cases):
    vae = cases["vae_decode"]["result"]  # cold, cached, tiled compile and the scanned variant, beside the goals
    assert set(vae["runs"]) == {"cold", "cached", "tiled_compile", "scan_compile"}
    assert vae["runs"]["cold"]["chunk_programs"] == 1 and vae["runs"]["tiled_compile"]["tiles"] > 1
    assert all(v > 0 for v in vae["measured"].values())
    splash = cases["splash"]["result"]["rows"]  # the kernels interpreted, every part
    assert {r["part"] for r in splash} == {"numerics", "sweep", "families"} and not any("error" in r for r in splash)
    assert all(r["within_bound"] for r in splash if r["part"] == "numerics")
    assert cases["splash"]["result"]["table"]["entries"]  # the sweep wrote a block table


#: every case of the script, in its order, in groups that run as separate tests (the suite's two workers share them)
GROUPS = {
    "attention": (("attn_480p", "attn_720p", "offload_480p"), lambda cases, out: _attention(cases)),
    "pipeline": (("pipeline_13b", "numerics", "quant_fusion"), _pipeline),
    "families": (("random_dit_all",), lambda cases, out: _families(cases)),
    "vae_splash": (("vae_decode", "splash"), lambda cases, out: _vae_and_splash(cases)),
}


def test_the_groups_are_every_case_in_the_scripts_order():
    script = (ROOT / "benchmarks" / "accelerator.sh").read_text()
    ordered = [c for names, _ in GROUPS.values() for c in names]
    at = [script.index(f"case_run {c} ") for c in ordered]
    assert at == sorted(at) and len(set(ordered)) == script.count("\ncase_run "), ordered


@pytest.mark.long
@pytest.mark.parametrize("group", sorted(GROUPS))
def test_cpu_check_runs_every_case(tmp_path, group):
    names, check = GROUPS[group]
    out = tmp_path / "out"
    proc = _script(str(out), "--cpu-check", env={"CASES": ",".join(names)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads((out / "accelerator.json").read_text())
    cases = {c["case"]: c for c in report["cases"]}
    assert list(cases) == list(names)
    assert all(c["exit"] == 0 for c in cases.values())
    check(cases, out)


def test_a_failing_case_fails_the_script(tmp_path):
    """A python without vidax (no site-packages): the case fails, and so does the script (it exited 0 before)."""
    bare = tmp_path / "python"
    bare.write_text(f"#!/bin/sh\nexec {sys.executable} -I -S \"$@\"\n")
    bare.chmod(0o755)
    proc = _script(str(tmp_path / "out"), "--cpu-check", env={"PYTHON": str(bare), "CASES": "quant_fusion"})
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "| quant_fusion | 1 |" in (tmp_path / "out" / "accelerator.md").read_text()


def test_collect_records_a_skipped_case_and_its_reason(tmp_path):
    """A case skipped on purpose (exit ``-``, e.g. pipeline_13b on a TPU) is neither a failure nor silent."""
    (tmp_path / "a.json").write_text('{"rows": []}')
    (tmp_path / "a.md").write_text("| x |\n")
    status = tmp_path / "status.tsv"
    status.write_text("a\t0\t3\nb\t-\t0\tneeds torch on the accelerator\n")
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "collect.py"), str(tmp_path), str(status), "5",
                           "accelerator"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    cases = json.loads((tmp_path / "accelerator.json").read_text())["cases"]
    assert [(c["case"], c["exit"], c["note"]) for c in cases] == [("a", 0, None),
                                                                  ("b", None, "needs torch on the accelerator")]
    assert cases[0]["result"] == {"rows": []}
    assert "| b | skipped | 0 | needs torch on the accelerator |" in (tmp_path / "accelerator.md").read_text()
    status.write_text("a\t124\t9\n")
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "collect.py"), str(tmp_path), str(status), "9",
                           "accelerator"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1


def test_random_dit_all_runs_published_architectures_and_records_a_failure(tmp_path):
    """The accelerator path of ``random_dit_all``: each id's published width in a process of its own (here one
    block at a tiny size); a model that fails (CogVideoX-5B-I2V refuses any size but 720x480) is a row with its
    error, and the exit status says so."""
    small = [a for kv in ("sampling.height=32", "sampling.width=32", "sampling.num_frames=5",
                          "sampling.max_sequence_length=8") for a in ("--set", kv)]
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "random_dit_all.py"), str(tmp_path),
                           "--models", "wan2.1-t2v-1.3b,cogvideox-5b-i2v", "--attention", "xla", *small],
                          cwd=ROOT, env={**os.environ, "JAX_PLATFORMS": "cpu"}, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 1, proc.stderr[-2000:]
    ok, failed = json.loads((tmp_path / "random_dit_all.json").read_text())["rows"]
    assert ok["model"] == "wan2.1-t2v-1.3b" and ok["exit"] == 0 and ok["grid"] == [2, 4, 4]
    assert ok["flops_per_call"] > 0 and ok["call_s"] > 0 and ok["attention_backends"] == ["xla"]
    assert failed["exit"] == 2 and "720x480" in failed["error"]
    assert "| cogvideox-5b-i2v | error (exit 2)" in (tmp_path / "random_dit_all.md").read_text()
