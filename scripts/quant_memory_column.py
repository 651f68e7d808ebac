"""Add (or refresh) the "8-bit weights / device" column of the per-device memory tables in docs/models/*.md.

For every table row (``| `model id` | `config` | setting (devices) | DiT weights / device | ...``) this runs the
row's own ``vidax run configs/CONFIG.yaml --dry-run`` with the row's overrides plus ``model.dtype=bfloat16
model.weight_dtype=int8`` against the family's config-only checkpoint folders (its
``scripts/published_config_folders.py``), and writes the ``per device:`` figure it prints into the column. int8 and
float8_e4m3fn store the same bytes (one byte per weight, one fp32 scale per output channel).

    python scripts/quant_memory_column.py docs/models/wan.md [more docs...]
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import tempfile

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEAD = "8-bit weights / device"
ROW = re.compile(r"^\| `([^`]+)` \| `([^`]+)` \| ([^|]+) \| ([^|]+) \|")


def dry_run_weights(config: str, checkpoint: str, overrides: list[str]) -> str:
    from vidax_core import cli

    import yaml
    from PIL import Image

    for key in ("image",):  # a conditioning image the preflight wants to exist: a stand-in in the working folder
        name = (yaml.safe_load(open(os.path.join(ROOT, "configs", config + ".yaml"))) or {}).get(key)
        if name and not os.path.exists(name):
            Image.new("RGB", (64, 64)).save(name)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["run", os.path.join(ROOT, "configs", config + ".yaml"), f"model.checkpoint={checkpoint}",
                         "model.dtype=bfloat16", "model.weight_dtype=int8", *overrides, "--dry-run"])
    text = out.getvalue() + err.getvalue()
    m = re.search(r"^per device: (~[\d.]+ (?:GiB|MiB))", text, re.M)
    if code != 0 or not m:
        raise SystemExit(f"{config} {overrides}: dry run failed:\n{text[-2000:]}")
    return m[1]


def main(docs: list[str]) -> None:
    from vidax_core.plugins import get_plugins

    registry = get_plugins().registry
    folders: dict[str, str] = {}
    for doc in docs:
        lines = open(doc, encoding="utf-8").read().split("\n")
        out = []
        for line in lines:
            if line.startswith("| model id | config |") and "DiT weights / device" in line:
                cells = line.split(" | ")
                if HEAD not in line:
                    cells.insert(4, HEAD)
                line = " | ".join(cells)
            elif line.startswith("| --- | --- | --- |") and out and HEAD in out[-1] and line.count("---") < out[-1].count(" | ") + 1:
                line = line + " --- |"
            else:
                m = ROW.match(line)
                if m:
                    model_id, config, setting = m[1], m[2], m[3]
                    family = registry.get(model_id).family
                    if family not in folders:
                        folders[family] = tempfile.mkdtemp(prefix=f"published-{family}-")
                        script = os.path.join(ROOT, "plugins", f"vidax_{family}", "scripts", "published_config_folders.py")
                        subprocess.run([sys.executable, script, folders[family]], check=True)
                    overrides = [o for cell in re.findall(r"`([^`]+)`", setting) for o in cell.split()]
                    if not any(o.startswith("parallel.dp=") for o in overrides):
                        overrides.append("parallel.dp=1")  # weights per device do not depend on dp
                    figure = dry_run_weights(config, os.path.join(folders[family], model_id), overrides)
                    cells = line.split(" | ")
                    header = next(h for h in reversed(out) if h.startswith("| model id |"))
                    if len(cells) < len(header.split(" | ")):
                        cells.insert(4, figure)
                    else:
                        cells[4] = figure
                    line = " | ".join(cells)
                    print(f"{model_id} {config} {overrides}: {figure}", flush=True)
            out.append(line)
        open(doc, "w", encoding="utf-8").write("\n".join(out))


if __name__ == "__main__":
    docs = [os.path.abspath(d) for d in sys.argv[1:]]
    os.chdir(tempfile.mkdtemp(prefix="quant-column-"))
    main(docs)
