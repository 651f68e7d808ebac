"""Every registered id's weightless dry run (no local weights, no network) on a named device and host: wall
seconds, exit code and the fit lines, as JSON.

    python benchmarks/dry_run_all_ids.py OUT.json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from vidax_core.plugins import get_plugins


def first(lines: list[str], head: str) -> str | None:
    return next((line.strip() for line in lines if line.strip().startswith(head)), None)


def main(out: str) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": tempfile.mkdtemp()}  # nothing cached, nothing fetched
    rows = []
    for model_id in (s.id for s in get_plugins().registry):
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "vidax_core.cli", "run", f"model.id={model_id}", "prompt=a fox",
                               "--dry-run", "--device", "tpu-v5e", "--host-memory", "48"],
                              capture_output=True, text=True, env=env)
        wall = time.perf_counter() - t0
        lines = proc.stdout.splitlines()
        rows.append({"id": model_id, "exit": proc.returncode, "wall_s": round(wall, 2),
                     "peak": first(lines, "peak per device"), "host": first(lines, "host memory"),
                     "text_encoder": first(lines, "text encoder"),
                     "stderr": proc.stderr.strip()[-300:] if proc.returncode else ""})
        print(f"{model_id:40s} rc={proc.returncode} {wall:5.1f}s", flush=True)
    with open(out, "w") as f:
        json.dump(rows, f, indent=1)
    print("max wall", max(r["wall_s"] for r in rows), "s; exits other than 0:",
          {r["id"]: r["stderr"] for r in rows if r["exit"]})


if __name__ == "__main__":
    main(sys.argv[1])
