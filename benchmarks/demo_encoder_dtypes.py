"""Every family's demo in bfloat16: where its prompt encoders computed and in which dtypes, as the run states them.

    python benchmarks/demo_encoder_dtypes.py OUT.json [--dtype bfloat16] [--configs configs/*_demo.yaml]

Each demo config (its built-in tiny checkpoint) runs once at its own size with ``model.dtype`` set, in a
``vidax run`` process of its own, writing its metrics; the table printed (and ``OUT.json``) holds each run's exit
code, ``text_encoders`` (where, the towers' dtypes) and whether every tower computed in the asked dtype (a family
whose DiT embeds the token ids itself, Cosmos3, has no tower: its ``dtypes`` is empty).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile


def run_one(config: str, dtype: str, work: str) -> dict:
    name = os.path.basename(config)[: -len(".yaml")]
    metrics = os.path.join(work, f"{name}.json")
    cmd = [sys.executable, "-m", "vidax_core.cli", "run", config, f"model.dtype={dtype}", "output.path=null",
           f"output.metrics={metrics}", "--quiet"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    row = {"config": config, "exit": proc.returncode}
    if proc.returncode != 0:
        row["error"] = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return row
    with open(metrics) as f:
        info = json.load(f).get("text_encoders") or {}
    dtypes = info.get("dtypes") or {}
    # a family whose DiT embeds the token ids itself (Cosmos3) has no prompt-encoder tower: nothing to compute in
    row.update(where=info.get("where"), dtypes=dtypes, towers=len(dtypes), all_in_dtype=set(dtypes.values()) <= {dtype})
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--configs", nargs="*", default=sorted(glob.glob("configs/*_demo.yaml")) + ["configs/demo.yaml"])
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for config in args.configs:
            row = run_one(config, args.dtype, work)
            rows.append(row)
            said = row.get("dtypes", row.get("error")) or "no prompt-encoder tower (the DiT embeds the token ids)"
            print(f"{config:40s} exit {row['exit']}  {row.get('where')}  {said}", flush=True)
    with open(args.out, "w") as f:
        json.dump({"dtype": args.dtype, "rows": rows}, f, indent=1)
    bad = [r["config"] for r in rows if r["exit"] != 0 or not r.get("all_in_dtype")]
    print(f"{len(rows) - len(bad)} of {len(rows)} demos computed every prompt encoder in {args.dtype}"
          + (f"; not: {bad}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
