"""Write the published layouts of this repository's model ids (``vidax_core.bench.published_layout`` records each):
the configs are the families' config-only folders (``plugins/vidax_<family>/scripts/published_config_folders.py``
or ``tests/published.py``). Output: ``plugins/vidax_<family>/src/vidax_<family>/assets/published/<model id>.json.gz``.
Needs the test extra (torch, diffusers, transformers); tests/test_random_checkpoint.py checks that what is committed
is what this writes. A plugin outside the repository runs ``python -m vidax_core.bench.published_layout`` itself.

    python scripts/published_layouts.py [FAMILY ...] [--out DIR]
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
import tempfile

from vidax_core.bench.published_layout import layout, tensors_of, write_layout  # noqa: F401 - the tests' entry

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def config_folders(family: str, out: str) -> dict[str, str]:
    """model id -> its config-only folder, made by the family's own script."""
    plugin = os.path.join(ROOT, "plugins", f"vidax_{family}")
    for script in sorted(os.listdir(os.path.join(plugin, "scripts"))):
        if script.startswith("published_") and script.endswith("config_folders.py"):
            subprocess.run([sys.executable, os.path.join(plugin, "scripts", script), out], check=True,
                           capture_output=True)
    if os.path.exists(os.path.join(plugin, "tests", "published.py")):
        sys.path.insert(0, os.path.join(plugin, "tests"))
        published = importlib.import_module("published")
        for model_id in published.DITS:
            published.write_config_folder(model_id, os.path.join(out, model_id))
        sys.path.pop(0)
    from vidax_core.plugins import get_plugins

    ids = sorted(s.id for s in get_plugins().registry if s.family.replace("-", "_") == family)
    names = os.listdir(out) if os.path.isdir(out) else []
    found = {}
    for model_id in ids:
        if model_id in names:
            found[model_id] = os.path.join(out, model_id)
            continue
        within = sorted((n for n in names if n in model_id), key=len)  # hunyuan's t2v / i2v folders
        if within and not any(o in model_id for o in ("1.5",)):
            found[model_id] = os.path.join(out, within[-1])
    return found


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("families", nargs="*")
    p.add_argument("--out", default=None, help="write here instead of into the plugins' assets")
    a = p.parse_args()
    families = a.families or sorted(d[len("vidax_"):] for d in os.listdir(os.path.join(ROOT, "plugins"))
                                    if d.startswith("vidax_"))
    for family in families:
        with tempfile.TemporaryDirectory() as tmp:
            for model_id, folder in sorted(config_folders(family, tmp).items()):
                dest = a.out or os.path.join(ROOT, "plugins", f"vidax_{family}", "src", f"vidax_{family}", "assets",
                                             "published")
                path = write_layout(folder, model_id, dest)
                print(f"{family} {model_id}: {os.path.getsize(path) >> 10} KiB of layout")


if __name__ == "__main__":
    main()
