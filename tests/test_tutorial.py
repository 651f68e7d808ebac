"""docs/writing-a-plugin.md is complete and tested as written.

Every file of the tutorial's package appears in the document as code blocks headed ``<!-- file: PATH -->`` (a file
shown in several blocks is their concatenation, separated by two blank lines). The main test writes those blocks,
and nothing else, into an empty folder, pip-installs the result into a private folder (``--target``, offline,
so the shared environment is untouched), and with only that folder on PYTHONPATH runs ``vidax list-models``,
``vidax run`` of the tutorial's config and the package's own test suite (the core's family checks on fake
devices and the PyTorch parity test). Nothing from the repository is importable there but the installed
vidax-core (and vidax-wan). A second test keeps examples/vidax_example_plugin/ identical to the blocks, file for
file, so the two cannot drift; a third checks the hook reference lists every hook the core declares.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(REPO, "docs", "writing-a-plugin.md")
EXAMPLE = os.path.join(REPO, "examples", "vidax_example_plugin")
BLOCK = re.compile(r"^<!-- file: (\S+) -->\n(`{3,})[\w-]*\n(.*?)\n\2$", re.DOTALL | re.MULTILINE)
NOT_SOURCE = {"__pycache__", ".pytest_cache", "build", "out"}


def tutorial_files() -> dict[str, str]:
    """PATH -> text of every file the tutorial shows (blocks of one path joined by two blank lines)."""
    with open(DOC, encoding="utf-8") as f:
        doc = f.read()
    parts: dict[str, list[str]] = {}
    for path, _, body in BLOCK.findall(doc):
        parts.setdefault(path, []).append(body)
    markers = len(re.findall(r"^<!-- file: ", doc, re.MULTILINE))
    assert markers == sum(map(len, parts.values())), "a file marker not followed by a code block"
    return {path: "\n\n\n".join(bodies) + "\n" for path, bodies in parts.items()}


def example_files() -> dict[str, str]:
    out = {}
    for root, dirs, files in os.walk(EXAMPLE):
        dirs[:] = [d for d in dirs if d not in NOT_SOURCE and not d.endswith(".egg-info")]
        for name in files:
            path = os.path.join(root, name)
            with open(path, encoding="utf-8") as f:
                out[os.path.relpath(path, EXAMPLE).replace(os.sep, "/")] = f.read()
    return out


def test_example_package_is_the_tutorial_file_for_file():
    doc, example = tutorial_files(), example_files()
    assert sorted(doc) == sorted(example), "files in only one of docs/writing-a-plugin.md and the example: " + str(
        sorted(set(doc) ^ set(example)))
    differ = [p for p in sorted(doc) if doc[p] != example[p]]
    assert not differ, f"docs/writing-a-plugin.md and examples/vidax_example_plugin/ differ in {differ}"


def hook_signatures() -> dict[str, str]:
    """hook name -> "name(arg, ...)" as hookspecs.py declares it."""
    from vidax_core import hookspecs

    return {n: f"{n}({', '.join(inspect.signature(fn).parameters)})"
            for n, fn in inspect.getmembers(hookspecs, inspect.isfunction) if hasattr(fn, "vidax_spec")}


@pytest.mark.parametrize("doc", [DOC, os.path.join(REPO, "README.md")], ids=["tutorial", "readme"])
def test_hook_tables_match_the_hookspecs(doc):
    with open(doc, encoding="utf-8") as f:
        text = f.read()
    hooks = hook_signatures()
    assert len(hooks) >= 20
    missing = [sig for sig in hooks.values() if f"`{sig}`" not in text]
    assert not missing, f"{os.path.basename(doc)}'s hook table lacks (or misspells) {missing}"
    listed = set(re.findall(r"^\| `(\w+)\(", text, re.MULTILINE))
    assert listed <= set(hooks), f"{os.path.basename(doc)} lists hooks the core does not declare: {listed - set(hooks)}"


def test_the_plugin_object_has_every_hook_with_its_arguments():
    from vidax_core import FamilyPlugin

    for name, sig in hook_signatures().items():
        params = list(inspect.signature(getattr(FamilyPlugin, name)).parameters)[1:]
        assert f"{name}({', '.join(params)})" == sig


def test_every_name_of_the_public_api_section_imports():
    import importlib

    with open(DOC, encoding="utf-8") as f:
        doc = f.read()
    section = doc[doc.index("## The public API"):doc.index("## Rules of the road")]
    block = re.search(r"from vidax_core import \((.*?)\)", section, re.DOTALL).group(1)
    names = re.findall(r"\b[A-Za-z_]\w*\b", re.sub(r"#.*", "", block))
    assert len(names) > 40
    core = importlib.import_module("vidax_core")
    assert [n for n in names if not hasattr(core, n)] == []
    # and every name there is also in vidax_core.__all__ (the documented public surface)
    assert set(names) <= set(core.__all__)


IMPORT = re.compile(r"\bfrom\s+(vidax_core[\w.]*)\s+import\s+(\([^)]*\)|[^\n]+)")
PUBLIC = ("vidax_core", "vidax_core.testing")  # the plugin API and the test kit


def test_the_page_and_the_example_import_only_what_vidax_core_exports():
    """Every ``from vidax_core... import`` in the page's code (the example package's files and the snippets) and in
    examples/ names ``vidax_core`` or the kit ``vidax_core.testing``, and each name is in that package's
    ``__all__``: a third party following the page uses the public surface only."""
    import importlib

    with open(DOC, encoding="utf-8") as f:
        texts = {"docs/writing-a-plugin.md": "\n".join(re.findall(r"```python\n(.*?)```", f.read(), re.DOTALL))}
    texts.update({f"examples/{p}": t for p, t in example_files().items() if p.endswith(".py")})
    seen, bad = 0, []
    for where, text in texts.items():
        for module, names in IMPORT.findall(text):
            names = re.findall(r"\b[A-Za-z_]\w*\b", re.sub(r"#.*", "", names))
            seen += len(names)
            if module not in PUBLIC:
                bad.append(f"{where}: from {module} import {', '.join(names)}")
                continue
            public = set(importlib.import_module(module).__all__)
            bad += [f"{where}: {module}.{n} is not exported" for n in names if n not in public]
    assert seen > 60 and not bad, bad


def run(cmd: list[str], env: dict, cwd, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)


@pytest.mark.long
def test_tutorial_builds_installs_runs_and_passes_its_tests(tmp_path):
    pytest.importorskip("setuptools", reason="building the package offline needs setuptools in the environment")
    pkg, site, work = tmp_path / "vidax_example_plugin", tmp_path / "site", tmp_path / "work"
    for path, text in tutorial_files().items():  # the tutorial's blocks, nothing else
        (pkg / path).parent.mkdir(parents=True, exist_ok=True)
        (pkg / path).write_text(text, encoding="utf-8")
    work.mkdir()
    pip = run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--no-build-isolation",
               "--target", str(site), str(pkg)], dict(os.environ), tmp_path, timeout=300)
    assert pip.returncode == 0, pip.stdout + pip.stderr

    # Only the private install folder on the path: no repository conftest, no testing/ helpers, no example source.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYTEST", "XLA_", "JAX_"))}
    env.update(PYTHONPATH=str(site), JAX_PLATFORMS="cpu", XDG_CACHE_HOME=str(tmp_path / "cache"))
    vidax = os.path.join(os.path.dirname(sys.executable), "vidax")

    listed = run([vidax, "list-models", "--json"], env, work)
    assert listed.returncode == 0, listed.stderr
    models = {m["id"]: m for m in json.loads(listed.stdout)}
    assert (models["example-tiny"]["plugin"], models["example-tiny"]["family"]) == ("vidax-example-plugin", "example")

    out = work / "out" / "example.mp4"
    ran = run([vidax, "run", str(pkg / "example.yaml"), "sampling.num_steps=2", "sampling.num_frames=4",
               f"output.path={out}", "--quiet"], env, work)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert out.is_file() and out.stat().st_size > 0

    tests = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], env, pkg)
    print(tests.stdout[-3000:])
    assert tests.returncode == 0, tests.stdout[-6000:] + tests.stderr[-3000:]
    assert re.search(r"\b12 passed\b", tests.stdout) and "skipped" not in tests.stdout, tests.stdout[-2000:]
