"""``sampling.boundary_step_index``: a two-expert model (Wan2.2 A14B) switches experts at a step index instead of
the checkpoint's boundary timestep, with each expert's guidance scale following it."""

from __future__ import annotations

import json
import os
import shutil
import types

import numpy as np
import pytest

from vidax_core import cli
from vidax_core.runner import experts

B = 875.0
BUILDS = [types.SimpleNamespace(t_min=B, t_max=float("inf"), active=lambda t: t >= B),
          types.SimpleNamespace(t_min=float("-inf"), t_max=B, active=lambda t: t < B)]
TS = np.array([1000.0, 937.5, 833.3, 625.0], np.float32)


def test_schedule_by_timestep_and_by_step():
    assert experts.schedule(BUILDS, TS, None) == [0, 0, 1, 1]
    assert experts.schedule(BUILDS, TS, 1) == [0, 1, 1, 1]
    assert experts.schedule(BUILDS, TS, 3) == [0, 0, 0, 1]
    assert experts.schedule(BUILDS, TS, 0) == [1, 1, 1, 1]


def test_guidance_follows_the_expert():
    """Wan2.2's per-expert scale (``g if t >= boundary else g2``) read at the clamped timesteps."""
    from vidax_core.guidance import ClassifierFree

    guide = ClassifierFree(scale=lambda t: 4.0 if t >= B else 3.0)
    for step, want in ((None, [4, 4, 3, 3]), (1, [4, 3, 3, 3]), (3, [4, 4, 4, 3])):
        chosen = experts.schedule(BUILDS, TS, step)
        ts = experts.guidance_timesteps(BUILDS, TS, chosen)
        assert guide.scales(ts)["g"].tolist() == want
        assert all(BUILDS[k].active(float(t)) for k, t in zip(chosen, ts))
    np.testing.assert_array_equal(experts.guidance_timesteps(BUILDS, TS, [0, 0, 1, 1]), TS)  # untouched by default


SMALL = ["sampling.height=64", "sampling.width=64", "sampling.num_frames=5", "sampling.max_sequence_length=8",
         "prompt=a fox", "sampling.guidance_scale=4.0", "sampling.guidance_scale_2=2.0"]


def two_expert_ckpt(t):
    import vidax_wan

    dst = t / "a14b"
    shutil.copytree(os.path.join(os.path.dirname(vidax_wan.__file__), "assets", "tiny-random"), dst)
    shutil.copytree(dst / "transformer", dst / "transformer_2")
    index = json.loads((dst / "model_index.json").read_text())
    index.update(transformer_2=["diffusers", "WanTransformer3DModel"], boundary_ratio=0.875)
    (dst / "model_index.json").write_text(json.dumps(index))
    # a different second expert, so which one runs shows in the latents
    from vidax_core.io.safetensors import SafetensorsFile, save_file

    f = next(p for p in (dst / "transformer_2").iterdir() if p.suffix == ".safetensors")
    tensors = {k: np.asarray(v) * np.asarray(1.5, v.dtype) for k, v in SafetensorsFile(str(f)).items()}
    save_file(tensors, str(f))
    return str(dst)


def test_runs_switch_at_the_step(tmp_path):
    from vidax_core import config as config_mod
    from vidax_core.plugins import get_plugins
    from vidax_core.runner import loaded
    from vidax_core.report.progress import Reporter

    plugins = get_plugins()
    base = ["model.id=wan2.2-t2v-a14b", f"model.checkpoint={two_expert_ckpt(tmp_path)}", *SMALL,
            "sampling.num_steps=2", "sampling.num_frames=1", "sampling.height=32", "sampling.width=32",
            "output.path=null"]
    out = {}
    for name, extra in {"timestep": [], "step1": ["sampling.boundary_step_index=1"],
                        "step2": ["sampling.boundary_step_index=2"]}.items():
        cfg = config_mod.resolve(None, base + extra, plugins.preset_for)
        out[name] = loaded.run(cfg, plugins, Reporter(quiet=True))
    per_step = {k: v.metrics["expert_per_step"] for k, v in out.items()}
    assert per_step["timestep"] == per_step["step1"] == ["transformer", "transformer_2"], per_step
    assert per_step["step2"] == ["transformer", "transformer"], per_step
    np.testing.assert_array_equal(out["step1"].latents, out["timestep"].latents)
    assert np.abs(out["step2"].latents - out["timestep"].latents).max() > 1e-3


@pytest.mark.parametrize("extra, fragment", [
    (["model.id=wan2.1-t2v-1.3b", "sampling.boundary_step_index=1"], "has 1 denoiser; it applies to a model with two"),
    (["model.id=wan2.2-t2v-a14b", "sampling.boundary_step_index=5"], "is past the run's 3 steps"),
    (["model.id=wan2.2-t2v-a14b", "sampling.boundary_step_index=-1"], "must be >= 0"),
])
def test_bad_switch_step_is_one_line(tmp_path, capfd, extra, fragment):
    ck = two_expert_ckpt(tmp_path) if "a14b" in extra[0] else "builtin:tiny-random"
    code = cli.main(["run", *SMALL, "sampling.num_steps=3", f"model.checkpoint={ck}", *extra, "--dry-run"])
    _, err = capfd.readouterr()
    assert code == 2 and err.count("\n") == 1 and fragment in err, err
