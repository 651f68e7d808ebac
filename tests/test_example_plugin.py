"""The third-party plugin path end to end: pip-install examples/vidax_example_plugin, see its model in
`vidax list-models`, generate a video with `vidax run`, uninstall it and see the model gone.

The example is built from a copy (so no build/ or egg-info lands in the source tree) and installed with
``pip install --target`` into a private folder that only this test's subprocesses see through PYTHONPATH: the
shared environment is never modified, so the test is safe to run in parallel with everything else, needs no
network (``--no-index --no-build-isolation``: the environment's own setuptools builds it), and "uninstalling" is
deleting that folder. The built-in checkpoint is generated under a private XDG_CACHE_HOME. That the tutorial
(docs/writing-a-plugin.md) builds this same package from its own blocks is tests/test_tutorial.py's job.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(REPO, "examples", "vidax_example_plugin")


def vidax(*args: str, env: dict, cwd) -> subprocess.CompletedProcess:
    exe = os.path.join(os.path.dirname(sys.executable), "vidax")
    cmd = [exe] if os.path.exists(exe) else [sys.executable, "-m", "vidax_core.cli"]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


def model_ids(env: dict, cwd) -> dict[str, dict]:
    proc = vidax("list-models", "--json", env=env, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return {m["id"]: m for m in json.loads(proc.stdout)}


def test_install_list_run_uninstall(tmp_path):
    pytest.importorskip("setuptools", reason="building the example plugin offline needs setuptools in the environment")
    src, site, work = tmp_path / "src", tmp_path / "site", tmp_path / "work"
    shutil.copytree(EXAMPLE, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "out"))
    work.mkdir()
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--no-build-isolation",
         "--target", str(site), str(src)],
        capture_output=True, text=True, timeout=300,
    )
    assert pip.returncode == 0, pip.stdout + pip.stderr

    base = dict(os.environ, JAX_PLATFORMS="cpu", XDG_CACHE_HOME=str(tmp_path / "cache"))
    before = set(model_ids(base, work))  # the environment's own ids (the toy among them where it is installed)
    with_plugin = dict(base, PYTHONPATH=os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    try:
        models = model_ids(with_plugin, work)
        assert "example-tiny" in models, sorted(models)
        tiny = models["example-tiny"]
        assert (tiny["family"], tiny["tasks"], tiny["plugin"], tiny["version"]) == (
            "example", ["t2v"], "vidax-example-plugin", "0.2.0")

        # check_run: a bad size is one `error:` line, exit code 2, before any weights load.
        bad = vidax("run", "model.id=example-tiny", "sampling.height=30", env=with_plugin, cwd=work)
        assert bad.returncode == 2, bad.stderr
        assert bad.stderr.strip() == "error: sampling.height must be a multiple of 4 for example-tiny, got 30: use 28"

        out, frames_npy = work / "out" / "tiny.mp4", work / "out" / "frames.npy"
        run = vidax(
            "run", os.path.join(EXAMPLE, "example.yaml"), "sampling.num_steps=3", "sampling.height=32",
            "sampling.width=32", "sampling.num_frames=4", f"output.path={out}", f"output.save_frames={frames_npy}",
            "--quiet", env=with_plugin, cwd=work,
        )
        assert run.returncode == 0, run.stdout + run.stderr
        assert f"wrote {out}" in run.stderr.splitlines(), run.stderr  # --quiet keeps the line naming the output
        assert "model example-tiny" not in run.stderr and "step/s" not in run.stderr, run.stderr  # no status or bars
        assert out.is_file() and out.stat().st_size > 0
        frames = np.load(frames_npy)
        assert frames.shape == (1, 4, 32, 32, 3) and frames.dtype == np.float32
        assert np.isfinite(frames).all() and 0.0 <= frames.min() <= frames.max() <= 1.0
        assert frames.std() > 0  # not a constant image
        assert (tmp_path / "cache" / "vidax" / "vidax-example-plugin" / "0.2.0" / "tiny" / "model_index.json").is_file()

        from vidax_core.io.video import read_mp4

        assert read_mp4(str(out)).shape == (4, 32, 32, 3)
    finally:
        shutil.rmtree(site, ignore_errors=True)  # uninstall: the distribution lived only in this folder

    assert set(model_ids(base, work)) == before  # uninstalled: the listing is the environment's again

