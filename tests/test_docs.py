"""Docs that stay true: every repository path a doc names exists, and the hook tables of the README and the plugin
tutorial list exactly the hooks of ``src/vidax_core/hookspecs.py`` (both sides read from the files)."""

from __future__ import annotations

import ast
import glob
import itertools
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "src" / "vidax_core"
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])


def _tracked_top_level() -> set[str]:
    """The top-level entries git tracks: what ``make demo`` or a bench writes (``out/``) is no repository path, so a
    doc naming ``out/bench`` is not checked against a folder that happens to exist (outside a checkout: every
    non-hidden entry)."""
    try:
        files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {p.name for p in ROOT.iterdir() if not p.name.startswith(".")}
    return {line.split("/")[0] for line in files.splitlines() if line and not line.startswith(".")}


TOP = _tracked_top_level()
CORE_DIRS = {p.name for p in CORE.iterdir() if p.is_dir() and not p.name.startswith("_")}
PACKAGES = [CORE, *sorted(p for p in ROOT.glob("plugins/*/src/*") if p.is_dir() and not p.name.endswith(".egg-info"))]
PACKAGE_NAMES = {p.name for p in PACKAGES}


def _expand(token: str) -> list[str]:
    """``a/{b,c}.py`` -> ``a/b.py``, ``a/c.py`` (then globbed)."""
    parts = re.split(r"\{([^{}]*)\}", token)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(c) for c in itertools.product(*choices)]


def _exists(base: Path, token: str) -> bool:
    return all(glob.glob(str(base / t)) for t in _expand(token))


OTHER_PROJECTS = re.compile(r"(diffusers|transformers|torch|PyTorch)'?\s*$")


def _strip_code(text: str) -> str:
    return re.sub(r"`[^`]*`", "", re.sub(r"```.*?```", "", text, flags=re.S))


def named_paths(doc: Path) -> list[tuple[str, list[Path]]]:
    """(token, folders it may be relative to) for each repository path the doc names: backticked paths whose first
    part is a top-level entry of the repository (relative to the root; a family page may also mean its plugin's
    folder), a package (``vidax_core/...``, relative to ``src/``), a core subpackage's code (``runner/step.py``,
    relative to ``src/vidax_core`` as docs/architecture.md writes them), any other backticked ``.py`` path, and
    relative links. A path right after another project's name (diffusers' ``scripts/...``) is that project's."""
    text = doc.read_text(encoding="utf-8")
    plugin = ROOT / "plugins" / f"vidax_{doc.stem}"
    out = []
    for m in re.finditer(r"`([^`\s]+)`", text):
        token = m.group(1).rstrip(".,;:")
        if "/" not in token or not re.fullmatch(r"[\w.\-/*{},]+", token) or token.startswith(("/", "..")):
            continue
        if OTHER_PROJECTS.search(text[max(0, m.start() - 40): m.start()]):
            continue
        first = token.split("/")[0]
        if first in TOP:
            out.append((token, [ROOT, plugin] if plugin.is_dir() else [ROOT]))
        elif first in PACKAGE_NAMES:
            out.append((token, [p.parent for p in PACKAGES]))
        elif first in CORE_DIRS and (token.endswith(".py") or token.endswith("/")):
            out.append((token, [CORE]))
        elif token.endswith(".py"):
            out.append((token, [ROOT, *PACKAGES]))
    for target in set(re.findall(r"\]\(([\w.\-/]+)(?:#[^)]*)?\)", _strip_code(text))):
        out.append((target, [doc.parent]))
    return sorted(out)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_a_doc_names_exists(doc):
    missing = [token for token, bases in named_paths(doc) if not any(_exists(b, token) for b in bases)]
    assert not missing, f"{doc.relative_to(ROOT)} names paths that do not exist: {missing}"


def test_the_path_check_sees_paths():
    """The extraction finds the paths these docs are known to name (so an empty list cannot pass silently)."""
    readme = {t for t, _ in named_paths(ROOT / "README.md")}
    assert {"src/vidax_core/hookspecs.py", "docs/writing-a-plugin.md"} <= readme
    arch = {t for t, _ in named_paths(ROOT / "docs" / "architecture.md")}
    assert "runner/plan.py" in arch
    assert not _exists(ROOT, "src/vidax_core/no_such_module.py")


