"""The `vidax` command line as a user meets it: listings, and one-line errors with exit code 2."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from vidax_core.testing.cli import vidax as run_cli


def vidax(*args: str, cwd=None, env_extra=None) -> subprocess.CompletedProcess:
    return run_cli(*args, cwd=cwd, env=env_extra, timeout=300)


def assert_user_error(proc: subprocess.CompletedProcess, *fragments: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
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
                 "sampling.height=64", "sampling.width=64", "sampling.num_frames=5",
                 f"output.path={tmp_path / 'o.mp4'}",
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


def test_plugins_listing():
    """README: `vidax plugins` lists, per plugin object, the hooks it overrides and the models it registers (two
    objects of one distribution, vidax-cosmos', each their own)."""
    from vidax_core.family import overridden_hooks
    from vidax_cosmos import cosmos3_presets, presets as cosmos_presets
    from vidax_wan.plugin import WanPlugin

    assert "the hooks each one overrides, the models each one registers" in open(
        os.path.join(os.path.dirname(__file__), "..", "README.md")).read()
    proc = vidax("plugins", "--json")
    assert proc.returncode == 0, proc.stderr
    listed = {p["name"]: p for p in json.loads(proc.stdout)}
    wan = listed["wan"]
    assert wan["distribution"] == "vidax-wan" and wan["error"] is None and wan["models"] >= 2
    assert wan["hooks"] == list(overridden_hooks(WanPlugin()))
    assert {"build_dit", "build_vae"} <= set(wan["hooks"]) and "register_models" not in wan["hooks"]
    assert "shard_rules" not in wan["hooks"]  # the core's default rules
    assert listed["cosmos"]["models"] == len(cosmos_presets.MODELS)
    assert listed["cosmos3"]["models"] == len(cosmos3_presets.MODELS)
    text = vidax("plugins").stdout
    assert "wan (vidax-wan" in text and "overrides: " in text


def test_show_config_is_a_runnable_config(tmp_path):
    proc = vidax("show-config", "wan2.1-t2v-14b")
    assert proc.returncode == 0, proc.stderr
    assert "height: 720" in proc.stdout and "width: 1280" in proc.stdout and "num_frames: 81" in proc.stdout
    (tmp_path / "c.yaml").write_text(proc.stdout)
    # the tiny checkpoint's RoPE table covers 32 tokens (512 px) a side: the 14B's 1280 px would be refused
    dry = vidax("run", str(tmp_path / "c.yaml"), "model.checkpoint=builtin:tiny-random", "sampling.height=256",
                "sampling.width=512", "--dry-run")
    assert dry.returncode == 0, dry.stderr


def test_dry_run_full_size_from_configs_only(tmp_path):
    """A hub checkpoint with only its JSON files cached: --dry-run sizes the real 14B DiT without weights."""
    snap = tmp_path / "hf" / "hub" / "models--Wan-AI--Wan2.1-T2V-14B-Diffusers" / "snapshots" / ("a" * 40)
    (snap / "transformer").mkdir(parents=True)
    (snap / "scheduler").mkdir()
    (snap / "model_index.json").write_text('{"_class_name": "WanPipeline"}')
    (snap / "transformer" / "config.json").write_text(json.dumps({
        "_class_name": "WanTransformer3DModel", "num_attention_heads": 40, "attention_head_dim": 128,
        "ffn_dim": 13824, "num_layers": 40, "text_dim": 4096, "freq_dim": 256, "in_channels": 16,
        "out_channels": 16, "patch_size": [1, 2, 2]}))
    (snap / "scheduler" / "scheduler_config.json").write_text('{"_class_name": "UniPCMultistepScheduler"}')
    (snap / "vae").mkdir()
    (snap / "vae" / "config.json").write_text('{"_class_name": "AutoencoderKLWan", "z_dim": 16}')
    refs = snap.parent.parent / "refs"
    refs.mkdir()
    (refs / "main").write_text("a" * 40)
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    cfg = os.path.join(os.path.dirname(__file__), "..", "configs", "wan21_14b_720p.yaml")
    proc = vidax("run", cfg, "--dry-run", "offload.enabled=true", env_extra=env)
    assert proc.returncode == 0, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("denoiser:"))
    assert "53.2 GiB" in line and "40 stacked blocks" in line, line  # 14.29e9 fp32 parameters
    assert "offload: non-block params + 2 chunks of 1 block(s)" in proc.stdout
    # 81 frames at 1280x720 -> latent 21 x 90 x 160 (VAE 4x8x8) -> 21 x 45 x 80 patches (1x2x2)
    assert "tokens:     75600 video tokens (latent 21x90x160, patch 1x2x2)" in proc.stdout, proc.stdout


def test_an_overlong_error_line_is_cut_in_its_middle():
    """A 2,728-character error line (833 window sizes): a line past 1000 characters keeps its start and its end
    (what to do), cut in the middle."""
    from vidax_core.cli import MAX_LINE, _one_line

    text = "options.x must divide " + ", ".join(["5"] * 900) + ": change num_frames"
    line = _one_line(text)
    assert len(line) <= MAX_LINE + 10 and line.startswith("options.x must divide 5") and \
        line.endswith(": change num_frames") and " [...] " in line
    assert _one_line("short\nline") == "short line"
