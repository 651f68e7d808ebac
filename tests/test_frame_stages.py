"""Frame stages (hook ``frame_stages``, :mod:`vidax_core.runner.stages`) and the ``.npy`` clip they hand over,
without any installed family: a stage's run is its id's preset, then the parent's placement keys and seed, then
the family's overrides, with the clip as ``video:`` and no output of its own; a stage id that takes no video is
refused in one line; a float ``.npy`` clip reads back exactly, and a wrong one is one line."""

from __future__ import annotations

import numpy as np
import pytest

from vidax_core import FamilyPlugin, FrameStage
from vidax_core import config as config_mod
from vidax_core.errors import UserError
from vidax_core.io.clip import read_video
from vidax_core.io.media import check_video
from vidax_core.plugins import Plugins
from vidax_core.runner.stages import frame_stages, stage_config

PRESET = {"sampling": {"num_steps": 4, "guidance_scale": 1.0, "height": 64, "width": 64, "num_frames": 5,
                       "max_sequence_length": 8}, "output": {"fps": 8}}


class Gen(FamilyPlugin):
    family = "toygen"
    models = [{"id": "toy-gen", "tasks": ("t2v",), "preset": PRESET},
              {"id": "toy-up", "tasks": ("v2v",), "preset": {**PRESET, "sampling": {**PRESET["sampling"],
                                                                                      "num_steps": 2}}},
              {"id": "toy-t2v", "tasks": ("t2v",), "preset": PRESET}]

    def frame_stages(self, spec, ckpt, run):
        if spec.id != "toy-gen":
            return None
        target = run.prompt or "toy-up"
        return [FrameStage(target, {"sampling": {"height": run.sampling.height}}, name="refine")]


@pytest.fixture(scope="module")
def plugins():
    p = Plugins()
    p.add(Gen(), "toygen", "toy", "0")
    return p


def parent(plugins, *overrides):
    return config_mod.resolve(None, ["model.id=toy-gen", *overrides], plugins.preset_for)


def test_a_stage_run_is_its_preset_the_parents_placement_and_the_overrides(plugins):
    cfg = parent(plugins, "sampling.height=96", "sampling.seed=7", "parallel.tp=2", "attention.backend=xla",
                 "output.save_frames=f.npy")
    (stage,) = frame_stages(plugins.registry.get("toy-gen"), None, cfg, plugins)
    run = stage_config(cfg, stage, plugins, "/tmp/clip.npy")
    assert run.model.id == "toy-up" and run.video == "/tmp/clip.npy"
    assert run.sampling.num_steps == 2 and run.sampling.height == 96 and run.sampling.seed == 7
    assert run.parallel.tp == 2 and run.attention.backend == "xla"
    assert run.output.path is None and run.output.save_frames is None and run.output.metrics is None


def test_a_stage_that_takes_no_video_is_one_line(plugins):
    cfg = parent(plugins, "prompt=toy-t2v")
    with pytest.raises(UserError, match="names toy-t2v, which takes no video"):
        frame_stages(plugins.registry.get("toy-gen"), None, cfg, plugins)
    with pytest.raises(UserError, match="unknown model id"):
        frame_stages(plugins.registry.get("toy-gen"), None, parent(plugins, "prompt=toy-nope"), plugins)


def test_a_npy_clip_reads_back_exactly(tmp_path):
    frames = np.random.default_rng(0).uniform(0, 1, (1, 5, 8, 12, 3)).astype(np.float32)
    np.save(tmp_path / "c.npy", frames)
    check_video(str(tmp_path / "c.npy"))
    assert np.array_equal(read_video(str(tmp_path / "c.npy")), frames[0])
    assert read_video(str(tmp_path / "c.npy"), height=16, width=24).shape == (5, 16, 24, 3)
    np.save(tmp_path / "bad.npy", np.zeros((5, 8, 12), np.float32))
    with pytest.raises(UserError, match=r"shape \(T, H, W, 3\)"):
        check_video(str(tmp_path / "bad.npy"))
