"""Import structure of the core and every plugin: no import circles (module-level and function-level imports
alike), the user-facing run config (``config/``) is imported by nothing below it, and registering the installed
plugins' models imports neither JAX nor flax (``vidax list-models`` stays fast)."""

from __future__ import annotations

import ast
import glob
import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = {"vidax_core": os.path.join(REPO, "src", "vidax_core")}
PACKAGES.update({os.path.basename(d): d
                 for d in sorted(glob.glob(os.path.join(REPO, "plugins", "*", "src", "vidax_*")))})
# The layers that may read the run config: the CLI, the Python API, the runner, what a run reports, the server, the
# bench and the test kit (and config/ itself); step caching's run side (its plan from the `cache:` key) and
# `vidax lora inspect`.
ABOVE_CONFIG = ("vidax_core.config", "vidax_core.cli", "vidax_core.api", "vidax_core.runner", "vidax_core.report",
                "vidax_core.serve", "vidax_core.bench", "vidax_core.testing", "vidax_core.cache.plan",
                "vidax_core.cache.run", "vidax_core.lora.inspect")


def modules(package: str, root: str) -> dict[str, str]:
    out = {}
    for path in glob.glob(os.path.join(root, "**", "*.py"), recursive=True):
        rel = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
        out[package if rel == "__init__" else f"{package}.{rel.removesuffix('.__init__')}"] = path
    return out


def imports(name: str, path: str) -> set[str]:
    """Every module ``name`` imports (absolute names), wherever the import statement stands."""
    is_pkg = path.endswith("__init__.py")
    out = set()
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            out |= {module} | {f"{module}.{a.name}" for a in node.names}
    return out


def edges(package: str, root: str) -> dict[str, set[str]]:
    mods = modules(package, root)
    graph = {}
    for m, path in mods.items():
        targets = set()
        for t in imports(m, path):
            while t and t not in mods and "." in t:
                t = t.rsplit(".", 1)[0]
            if t in mods and t not in (m, package) and not m.startswith(t + "."):
                targets.add(t)
        graph[m] = targets
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state, stack = dict.fromkeys(graph, 0), []

    def visit(u):
        state[u] = 1
        stack.append(u)
        for v in sorted(graph[u]):
            if state[v] == 1:
                return stack[stack.index(v):] + [v]
            if state[v] == 0 and (found := visit(v)):
                return found
        stack.pop()
        state[u] = 2
        return None

    for m in sorted(graph):
        if state[m] == 0 and (found := visit(m)):
            return found
    return None


def test_finder_sees_a_circle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_import_circle(package):
    cycle = find_cycle(edges(package, PACKAGES[package]))
    assert cycle is None, f"import circle in {package}: {' -> '.join(cycle)} (move the shared piece into a leaf module)"


def test_nothing_below_the_run_config_imports_it():
    bad = []
    for m, path in modules("vidax_core", PACKAGES["vidax_core"]).items():
        if m == "vidax_core" or m.startswith(ABOVE_CONFIG):
            continue
        hits = sorted(t for t in imports(m, path) if t == "vidax_core.config" or t.startswith("vidax_core.config."))
        if hits:
            bad.append(f"{m} imports {', '.join(hits)}")
    assert not bad, "; ".join(bad)


# (importer prefix, imported prefixes it must not reach): the runner never climbs to its faces (the Python API, the
# server, the CLI), and a weight transform (LoRA) builds nothing through the pipeline
DOWNWARD = [("vidax_core.runner", ("vidax_core.api", "vidax_core.serve", "vidax_core.cli", "vidax")),
            ("vidax_core.lora", ("vidax_core.runner",))]


@pytest.mark.parametrize("below, above", DOWNWARD)
def test_no_upward_import(below, above):
    bad = []
    for m, path in modules("vidax_core", PACKAGES["vidax_core"]).items():
        if m == below or m.startswith(below + "."):
            hits = sorted(t for t in imports(m, path) if any(t == a or t.startswith(a + ".") for a in above))
            bad += [f"{m} imports {', '.join(hits)}"] if hits else []
    assert not bad, "; ".join(bad)


def test_registering_models_imports_no_jax_or_flax():
    code = ("import json, sys\n"
            "from vidax_core.plugins import get_plugins\n"
            "p = get_plugins()\n"
            "ids = [s.id for s in p.registry]\n"
            "print(json.dumps({'plugins': sorted(i.name for i in p.infos if not i.error), 'models': len(ids),\n"
            "    'heavy': sorted(m for m in ('jax', 'flax', 'torch') if m in sys.modules)}))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "VIDAX_LOAD_PLUGINS"})
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert {"cogvideox", "cosmos", "hunyuan", "ltx", "wan"} <= set(got["plugins"]) and got["models"] >= 5, got
    assert got["heavy"] == [], f"registering the models imported {got['heavy']}"
