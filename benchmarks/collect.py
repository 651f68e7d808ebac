"""Gather the cases of benchmarks/accelerator.sh into OUT/accelerator.json and OUT/accelerator.md.

  python benchmarks/collect.py OUT STATUS.tsv WALL_S MODE
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys


def main(out: str, status: str, wall: str, mode: str) -> int:
    cases = []
    for line in open(status):
        name, rc, secs = line.rstrip("\n").split("\t")
        path = os.path.join(out, name + ".json")
        result = json.load(open(path)) if rc == "0" and os.path.exists(path) else None
        md = os.path.join(out, name + ".md")
        cases.append({"case": name, "exit": int(rc), "wall_s": int(secs), "result": result,
                      "markdown": open(md).read() if os.path.exists(md) else None})
    report = {"mode": mode, "created": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
              "host": platform.node(), "wall_s": int(wall), "cases": cases}
    json.dump(report, open(os.path.join(out, "accelerator.json"), "w"), indent=1, default=str)
    lines = [f"benchmarks/accelerator.sh ({mode}), {report['created']}, {report['wall_s']} s wall", "",
             "| case | exit | wall s |", "|---|---|---|"]
    lines += [f"| {c['case']} | {c['exit']} | {c['wall_s']} |" for c in cases]
    for c in cases:
        if c["markdown"]:
            lines += ["", f"### {c['case']}", "", c["markdown"].strip()]
    open(os.path.join(out, "accelerator.md"), "w").write("\n".join(lines) + "\n")
    return 0 if all(c["exit"] == 0 for c in cases) else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
