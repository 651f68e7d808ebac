"""The plugin object: a FamilyPlugin subclass inherits the core's defaults, overrides only what differs, loads
through the entry point that names its class, and a misspelled hook method fails loudly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pluggy
import pytest

from vidax_core import FamilyPlugin, KeyRule, Option
from vidax_core.plugins import Plugins
from vidax_core.registry import ModelSpec


class Toy(FamilyPlugin):
    family = "toy"
    models = ({"id": "toy-a", "tasks": ("t2v",)}, {"id": "toy-b", "options": {"k": Option(1, int)}})
    options = {"knob": Option(0.5, float)}
    diffusers_reference = "operator:add"  # a "module:callable" taking (ckpt_dir, run): here their concatenation

    def conversion_rules(self, component):
        return [KeyRule(r"w", "w")]

    def check_run(self, spec, run):
        return ["toy says no"]


class Leaf:
    shape, dtype = (2,), "float32"


def test_registers_every_model_with_the_family_and_its_options():
    p = Plugins()
    p.add(Toy(), "toy")
    a, b = p.registry.get("toy-a"), p.registry.get("toy-b")
    assert (a.family, a.tasks, a.checkpoint_formats, a.plugin) == ("toy", ("t2v",), ("diffusers",), "toy")
    assert set(a.options) == {"knob"} and set(b.options) == {"k"}  # a model's own options win


def test_defaults_and_overrides_reach_owner_dispatch():
    import numpy as np

    p = Plugins()
    p.add(Toy(), "toy")
    spec = p.registry.get("toy-a")
    assert p.call("check_run", spec, run=None) == ["toy says no"]
    assert p.call("shard_rules", spec) is None  # the core's default rules
    out = p.call("convert_checkpoint", spec, component="transformer", tensors={"w": np.ones(2, np.float32)},
                 abstract={("w",): Leaf()}, config={})
    assert list(out) == [("w",)] and out[("w",)].tolist() == [1.0, 1.0]
    assert p.call("convert_checkpoint", spec, component="vae", tensors={}, abstract={}, config={}) is None
    from vidax_core.bench.reference import reference_runner

    assert reference_runner(p, spec, "diffusers", "/ckpt", "RUN") == "/ckpt" + "RUN"  # the declared reference
    with pytest.raises(Exception, match="provides no other reference"):
        reference_runner(p, spec, "other", "/ckpt", "RUN")
    assert p.declared(spec, "quantization_keep") is None  # the core's DEFAULT_KEEP
    assert p.call("builtin_checkpoint", spec, name="tiny") is None  # no assets/ beside this test module
    assert p.call("check_checkpoint", spec, ckpt=None, run=None) == []  # no dit_config: nothing to parse


def test_unparsable_dit_config_is_one_line():
    class Strict(Toy):
        def dit_config(self, ckpt, **overrides):
            raise ValueError("num_layers: expected an integer,\n got 'x'")

    (line,) = Strict().check_checkpoint(None, None, None)
    assert line == "transformer/config.json: unusable (num_layers: expected an integer, got 'x')"


def test_declared_checks_module_answers_both_checks(monkeypatch):
    import types

    seen = []
    module = types.ModuleType("toy_family_checks")
    module.run_problems = lambda spec, run: [f"run {run}"]
    module.checkpoint_problems = lambda spec, ckpt, run, dit: seen.append((ckpt, run, dit)) or [f"dit {dit}"]
    monkeypatch.setitem(sys.modules, "toy_family_checks", module)

    class Checked(FamilyPlugin):
        family = "checked"
        checks = "toy_family_checks"

        def dit_config(self, ckpt, **overrides):
            if ckpt == "broken":
                raise ValueError("bad")
            return f"cfg of {ckpt}"

    p = Checked()
    assert p.check_run(None, "R") == ["run R"]
    assert p.check_checkpoint(None, "C", "R") == ["dit cfg of C"] and seen == [("C", "R", "cfg of C")]
    assert p.check_checkpoint(None, "broken", "R") == ["transformer/config.json: unusable (bad)"]
    assert len(seen) == 1  # an unparsable config is reported alone
    del module.run_problems, module.checkpoint_problems  # a checks module may define either function only
    assert p.check_run(None, "R") is None and p.check_checkpoint(None, "C", "R") == []


def test_a_family_object_answers_only_for_its_family_when_no_owner_is_known():
    p = Plugins()
    p.add(Toy(), "toy")
    assert p.call("check_run", ModelSpec(id="hand-made", family="toy"), run=None) == ["toy says no"]
    assert p.call("check_run", ModelSpec(id="hand-made", family="other"), run=None) is None


def test_misspelled_hook_method_fails_loudly():
    class Typo(Toy):
        def chek_run(self, spec, run):
            return []

    with pytest.raises(pluggy.PluginValidationError, match="'chek_run' is not a vidax hook.*did you mean 'check_run'"):
        Plugins().add(Typo(), "typo")


def test_private_helpers_and_attributes_are_allowed():
    class Helped(Toy):
        label = "Toy"

        def _helper(self):
            return 1

    Plugins().add(Helped(), "helped")


def test_a_wrong_hook_argument_fails_loudly():
    class BadArgs(Toy):
        def check_run(self, spec, run, extra):
            return []

    with pytest.raises(pluggy.PluginValidationError, match="extra"):
        Plugins().add(BadArgs(), "bad")


def test_anything_but_a_family_object_is_refused_in_one_line():
    import types

    for loaded, what in [(types.ModuleType("old_style"), "module old_style"), (object(), "object")]:
        with pytest.raises(TypeError) as err:
            Plugins().add(loaded, "old")
        line = str(err.value)
        assert "\n" not in line and f"names {what}, not a vidax_core.FamilyPlugin subclass" in line, line


def test_entry_point_names_the_class(tmp_path):
    (tmp_path / "toy_family_plugin.py").write_text(textwrap.dedent("""
        from vidax_core import FamilyPlugin

        class ToyPlugin(FamilyPlugin):
            family = "toy"
            models = ({"id": "toy-ep"},)
    """))
    info = tmp_path / "vidax_toy_family-0.0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vidax-toy-family\nVersion: 0.0.1\n")
    (info / "entry_points.txt").write_text("[vidax]\ntoy = toy_family_plugin:ToyPlugin\n")
    exe = os.path.join(os.path.dirname(sys.executable), "vidax")
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, PYTHONPATH=path, VIDAX_LOAD_PLUGINS="toy")
    proc = subprocess.run([exe, "list-models", "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert [(m["id"], m["family"], m["plugin"]) for m in json.loads(proc.stdout)] == [
        ("toy-ep", "toy", "vidax-toy-family")]
