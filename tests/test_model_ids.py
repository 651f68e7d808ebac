"""A model id alone: its hub repo in the registry, list-models and show-config; a dry run with no weights and no
network sized from the published layout, assumed inputs named; a download from a (fake) hub with huggingface_hub's
progress bar; the command line's help and suggestions."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from vidax_core.cli import main
from vidax_core.plugins import get_plugins


def test_every_id_names_its_repos_and_show_config_uses_them(capsys):
    specs = list(get_plugins().registry)
    no_repo = {s.id for s in specs if not s.hub_repo}
    assert no_repo == {"cosmos3-edge", "ltx-video-2b-0.9.8-distilled", "ltx-video-13b-0.9.8-dev"}, no_repo
    assert all(s.original_repo for s in specs if s.id in no_repo - {"cosmos3-edge"})
    assert main(["show", "cosmos-predict2.5-2b"]) == 0  # the alias of show-config
    out = capsys.readouterr().out
    assert "checkpoint: nvidia/Cosmos-Predict2.5-2B" in out and "revision: diffusers/base/post-trained" in out
    assert "# the original release vidax also reads: nvidia/Cosmos-Predict2.5-2B/base/post-trained" in out
    assert main(["list-models"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert "hub repo" in rows[0]
    assert any("wan2.1-t2v-1.3b" in r and "Wan-AI/Wan2.1-T2V-1.3B-Diffusers" in r for r in rows)
    assert any("ltx-video-2b-0.9.8-distilled" in r and "none (original: Lightricks/LTX-Video/" in r for r in rows)


@pytest.mark.parametrize("argv,words", [
    (["shwo", "x"], "unknown command 'shwo': did you mean `vidax show`?"),
    (["list-model"], "did you mean `vidax list-models`?"),
])
def test_unknown_commands_suggest_the_nearest(argv, words, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0], err


def test_help_names_the_registered_families(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for family in {s.family for s in get_plugins().registry}:
        assert f"{family} (" in text, family


@pytest.mark.parametrize("model_id,assumed", [
    ("wan2.1-i2v-14b-480p", "image: none given; sized with a 832x480 placeholder"),
    ("ltx-2.5-22b-dev", "sampling.num_frames: unset"),
    ("hunyuanvideo-i2v-13b", "image: none given; sized with a 1280x720 placeholder"),  # a LLaVA tower: headers only
    ("kandinsky6-vsr", "video: none given; sized with a 121-frame 864x480 placeholder clip"),
])
def test_dry_run_of_an_id_alone_sizes_its_published_layout(model_id, assumed, capsys, tmp_path, monkeypatch):
    """No checkpoint set, none cached, no network (the suite runs with HF_HUB_OFFLINE): the plan, sized from the
    shipped layout, with the time estimate on the named device."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.chdir(tmp_path)
    assert main(["run", f"model.id={model_id}", "prompt=a fox", "--dry-run", "--device", "tpu-v5e"]) == 0
    out = capsys.readouterr().out
    assert "(published layout, no weights)" in out and "sized:      from" in out, out[:600]
    assert f"assumed:    {assumed}" in out
    assert "\ntime:       estimate on 1 x tpu-v5e at 50% of its peak" in out and "\n  denoise    ~" in out
    assert "image: null" in out and "video: null" in out  # the resolved config printed is the user's


def test_the_id_alone_downloads_its_repo_with_a_progress_bar(tmp_path):
    """``vidax run model.id=...`` with no checkpoint fetches the id's repo from the hub (a fake one on localhost
    serving the tiny checkpoint as ``Wan-AI/Wan2.1-T2V-1.3B-Diffusers``) with huggingface_hub's bar, then runs;
    offline with an empty cache it is one error line (a run from the cache offline: tests/test_hub.py)."""
    import vidax_wan

    from fake_hub import FakeHub
    from vidax_core.testing.cache import suite_cache_dir

    tiny = os.path.join(os.path.dirname(vidax_wan.__file__), "assets", "tiny-random")
    exe = os.path.join(os.path.dirname(sys.executable), "vidax")
    args = [exe, "run", "model.id=wan2.1-t2v-1.3b", "prompt=a fox", "sampling.height=32", "sampling.width=32",
            "sampling.num_frames=5", "sampling.num_steps=2", "sampling.max_sequence_length=8",
            f"output.path={tmp_path / 'o.mp4'}", "output.overwrite=true",
            f"runtime.compilation_cache_dir={suite_cache_dir()}"]
    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_HUB_OFFLINE", "HF_HUB_CACHE", "HF_HUB_DISABLE_PROGRESS_BARS")}
    env.update(HF_HOME=str(tmp_path / "hf"), JAX_PLATFORMS="cpu")
    with FakeHub({"Wan-AI/Wan2.1-T2V-1.3B-Diffusers": tiny}) as hub:
        proc = subprocess.run(args, env={**env, "HF_ENDPOINT": hub.url}, capture_output=True, text=True,
                              timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "fetching Wan-AI/Wan2.1-T2V-1.3B-Diffusers" in proc.stderr and "Fetching" in proc.stderr, proc.stderr
    assert any(p.startswith("/Wan-AI/Wan2.1-T2V-1.3B-Diffusers/resolve/") for p in hub.requests)
    assert os.path.getsize(tmp_path / "o.mp4") > 0
    offline = {**env, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(args + ["--quiet"], env={**offline, "HF_HOME": str(tmp_path / "empty")},
                          capture_output=True, text=True, timeout=300)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: checkpoint Wan-AI/Wan2.1-T2V-1.3B-Diffusers is not in the local Hugging Face "
                               "cache and HF_HUB_OFFLINE is set") and "hf download" in lines[0], lines
