"""Add (or refresh) the "8-bit weights / device" column of the per-device memory tables in docs/models/*.md.

A memory table is one whose header has a "DiT weights" cell after its first (a first cell naming the DiT weights is a
row of another table). For every row, the model id is the first backticked
registered id of its first cell (or the doc's alias for a bare name like ``2B``, or the row above's for a blank /
"both" cell), the config the row's ``configs/CONFIG.yaml`` cell or else the first shipped config of that id, and
the overrides the backticked ``key=value`` items of its setting cell (``tp=2`` read as ``parallel.tp=2``;
"offload, chunk N" and "resident" set ``offload.*``). The row's
own ``vidax run CONFIG --dry-run`` is run twice against the family's config-only checkpoint folders (its
``scripts/published_config_folders.py``), with ``model.dtype=bfloat16`` and with ``model.weight_dtype=int8`` added;
the 8-bit ``per device:`` figure goes into the new column when the bf16 one is the row's own figure, else the cell
says "n/a" (the row's setting is not one this script can reproduce). float8_e4m3fn stores the same bytes as int8.

    python scripts/quant_memory_column.py docs/models/wan.md docs/models/ltx.md ...
"""

from __future__ import annotations

import contextlib
import glob
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
ALIASES = {"2B": "cosmos-predict2.5-2b", "14B": "cosmos-predict2.5-14b"}
# Overrides a doc's rows need for a config-only folder; they change no weight (LTX's multi-scale recipe reads the
# latent upsampler's weights, which a config-only folder lacks; the DiT is the same in both recipes).
EXTRA = {"ltx.md": ["options.multiscale=false"]}


def _configs_by_id() -> dict[str, str]:
    import yaml

    out: dict[str, str] = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "configs", "*.yaml"))):
        mid = ((yaml.safe_load(open(path)) or {}).get("model") or {}).get("id")
        if mid and (mid not in out or out[mid].endswith("_demo")):
            out[mid] = os.path.splitext(os.path.basename(path))[0]
    return out


def _folder(root: str, model_id: str) -> str:
    """The config-only folder of ``model_id``: named after it, or the longest folder name it contains (t2v)."""
    if os.path.isdir(os.path.join(root, model_id)):
        return os.path.join(root, model_id)
    names = sorted((n for n in os.listdir(root) if n in model_id), key=len)
    return os.path.join(root, names[-1] if names else model_id)


def _config_folders(family: str, out: str) -> None:
    """The family's config-only checkpoint folders: its ``scripts/published_config_folders.py``, else the
    ``write_config_folder`` of its ``tests/published.py``."""
    plugin = os.path.join(ROOT, "plugins", f"vidax_{family}")
    script = os.path.join(plugin, "scripts", "published_config_folders.py")
    if os.path.exists(script):
        subprocess.run([sys.executable, script, out], check=True, capture_output=True)
        return
    sys.path.insert(0, os.path.join(plugin, "tests"))
    import published

    for model_id in published.DITS:
        published.write_config_folder(model_id, os.path.join(out, model_id))


def dry_run_weights(config: str, checkpoint: str, overrides: list[str]) -> str | None:
    import yaml
    from PIL import Image

    from vidax_core import cli

    data = yaml.safe_load(open(os.path.join(ROOT, "configs", config + ".yaml"))) or {}
    for key in ("image",):  # a conditioning image the preflight wants to exist: a stand-in in the working folder
        if data.get(key) and not os.path.exists(data[key]):
            Image.new("RGB", (64, 64)).save(data[key])
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["run", os.path.join(ROOT, "configs", config + ".yaml"), f"model.checkpoint={checkpoint}",
                         *overrides, "--dry-run"])
    m = re.search(r"^per device: ~?([\d.]+ (?:GiB|MiB))", out.getvalue() + err.getvalue(), re.M)
    return m[1] if code == 0 and m else None


def _overrides(setting: str) -> list[str]:
    items = [o for cell in re.findall(r"`([^`]+)`", setting) for o in cell.split() if "=" in o]
    items = [f"parallel.{o}" if re.match(r"(tp|sp|dp)=", o) else o for o in items]
    items = [o for o in items if "." in o.split("=")[0]]  # run keys only (chunk_size=N is read below)
    m = re.search(r"offload(?:,| with)? chunk(?:_size)?[ =](\d+)", setting)
    if m:
        items += ["offload.enabled=true", f"offload.chunk_size={m[1]}"]
    elif re.search(r"\bresident\b", setting):
        items.append("offload.enabled=false")
    if not any(o.startswith("parallel.dp=") for o in items):
        items.append("parallel.dp=1")  # weights per device do not depend on dp
    return items


def main(docs: list[str]) -> None:
    from vidax_core.plugins import get_plugins

    registry = get_plugins().registry
    by_id = _configs_by_id()
    folders: dict[str, str] = {}
    for doc in docs:
        lines = open(doc, encoding="utf-8").read().split("\n")
        out: list[str] = []
        col = None  # (weights cell index, setting cell index) of the current table
        model_id = None
        for line in lines:
            cells = line.split(" | ")
            if line.startswith("| ") and any("DiT weights" in c for c in cells[1:]) and not col:
                w = next(i for i, c in enumerate(cells) if i and "DiT weights" in c)
                s = next((i for i, c in enumerate(cells) if c.startswith("setting")), 1)
                if HEAD not in line:
                    cells.insert(w + 1, HEAD)
                col, model_id = (w, s), None
                line = " | ".join(cells)
            elif col and re.fullmatch(r"\|( ?-+ ?\|)+", line.replace(" ", "")) is not None:
                want = len(out[-1].split(" | "))
                while line.count("---") < want:
                    line += " --- |"
            elif col and line.startswith("|"):
                w, s = col
                first = cells[0].lstrip("| ").strip()
                ids = [t for t in re.findall(r"`([^`]+)`", first) if t in by_id]
                if ids:
                    model_id = ids[0]
                elif first in ALIASES:
                    model_id = ALIASES[first]
                given = re.findall(r"`([^`]+)`", cells[1]) if len(cells) > 1 else []
                config = given[0] if given and given[0] in by_id.values() else by_id.get(model_id)
                figure = "n/a"
                if model_id and config:
                    family = registry.get(model_id).family
                    if family not in folders:
                        folders[family] = tempfile.mkdtemp(prefix=f"published-{family}-")
                        _config_folders(family, folders[family])
                    ck = _folder(folders[family], model_id)
                    ov = ["model.dtype=bfloat16", *_overrides(cells[s]), *EXTRA.get(os.path.basename(doc), [])]
                    base = dry_run_weights(config, ck, ov)
                    if base is not None and base in cells[w]:
                        figure = "~" + (dry_run_weights(config, ck, ov + ["model.weight_dtype=int8"]) or "n/a")
                    print(f"{doc}: {model_id} {config} {ov}: bf16 {base} (row: {cells[w].strip()}) -> {figure}",
                          flush=True)
                n_head = len(next(o for o in reversed(out) if HEAD in o).split(" | "))
                if len(cells) < n_head:
                    cells.insert(w + 1, figure)
                else:
                    cells[w + 1] = figure
                line = " | ".join(cells)
            else:
                col = None if not line.startswith("|") else col
            out.append(line)
        open(doc, "w", encoding="utf-8").write("\n".join(out))


if __name__ == "__main__":
    paths = [os.path.abspath(d) for d in sys.argv[1:]]
    os.chdir(tempfile.mkdtemp(prefix="quant-column-"))
    main(paths)
