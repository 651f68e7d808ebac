"""The memory table of docs/memory.md: for every model id of 13B parameters or more, what its dry run places on a
device and holds in host memory with 8-bit weights and offload, per ``offload.storage``.

  python scripts/memory_table.py [--device tpu-v5e] [--chunk 2] [--out docs-table.md]

Each id's published layout is written with ``vidax bench --write-random-checkpoint --fill zeros`` (headers only,
sparse files: no weight is written or read) and dry-run at its default config; the placement block's numbers
are collected. Torch-free.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIG = 13e9  # parameters


def _params(folder: str) -> float:
    import json

    total = 0
    for comp in ("transformer", "transformer_2"):
        path = os.path.join(folder, comp)
        if not os.path.isdir(path):
            continue
        for name in os.listdir(path):
            if name.endswith(".safetensors"):
                with open(os.path.join(path, name), "rb") as f:
                    n = int.from_bytes(f.read(8), "little")
                    header = json.loads(f.read(n))
                for k, v in header.items():
                    if k != "__metadata__":
                        p = 1
                        for d in v["shape"]:
                            p *= d
                        total += p
    return total


def _dry(config: str, folder: str, device: str, extra: list[str]) -> str:
    from vidax_core import cli

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        code = cli.main(["run", config, f"model.checkpoint={folder}", "--dry-run", "--device", device, *extra])
    return buf.getvalue() if code == 0 else f"error {code}"


def _field(text: str, pattern: str) -> str:
    m = re.search(pattern, text, re.M)
    return m.group(1) if m else "-"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="tpu-v5e")
    p.add_argument("--chunk", type=int, default=2)
    p.add_argument("--out", default=None)
    a = p.parse_args()
    sys.path.insert(0, ROOT)
    from vidax_core.bench.random_checkpoint import write_random_checkpoint
    from vidax_core.errors import UserError
    from vidax_core.plugins import get_plugins

    plugins = get_plugins()
    rows = ["| model id | denoiser parameters | per device (8-bit, offload chunk {c}) | "
            "fits {d} | host, storage host | "
            "host, storage disk | dry-run command |".format(c=a.chunk, d=a.device),
            "|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        from PIL import Image

        png = os.path.join(tmp, "first_frame.png")
        Image.new("RGB", (1280, 720), (90, 120, 150)).save(png)
        for spec in sorted(plugins.registry, key=lambda s: s.id):
            folder = os.path.join(tmp, spec.id)
            try:
                write_random_checkpoint(spec.id, folder, fill="zeros", log=lambda _m: None, plugins=plugins)
            except UserError:
                continue
            n = _params(folder)
            if n < BIG or not spec.default_config:
                continue
            config = os.path.join(ROOT, spec.default_config)
            base = ["model.weight_dtype=float8_e4m3fn", "offload.enabled=true", f"offload.chunk_size={a.chunk}"]
            if "t2v" not in spec.tasks:  # an image-to-video model: any image of its size
                base.append(f"image={png}")
            host = _dry(config, folder, a.device, base + ["offload.storage=host"])
            disk = _dry(config, folder, a.device, base + ["offload.storage=disk"])
            per = _field(host, r"^  peak per device ~([\d.]+ \w+) of")
            fits = "yes" if re.search(r"^  peak per device .*: fits$", host, re.M) else "no"
            held = r"^  host memory ~([\d.]+ \w+)"
            command = (f"vidax run {spec.default_config} model.checkpoint=DIR --dry-run --device {a.device} "
                       + " ".join(x if not x.startswith("image=") else "image=IMAGE" for x in base))
            rows.append(f"| {spec.id} | {n / 1e9:.1f}B | {per} | {fits} | {_field(host, held)} | "
                        f"{_field(disk, held)} | `{command}` |")
    text = "\n".join(rows) + "\n"
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
