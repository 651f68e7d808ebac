"""Gather the cases of benchmarks/accelerator.sh into OUT/accelerator.json and OUT/accelerator.md.

  python benchmarks/collect.py OUT STATUS.tsv WALL_S MODE

STATUS.tsv: one line per case, ``name<TAB>exit<TAB>wall s[<TAB>note]``; exit ``-`` is a case skipped on purpose
(the note says why).
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
        name, rc, secs, *note = line.rstrip("\n").split("\t")
        path = os.path.join(out, name + ".json")
        result = json.load(open(path)) if rc == "0" and os.path.exists(path) else None
        md = os.path.join(out, name + ".md")
        cases.append({"case": name, "exit": None if rc == "-" else int(rc), "wall_s": int(secs), "result": result,
                      "note": note[0] if note else None,
                      "markdown": open(md).read() if os.path.exists(md) else None})
    report = {"mode": mode, "created": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
              "host": platform.node(), "wall_s": int(wall), "cases": cases}
    json.dump(report, open(os.path.join(out, "accelerator.json"), "w"), indent=1, default=str)
    lines = [f"benchmarks/accelerator.sh ({mode}), {report['created']}, {report['wall_s']} s wall", "",
             "| case | exit | wall s | note |", "|---|---|---|---|"]
    lines += [f"| {c['case']} | {'skipped' if c['exit'] is None else c['exit']} | {c['wall_s']} | {c['note'] or ''} |"
              for c in cases]
    for c in cases:
        if c["markdown"]:
            lines += ["", f"### {c['case']}", "", c["markdown"].strip()]
    open(os.path.join(out, "accelerator.md"), "w").write("\n".join(lines) + "\n")
    return 0 if all(c["exit"] in (0, None) for c in cases) else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
