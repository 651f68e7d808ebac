"""The Kandinsky 5 hooks as the core calls them: registration and presets, the run and checkpoint checks (their
one-line messages are user interface), the built-in checkpoint, and the family's independence from vidax-hunyuan:
no module of the package imports it, and ``vidax run`` works with it absent (its import blocked, only this
plugin loaded), as after ``pip install vidax-core vidax-kandinsky``."""

from __future__ import annotations

import ast
import glob
import json
import os
import shutil
import subprocess
import sys

import pytest

from vidax_core import Checkpoint
from vidax_core.plugins import Plugins
from vidax_core.testing.checks import resolve

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src", "vidax_kandinsky")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@pytest.fixture(scope="module")
def plugins():
    from vidax_kandinsky.plugin import KandinskyPlugin
    plugin = KandinskyPlugin()

    p = Plugins()
    p.add(plugin, "kandinsky", "vidax-kandinsky", "0.1.0")
    return p


def run(plugins, model_id="kandinsky5-t2v-lite", *overrides):
    return resolve(plugins, [f"model.id={model_id}", *overrides])


def test_registered_ids_and_recipes(plugins):
    reg = plugins.registry
    lite, pro, i2v = (reg.get(i) for i in ("kandinsky5-t2v-lite", "kandinsky5-t2v-pro", "kandinsky5-i2v-lite"))
    assert (lite.tasks, pro.tasks, i2v.tasks) == (("t2v",), ("t2v",), ("i2v",))
    assert lite.hub_repo == "kandinskylab/Kandinsky-5.0-T2V-Lite-sft-5s-Diffusers" and len(lite.hub_variants) == 7
    s = run(plugins).sampling
    assert (s.num_steps, s.guidance_scale, s.height, s.width, s.num_frames, s.max_sequence_length) == \
        (50, 5.0, 512, 768, 121, 512)
    assert run(plugins).negative_prompt.startswith("Static, 2D cartoon")
    assert (run(plugins, "kandinsky5-t2v-pro").sampling.height, run(plugins, "kandinsky5-t2v-pro").sampling.width) \
        == (768, 1024)


@pytest.mark.parametrize("model_id,overrides,message", [
    ("kandinsky5-t2v-lite", ["sampling.num_frames=10"],
     "sampling.num_frames must be 4k+1 for kandinsky5-t2v-lite (the VAE compresses time by 4), got 10: use 13"),
    ("kandinsky5-t2v-lite", ["sampling.height=500"],
     "sampling.height must be a multiple of 16 for kandinsky5-t2v-lite (VAE factor 8, patch 2), got 500: use 496"),
    ("kandinsky5-t2v-lite", ["sampling.width=2064"],
     "sampling.width=2064 exceeds the 128 RoPE positions of 16 pixels each: use at most 2048"),
    ("kandinsky5-t2v-lite", ["sampling.max_sequence_length=2000"],
     "sampling.max_sequence_length must be from 1 to 1024 for kandinsky5-t2v-lite, got 2000"),
    ("kandinsky5-t2v-lite", ["image=x.png"],
     "kandinsky5-t2v-lite is text-to-video: it takes no image (image:); use kandinsky5-i2v-lite"),
    ("kandinsky5-i2v-lite", [],
     "kandinsky5-i2v-lite is image-to-video: give the first frame with image=path/to/image.png"),
    ("kandinsky5-i2v-lite", ["image=x.png", "sampling.num_frames=13"],
     "kandinsky5-i2v-lite needs sampling.num_frames >= 17: the pipeline renormalises latent frames 0-3 against "
     "frames 4 and later (got 13)"),
])
def test_check_run(plugins, model_id, overrides, message):
    cfg = run(plugins, model_id, *overrides)
    assert plugins.call("check_run", plugins.registry.get(model_id), run=cfg)[0] == message


def test_check_checkpoint(plugins, tmp_path):
    """The built-in checkpoint passes; a VAE of other latent channels and a CLIP of another width are named."""
    from vidax_kandinsky.plugin import KandinskyPlugin
    plugin = KandinskyPlugin()

    spec = plugins.registry.get("kandinsky5-t2v-lite")
    builtin = plugin.builtin_checkpoint(spec, "tiny-random")
    assert plugins.call("check_checkpoint", spec, ckpt=Checkpoint(builtin), run=run(plugins)) == []
    bad = str(tmp_path / "bad")
    shutil.copytree(builtin, bad)
    for folder, key, value in (("vae", "latent_channels", 8), ("text_encoder_2", "hidden_size", 24)):
        path = os.path.join(bad, folder, "config.json")
        with open(path) as f:
            config = json.load(f)
        with open(path, "w") as f:
            json.dump({**config, key: value}, f)
    problems = plugins.call("check_checkpoint", spec, ckpt=Checkpoint(bad), run=run(plugins))
    assert problems == [
        "transformer/config.json: in_visual_dim=4 differs from latent_channels=8 of vae/config.json: the two "
        "components do not belong together",
        "transformer/config.json: in_text_dim2=16 does not match hidden_size=24 of text_encoder_2/config.json"]


