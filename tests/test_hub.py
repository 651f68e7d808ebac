"""Hub checkpoints, offline: a pre-populated Hugging Face cache is used as is; an empty one gives one clear error."""

from __future__ import annotations

import os
import shutil

import pytest

from vidax_core.io.checkpoint import hub_allow_patterns
from vidax_core.testing.cli import vidax as run_cli
from vidax_core.testing.cache import suite_cache_dir

REPO = "vidax-test/Wan-Tiny-Diffusers"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def vidax(*args, env):
    return run_cli(*args, env=env, replace_env=True, timeout=300)


def populate_cache(hf_home, revision_name="main"):
    import vidax_wan

    src = os.path.join(os.path.dirname(vidax_wan.__file__), "assets", "tiny-random")
    repo_dir = os.path.join(hf_home, "hub", "models--" + REPO.replace("/", "--"))
    shutil.copytree(src, os.path.join(repo_dir, "snapshots", COMMIT))
    os.makedirs(os.path.join(repo_dir, "refs"), exist_ok=True)
    with open(os.path.join(repo_dir, "refs", revision_name), "w") as f:
        f.write(COMMIT)


def offline_env(hf_home, tmp_path):
    env = dict(os.environ, HF_HOME=str(hf_home), HF_HUB_OFFLINE="1", JAX_PLATFORMS="cpu")
    env.pop("HF_HUB_CACHE", None)
    return env


def test_allow_patterns_cover_only_components():
    pats = hub_allow_patterns(["transformer", "vae"])
    assert "model_index.json" in pats
    assert "transformer/*.safetensors" in pats and "vae/*.json" in pats
    assert not any(p.startswith("text_encoder") for p in pats)


@pytest.mark.parametrize("revision", [None, "v1"])
def test_offline_run_from_cache(tmp_path, revision):
    hf_home = tmp_path / "hf"
    populate_cache(str(hf_home), revision or "main")
    args = ["run", "model.id=wan2.1-t2v-1.3b", f"model.checkpoint={REPO}", "sampling.height=32", "sampling.width=32",
            "sampling.num_frames=5", "sampling.num_steps=2", "sampling.max_sequence_length=8",
            f"output.path={tmp_path / 'o.mp4'}", f"runtime.compilation_cache_dir={suite_cache_dir()}", "--quiet"]
    if revision:
        args.append(f"model.revision={revision}")
    proc = vidax(*args, env=offline_env(hf_home, tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert os.path.getsize(tmp_path / "o.mp4") > 0


def test_offline_not_cached_names_repo_and_command(tmp_path):
    proc = vidax("run", "model.id=wan2.1-t2v-1.3b", f"model.checkpoint={REPO}", "sampling.height=32",
                 "sampling.width=32", "sampling.num_frames=5", f"output.path={tmp_path / 'o.mp4'}",
                 env=offline_env(tmp_path / "empty-hf", tmp_path))
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert REPO in lines[0] and f"hf download {REPO}" in lines[0]
