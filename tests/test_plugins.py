"""Plugin loading: entry points, a broken plugin costs one warning line, a misspelled hook fails loudly."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from vidax_core import FamilyPlugin
from vidax_core.plugins import Plugins
from vidax_core.registry import ModelSpec


def _fake_dist(root, name, module_name, module_source, target=None):
    """A minimal installed distribution (dist-info + module) on a folder we put on PYTHONPATH; its entry point
    names ``target`` (``module:Class``; default: the module)."""
    (root / f"{module_name}.py").write_text(textwrap.dedent(module_source))
    info = root / f"{name.replace('-', '_')}-0.0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.0.1\n")
    (info / "entry_points.txt").write_text(f"[vidax]\n{module_name} = {target or module_name}\n")


def _run(args, pythonpath, **env):
    exe = os.path.join(os.path.dirname(sys.executable), "vidax")
    full = dict(os.environ, PYTHONPATH=str(pythonpath), JAX_PLATFORMS="cpu", **env)
    return subprocess.run([exe, *args], capture_output=True, text=True, env=full, timeout=120)


def test_broken_plugin_costs_one_warning_line(tmp_path):
    _fake_dist(tmp_path, "vidax-broken", "vidax_broken_plugin", "raise ImportError('needs libfoo')\n")
    proc = _run(["list-models"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    warnings = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(warnings) == 1 and warnings[0].startswith("warning: plugin 'vidax_broken_plugin'"), proc.stderr
    assert "needs libfoo" in warnings[0]
    assert "wan2.1-t2v-1.3b" in proc.stdout
    listing = _run(["plugins"], tmp_path)
    assert "vidax_broken_plugin" in listing.stdout and "FAILED" in listing.stdout


def test_third_party_plugin_registers_through_entry_points(tmp_path):
    _fake_dist(tmp_path, "vidax-toy", "vidax_toy_plugin", """
        from vidax_core import FamilyPlugin

        class ToyPlugin(FamilyPlugin):
            family = "toy"
            models = [{"id": "toy-1", "tasks": ("t2v",)}]
    """, "vidax_toy_plugin:ToyPlugin")
    proc = _run(["list-models", "--json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    import json

    toy = next(m for m in json.loads(proc.stdout) if m["id"] == "toy-1")
    assert toy["plugin"] == "vidax-toy" and toy["version"] == "0.0.1"
    only_toy = _run(["list-models", "--json"], tmp_path, VIDAX_LOAD_PLUGINS="vidax_toy_plugin")
    assert [m["id"] for m in json.loads(only_toy.stdout)] == ["toy-1"]


def test_a_hand_made_spec_goes_to_its_family_and_none_declines():
    """A spec no plugin registered (a test's own) is asked of the objects of its family, the last registered
    first; None passes it on."""

    class Owns(FamilyPlugin):
        family = "fam"

        def build_vae(self, spec, ckpt, run):
            return "vae-of-" + spec.family

    class Declines(FamilyPlugin):
        family = "fam"

        def build_vae(self, spec, ckpt, run):
            return None

    p = Plugins()
    p.add(Owns(), "owns")
    p.add(Declines(), "declines")
    assert p.call("build_vae", ModelSpec(id="m", family="fam"), ckpt=None, run=None) == "vae-of-fam"
    assert p.call("build_vae", ModelSpec(id="x", family="other"), ckpt=None, run=None) is None


def test_duplicate_model_id_is_refused():
    class A(FamilyPlugin):
        family = "a"
        models = [{"id": "dup"}]

    class B(FamilyPlugin):
        family = "b"
        models = [{"id": "dup"}]

    p = Plugins()
    p.add(A(), "a")
    p.add(B(), "b")
    with pytest.raises(ValueError, match="registered twice"):
        _ = p.registry


def test_a_plugin_bug_is_reported_as_the_plugin_s(tmp_path):
    """A hook that raises something other than a UserError is the plugin's bug, and the CLI says so: one line
    naming the distribution and the hook, exit 1, not vidax's 'internal error'; a UserError stays the user's."""
    _fake_dist(tmp_path, "vidax-buggy", "vidax_buggy_plugin", """
        from vidax_core import FamilyPlugin, UserError

        class BuggyPlugin(FamilyPlugin):
            family = "buggy"
            models = [{"id": "buggy-tiny", "tasks": ("t2v",), "preset": {"sampling": {
                "num_steps": 2, "guidance_scale": 1.0, "height": 16, "width": 16, "num_frames": 1,
                "max_sequence_length": 8}, "output": {"fps": 8}}}]

            def check_run(self, spec, run):
                if run.sampling.seed == 7:
                    raise UserError("seed 7 is unlucky: use another sampling.seed")
                return run.sampling.frame_count  # a typo: the field is num_frames
    """, "vidax_buggy_plugin:BuggyPlugin")
    proc = _run(["run", "model.id=buggy-tiny", "--dry-run"], tmp_path, VIDAX_LOAD_PLUGINS="vidax_buggy_plugin")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: error in plugin vidax-buggy, hook check_run: AttributeError: "), lines[0]
    assert "internal error" not in lines[0] and "report it to the plugin's authors" in lines[0]
    proc = _run(["run", "model.id=buggy-tiny", "sampling.seed=7", "--dry-run"], tmp_path,
                VIDAX_LOAD_PLUGINS="vidax_buggy_plugin")
    assert proc.returncode == 2 and proc.stderr.strip() == "error: seed 7 is unlucky: use another sampling.seed"
