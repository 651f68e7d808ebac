"""The core's suite passes with a third-party plugin installed beside the repository's own: the kit's toy family
(examples/vidax_example_plugin, the tutorial's package) registered through the same entry-point path ``pip install``
gives it (a ``vidax`` entry point in a distribution's metadata on the import path), in a pytest subprocess running
the core tests that enumerate the registry. Its id has no default config, no published layout, no README row and
no demo, and the tests whose ids are parametrized by the registry must not take it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOY = ROOT / "examples" / "vidax_example_plugin"

# the core tests that enumerate the registry (tests/repo_models.py), run with the toy installed
RUN = ("every_default_config_is_shipped", "readme_model_table_is_what_list_models_prints", "every_family_has_a_demo")
FILES = ("test_configs.py", "test_docs.py", "test_dry_run_plan.py", "test_bench_random_dit.py",
         "test_random_checkpoint.py")  # the last two only collected: their cases are the registry's ids

PROBE = '''
import json, os

def pytest_sessionstart(session):
    from vidax_core.plugins import get_plugins

    specs = {s.id: s.plugin for s in get_plugins().registry}
    json.dump({"toy": specs.get("example-tiny")}, open(os.environ["PROBE_OUT"] + ".registry", "w"))

ITEMS = []

def pytest_itemcollected(item):
    ITEMS.append(item.nodeid)

def pytest_collection_finish(session):
    json.dump(ITEMS, open(os.environ["PROBE_OUT"], "w"))
'''


def toy_installed(folder: Path) -> dict:
    """The environment of a process in which the toy family is installed as ``pip install`` leaves it: its
    distribution's metadata (name, version, the ``vidax`` entry point) and its package on the import path."""
    info = folder / "vidax_example_plugin-0.2.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vidax-example-plugin\nVersion: 0.2.0\n")
    (info / "entry_points.txt").write_text("[vidax]\nexample = vidax_example_plugin.plugin:ExamplePlugin\n")
    (folder / "toy_beside_probe.py").write_text(PROBE)
    path = os.pathsep.join([str(folder), str(TOY / "src"), os.environ.get("PYTHONPATH", "")])
    return dict(os.environ, PYTHONPATH=path.rstrip(os.pathsep), PROBE_OUT=str(folder / "items.json"),
                XDG_CACHE_HOME=str(folder / "cache"))


def test_core_suite_passes_with_the_toy_family_installed(tmp_path):
    env = toy_installed(tmp_path / "site")
    args = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "toy_beside_probe", "-p", "no:cacheprovider",
            *(str(ROOT / "tests" / f) for f in FILES), "-k", " or ".join(RUN)]
    proc = subprocess.run(args, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert f"{len(RUN)} passed" in proc.stdout, proc.stdout[-2000:]
    registry = json.loads((tmp_path / "site" / "items.json.registry").read_text())
    assert registry["toy"] == "vidax-example-plugin"  # the toy was there, through its entry point
    items = json.loads((tmp_path / "site" / "items.json").read_text())
    assert any("wan2.1-t2v-1.3b" in i for i in items) and not [i for i in items if "example-tiny" in i]