@pytest.mark.parametrize("key, value, words", [
    ("attention_P", 0, "attention_P=0 must be above 0 and at most 1"),
    ("attention_P", 1.5, "attention_P=1.5 must be above 0 and at most 1"),
    ("attention_P", -0.1, "attention_P=-0.1 must be above 0 and at most 1"),
    ("attention_method", "junk", "attention_method='junk': expected 'topcdf'"),
])
def test_nabla_parameters_outside_their_meaning_are_refused(plugins, tmp_path, key, value, words):
    """NABLA attention_P 0/1.5/-0.1 and attention_method junk were accepted (issue 51): P is the share of each
    query block's attention mass kept, the reference has only the top-CDF method."""
    from vidax_kandinsky.plugin import KandinskyPlugin

    plugin = KandinskyPlugin()

    spec = plugins.registry.get("kandinsky5-t2v-lite")
    bad = str(tmp_path / "bad")
    shutil.copytree(plugin.builtin_checkpoint(spec, "tiny-random"), bad)
    path = os.path.join(bad, "transformer", "config.json")
    with open(path) as f:
        config = json.load(f)
    with open(path, "w") as f:
        json.dump({**config, key: value}, f)
    problems = plugins.call("check_checkpoint", spec, ckpt=Checkpoint(bad), run=run(plugins))
    assert len(problems) == 1 and words in problems[0], problems


def test_never_imports_vidax_hunyuan():
    """No module of the package names vidax_hunyuan in an import, wherever the import stands."""
    for path in glob.glob(os.path.join(PACKAGE, "**", "*.py"), recursive=True):
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n.split(".")[0] == "vidax_hunyuan" for n in names), (path, names)


BLOCKED = r"""
import importlib.abc, sys
class NoHunyuan(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "vidax_hunyuan":
            raise ModuleNotFoundError(f"No module named {name!r} (vidax-hunyuan is not installed)")
sys.meta_path.insert(0, NoHunyuan())
from vidax_core.cli import main
code = main(sys.argv[1:])
assert not any(m.split(".")[0] == "vidax_hunyuan" for m in sys.modules), "vidax_hunyuan was imported"
sys.exit(code)
"""


def test_runs_without_vidax_hunyuan(tmp_path):
    """``vidax list-models`` and a whole ``vidax run`` of the demo config (built-in checkpoint, guidance, the
    HunyuanVideo VAE from the core) with vidax_hunyuan unimportable and only this plugin loaded."""
    env = dict(os.environ, VIDAX_LOAD_PLUGINS="kandinsky", JAX_PLATFORMS="cpu")
    listed = subprocess.run([sys.executable, "-c", BLOCKED, "list-models"], capture_output=True, text=True, env=env,
                            timeout=300)
    assert listed.returncode == 0, listed.stderr[-2000:]
    ids = [line.split()[0] for line in listed.stdout.splitlines()[1:] if line.strip()]
    assert ids == ["kandinsky5-i2v-lite", "kandinsky5-t2v-lite", "kandinsky5-t2v-pro"]
    out = tmp_path / "demo.mp4"
    proc = subprocess.run([sys.executable, "-c", BLOCKED, "run", os.path.join(ROOT, "configs", "kandinsky_demo.yaml"),
                           "sampling.num_steps=2", "sampling.num_frames=5", "sampling.height=32", "sampling.width=32",
                           f"output.path={out}", "output.metrics=null", "--quiet"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert out.stat().st_size > 0


def test_bench_reference_runs_the_pipeline(plugins):
    """``vidax bench --reference diffusers``: the Kandinsky5T2VPipeline run on the built-in checkpoint, timed, with
    the pipeline's channel-last latents and its frames; an image run is refused with one line."""
    pytest.importorskip("torch")
    pytest.importorskip("diffusers")
    from vidax_core import UserError
    from vidax_kandinsky.plugin import KandinskyPlugin
    plugin = KandinskyPlugin()

    spec = plugins.registry.get("kandinsky5-t2v-lite")
    folder = plugin.builtin_checkpoint(spec, "tiny-random")
    cfg = run(plugins, "kandinsky5-t2v-lite", "sampling.num_steps=2", "sampling.num_frames=5", "sampling.height=32",
              "sampling.width=32", "sampling.max_sequence_length=128", "model.dtype=float32")
    from vidax_core.bench.reference import reference_runner

    row = reference_runner(plugins, spec, "diffusers", folder, cfg)()
    assert row["latent_shape"] == [1, 2, 4, 4, 4] and row["frames_shape"] == [1, 5, 32, 32, 3]
    assert row["per_step_s"] > 0 and row["decode_s"] > 0
    with pytest.raises(UserError, match="text-to-video runs only"):
        reference_runner(plugins, spec, "diffusers", folder, run(plugins, "kandinsky5-t2v-lite", "image=x.png"))
