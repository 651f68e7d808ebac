"""Valid input the input checks must accept: a DPM scheduler config diffusers writes, YAML numbers in exponent
notation, documented tiling knobs, the shipped configs' checkpoint notes."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from vidax_core import cli
from vidax_core.config.parse import _yaml_text

SMALL = ["sampling.height=64", "sampling.width=64", "sampling.num_frames=5", "sampling.num_steps=2",
         "sampling.max_sequence_length=8"]


@pytest.fixture()
def ckpt(tmp_path):
    import vidax_wan

    src = os.path.join(os.path.dirname(vidax_wan.__file__), "assets", "tiny-random")
    shutil.copytree(src, tmp_path / "ckpt")
    return tmp_path / "ckpt"


def _run(tmp_path, *args):
    return cli.main(["run", "model.id=wan2.1-t2v-1.3b", *args, f"runtime.compilation_cache_dir={tmp_path / 'jc'}",
                     f"output.path={tmp_path / 'o.mp4'}", "--quiet"])


def test_dpm_scheduler_config_written_by_diffusers_runs(tmp_path, ckpt, capsys):
    """DPMSolverMultistepScheduler writes ``"lambda_min_clipped": -Infinity``; the run takes it as diffusers does."""
    diffusers = pytest.importorskip("diffusers")
    sched = diffusers.DPMSolverMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True,
                                                  flow_shift=3.0)
    shutil.rmtree(ckpt / "scheduler")
    sched.save_config(str(ckpt / "scheduler"))
    text = (ckpt / "scheduler" / "scheduler_config.json").read_text()
    assert "-Infinity" in text  # the file is what diffusers writes, non-finite constant included
    code = _run(tmp_path, f"model.checkpoint={ckpt}", *SMALL, f"output.metrics={tmp_path / 'm.json'}")
    err = capsys.readouterr().err
    assert code == 0, err
    assert json.loads((tmp_path / "m.json").read_text())["sampler"].startswith("dpm")


@pytest.mark.parametrize("text,value", [("1e-300", 1e-300), ("1e308", 1e308), ("2.5e1", 25.0), ("-3E-2", -0.03),
                                        (".5e1", 5.0), ("1.0", 1.0), ("12", 12), ("1e", "1e"), ("e5", "e5")])
def test_yaml_exponent_numbers_are_numbers(text, value):
    got = _yaml_text(f"a: {text}", "test")["a"]
    assert got == value and type(got) is type(value)


def test_exponent_numbers_reach_the_sampler_as_numbers(tmp_path, ckpt, capsys):
    """Inside sampling.scheduler too: a string used to reach numpy ("ufunc 'multiply' did not contain a loop")."""
    code = _run(tmp_path, f"model.checkpoint={ckpt}", *SMALL, "sampling.scheduler={name: unipc, flow_shift: 3e0}",
                "--dry-run")
    assert code == 0, capsys.readouterr().err


def test_ltx_frame_rate_in_exponent_notation(tmp_path, capsys):
    code = cli.main(["run", "model.id=ltx-video-2b-0.9.8-distilled", "model.checkpoint=builtin:tiny-random",
                     "options.frame_rate=2.5e1", "options.multiscale=false", "sampling.height=64",
                     "sampling.width=64", "sampling.num_frames=9", f"output.path={tmp_path / 'o.mp4'}", "--dry-run",
                     "--quiet"])
    assert code == 0, capsys.readouterr().err


def test_hunyuan_documented_tiling_knobs_are_accepted(tmp_path, capsys):
    """framewise and tile_sample_min_num_frames are HunyuanVideo's own knobs (its VAE's enable_tiling)."""
    code = cli.main(["run", "model.id=hunyuanvideo-t2v-13b", "model.checkpoint=builtin:tiny-random",
                     "vae.tiling={framewise: false, tile_sample_min_num_frames: 8, tile_sample_stride_num_frames: 4}",
                     f"output.path={tmp_path / 'o.mp4'}", "--dry-run", "--quiet"])
    assert code == 0, capsys.readouterr().err


def test_shipped_configs_name_the_published_repository_or_say_how_to_assemble_the_folder():
    """A shipped config names its model's published diffusers repository (ModelSpec.hub_repo, or one of the
    declared ModelSpec.hub_variants: other weights of the same id) where one exists; a local folder only where none
    does, or where it is a declared variant published inside another layout's repo (``owner/name/sub/folder``:
    the local folder ends in ``sub/folder``), with the comment saying the files are assembled by hand."""
    import glob

    from vidax_core.plugins import get_plugins

    root = os.path.join(os.path.dirname(__file__), "..", "configs")
    registry = get_plugins().registry
    checked = 0
    for path in sorted(glob.glob(os.path.join(root, "*.yaml"))):
        text = open(path).read()
        data = _yaml_text(text, path)
        model = data.get("model") or {}
        ckpt, mid = model.get("checkpoint"), model.get("id")
        if not ckpt or str(ckpt).startswith("builtin:") or mid not in {s.id for s in registry}:
            continue
        spec = registry.get(mid)
        inside = [v.split("/", 2)[2] for v in spec.hub_variants if v.count("/") > 1]
        if spec.hub_repo and not any(str(ckpt).rstrip("/").endswith("/" + sub) for sub in inside):
            published = (spec.hub_repo, *spec.hub_variants)
            assert ckpt in published, f"{path}: {ckpt} instead of one of the published {published}"
        else:
            assert "assemble the folder by hand" in text, f"{path}: local folder {ckpt} without assembly notes"
        checked += 1
    assert checked >= 7
