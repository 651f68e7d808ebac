"""The `vidax` command line as a user meets it: listings, and one-line errors with exit code 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def vidax(*args: str, cwd=None, env_extra=None) -> subprocess.CompletedProcess:
    exe = os.path.join(os.path.dirname(sys.executable), "vidax")
    cmd = [exe] if os.path.exists(exe) else [sys.executable, "-m", "vidax_core.cli"]
    env = dict(os.environ, JAX_PLATFORMS="cpu", **(env_extra or {}))
    return subprocess.run(cmd + list(args), capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


def assert_user_error(proc: subprocess.CompletedProcess, *fragments: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: "), lines[0]
    assert "Traceback" not in proc.stderr
    for f in fragments:
        assert f in lines[0], lines[0]
    return lines[0]


def test_list_models_table_and_json():
    table = vidax("list-models")
    assert table.returncode == 0, table.stderr
    assert "wan2.1-t2v-1.3b" in table.stdout and "wan2.1-t2v-14b" in table.stdout
    data = json.loads(vidax("list-models", "--json").stdout)
    by_id = {d["id"]: d for d in data}
    wan = by_id["wan2.1-t2v-1.3b"]
    assert wan["family"] == "wan" and wan["tasks"] == ["t2v"] and wan["plugin"] == "vidax-wan"
    assert wan["version"] and wan["default_config"] == "configs/wan21_1_3b_480p.yaml"


def test_unknown_key_suggests_close_match(tmp_path):
    proc = vidax("run", "model.id=wan2.1-t2v-1.3b", "sampling.num_step=3", cwd=tmp_path)
    assert_user_error(proc, "sampling.num_step", "did you mean sampling.num_steps")


def test_unknown_model_id(tmp_path):
    proc = vidax("run", "model.id=wan2.1-t2v-1.4b", cwd=tmp_path)
    assert_user_error(proc, "unknown model id 'wan2.1-t2v-1.4b'", "wan2.1-t2v-1.3b")


def test_missing_checkpoint(tmp_path):
    proc = vidax("run", "model.id=wan2.1-t2v-1.3b", f"model.checkpoint={tmp_path / 'nope'}",
                 "sampling.height=64", "sampling.width=64", "sampling.num_frames=5", f"output.path={tmp_path / 'o.mp4'}",
                 cwd=tmp_path)
    assert_user_error(proc, "does not exist")
    assert not os.path.exists(tmp_path / "o.mp4")


def test_debug_shows_traceback(tmp_path):
    proc = vidax("run", "--debug", "model.id=nope", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" in proc.stderr


@pytest.mark.parametrize(
    "override, fragment",
    [
        ("sampling.num_steps=0", "sampling.num_steps must be at least 1"),
        ("sampling.num_steps=abc", "sampling.num_steps must be an integer"),
        ("sampling.num_frames=16", "4k+1"),
        ("sampling.height=100", "multiple of 16"),
        ("attention.backend=magic", "attention.backend must be one of"),
    ],
)
def test_bad_values(tmp_path, override, fragment):
    proc = vidax("run", "model.id=wan2.1-t2v-1.3b", "model.checkpoint=builtin:tiny-random", override,
                 f"output.path={tmp_path / 'o.mp4'}", cwd=tmp_path)
    assert_user_error(proc, fragment)