def hookspec_names() -> set[str]:
    """Functions of hookspecs.py decorated with ``@hookspec`` / ``@hookspec(...)``."""
    tree = ast.parse((CORE / "hookspecs.py").read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            for dec in node.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                if isinstance(target, ast.Name) and target.id == "hookspec":
                    names.add(node.name)
    return names


def readme_hook_names() -> set[str]:
    """The hooks the README lists where it points at ``src/vidax_core/hookspecs.py``: up to the next section, the
    first cells of a hook table (rows ``| `name(...)` |``) and the bare backticked identifiers of the pointing
    paragraph (a prose list; the entry-point group `vidax` aside)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("`src/vidax_core/hookspecs.py`")
    start = text.rfind("\n\n", 0, start) + 2
    end = text.find("\n## ", start)
    section = text[start: end if end > 0 else len(text)]
    paragraph = section.split("\n\n")[0]
    return table_hooks(section) | (set(re.findall(r"`([a-z][a-z0-9_]*)`", paragraph)) - {"vidax"})


def table_hooks(text: str) -> set[str]:
    """The hooks named in the first cells of a hook table: rows starting ``| `name(...)```, a cell possibly naming
    several (``| `a(...)`, `b(...)` |``)."""
    cells = [row.split(" | ")[0] for row in re.findall(r"^\| `[a-z][a-z0-9_]*\(.*$", text, flags=re.M)]
    return {name for cell in cells for name in re.findall(r"`([a-z][a-z0-9_]*)\(", cell)}


def tutorial_hook_names() -> set[str]:
    return table_hooks((ROOT / "docs" / "writing-a-plugin.md").read_text(encoding="utf-8"))


def test_hookspecs_are_found():
    names = hookspec_names()
    assert {"register_models", "build_dit", "sampling_passes"} <= names and len(names) >= 15


@pytest.mark.parametrize("where", ["README.md", "docs/writing-a-plugin.md"])
def test_hook_tables_list_exactly_the_hookspecs(where):
    listed = readme_hook_names() if where == "README.md" else tutorial_hook_names()
    want = hookspec_names()
    assert listed == want, f"{where}: missing {sorted(want - listed)}, not hooks {sorted(listed - want)}"


# --- the README's front page: models, distributions, keys ---

def _readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def readme_model_rows() -> dict[str, tuple[str, str, str]]:
    """id -> (family, tasks, default config) from the README's model table rows
    ``| `id` | [family](docs/models/family.md) | t2v,i2v | `configs/x.yaml` |``."""
    rows = re.findall(r"^\| `([^`]+)` \| \[([a-z0-9-]+)\]\([^)]*\) \| ([a-z0-9,]+) \| `([^`]+)` \|$", _readme(), re.M)
    return {i: (family, tasks, config) for i, family, tasks, config in rows}


def test_readme_model_table_is_what_list_models_prints():
    from repo_models import repo_specs

    registry = {s.id: (s.family, ",".join(s.tasks), s.default_config) for s in repo_specs()}
    listed = readme_model_rows()
    assert len(registry) >= 29
    assert sorted(set(registry) - set(listed)) == [], "README's model table misses these ids"
    assert sorted(set(listed) - set(registry)) == [], "README's model table names ids no plugin registers"
    wrong = {i: (listed[i], registry[i]) for i in registry if listed[i] != registry[i]}
    assert not wrong, f"README row != vidax list-models: {wrong}"


def _distributions() -> dict[str, str]:
    """distribution name -> its folder, from every pyproject.toml of the repository."""
    out = {}
    for toml in [ROOT / "pyproject.toml", *ROOT.glob("plugins/*/pyproject.toml"),
                 *ROOT.glob("examples/*/pyproject.toml")]:
        name = re.search(r'^name\s*=\s*"([^"]+)"', toml.read_text(encoding="utf-8"), re.M).group(1)
        folder = toml.parent.relative_to(ROOT).as_posix()
        out[name] = "src/vidax_core/" if folder == "." else folder + "/"
    return out


def test_readme_layout_names_every_distribution():
    text = _readme()
    block = text[text.index("## Layout"):]
    block = block[block.index("```") + 3: block.index("```", block.index("```") + 3)]
    dists = _distributions()
    assert {"vidax-core", "vidax-wan"} <= set(dists)
    missing = [f"{folder} ({name})" for name, folder in dists.items()
               if not re.search(rf"^{re.escape(folder)}\s+distribution `{re.escape(name)}`", block, re.M)]
    assert not missing, f"README's layout misses: {missing}"


def readme_key_sections() -> dict[str, str]:
    """Top-level key -> its text in the README's key listing (the YAML block after "The keys are:")."""
    text = _readme()
    start = text.index("```yaml", text.index("The keys are:"))
    block = text[start + 7: text.index("```", start + 7)]
    heads = list(re.finditer(r"^([a-z_]+):", block, re.M))
    return {m.group(1): block[m.start(): heads[n + 1].start() if n + 1 < len(heads) else len(block)]
            for n, m in enumerate(heads)}


def test_readme_key_listing_names_every_key():
    import dataclasses

    from vidax_core.config import RunConfig

    sections = readme_key_sections()
    missing = []
    for f in dataclasses.fields(RunConfig):
        if f.name not in sections:
            missing.append(f.name)
            continue
        kind = f.default_factory if f.default_factory is not dataclasses.MISSING else None
        if kind is not None and dataclasses.is_dataclass(kind):
            missing += [f"{f.name}.{sub.name}" for sub in dataclasses.fields(kind)
                        if not re.search(rf"\b{sub.name}\b", sections[f.name])]
    assert not missing, f"README's key listing misses: {missing}"
    assert {"cache", "prompts", "lora_mode"} <= set(sections)


# --- claims the docs make about the code, checked against it ---

def test_architecture_call_order_is_the_generate_order():
    """docs/architecture.md's diagram orders a call as ``LoadedModel._generate`` does: the plan, the VAE, the
    weights, the prompts, the passes (or windows), the decode, the outputs."""
    import inspect

    from vidax_core.runner.loaded import LoadedModel

    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    start = text.index(" vidax run cfg.yaml")
    diagram = text[start: text.index("\n```", start)]
    labels = [m.group(1).strip() for m in re.finditer(r"^ ([a-z][a-z ]*?) \.{3,}", diagram, re.M)]
    assert labels == ["load", "plan", "a call", "vae", "vidax run", "weights", "prompts", "each pass", "step loop",
                      "decode", "stages", "outputs"], labels
    code = inspect.getsource(LoadedModel._generate)
    steps = ["self.plan_call(", "self.vae(", "self.load_weights(", "contexts = self._encode(plan, timer)\n",
             "self._sample_passes(", "self._decode(", "self.stages.run(", "write_call_outputs("]
    at = [code.index(s) for s in steps]
    assert at == sorted(at), dict(zip(steps, at))
    early = code.index("if self.single and not self.experts:")  # vidax run: encoded before the weights
    assert code.index("self.vae(") < early < code.index("self.load_weights(")


def readme_hook_defaults() -> dict[str, str]:
    """hook name -> the README's default cell, from its hook table."""
    rows = re.findall(r"^\| (`[a-z][a-z0-9_]*\(.*?) \| (.*) \|$", _readme(), re.M)
    return {name: default for cell, default in rows for name in re.findall(r"`([a-z][a-z0-9_]*)\(", cell)}


def test_readme_hook_defaults_name_the_declarations_they_read():
    """Where the README's default of a hook reads a FamilyPlugin declaration (``checks``, ``original_format``...),
    the base class has it and its default hook answers from it."""
    import sys
    import types

    from vidax_core import FamilyPlugin

    defaults = readme_hook_defaults()
    for hook, names in {"build_dit": ("dit_class", "dit_flops", "dit_grid_limit", "dit_example_inputs"),
                        "check_run": ("checks",), "check_checkpoint": ("checks",),
                        "open_checkpoint": ("original_format",), "vae_latent_shape": ("vae_latent_grid",)}.items():
        for name in names:
            assert f"`{name}`" in defaults[hook], (hook, name)
            assert hasattr(FamilyPlugin, name), name
    # check_run: the checks module's run_problems, else no problems; open_checkpoint: the declared reader
    module = types.ModuleType("readme_toy_checks")
    module.run_problems = lambda spec, run: ["too big"]
    module.open_original = lambda spec, path: f"opened {path}"
    sys.modules["readme_toy_checks"] = module
    try:
        class Toy(FamilyPlugin):
            checks = "readme_toy_checks"
            original_format = "readme_toy_checks:open_original"

        assert Toy().check_run(None, None) == ["too big"] and FamilyPlugin().check_run(None, None) is None
        assert Toy().open_checkpoint(None, "/x") == "opened /x" and FamilyPlugin().open_checkpoint(None, "/x") is None
    finally:
        del sys.modules["readme_toy_checks"]
