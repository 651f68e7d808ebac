"""Print the fuzz campaign's counts table from the files ``VIDAX_FUZZ_REPORT=DIR`` made (``make fuzz``).

Sums each surface over the pytest-xdist workers that ran parts of it; exits 1 when any input was an internal
error or a hang. Usage: ``python tests/fuzz_report.py DIR [SECONDS]`` (the campaign's wall time, printed).
"""

from __future__ import annotations

import collections
import glob
import json
import os
import sys

COLUMNS = ("ok", "user_error", "internal_error", "hang")


def main(folder: str, seconds: str | None = None) -> int:
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    violations: dict[str, dict] = collections.defaultdict(dict)
    family_of: dict[str, str] = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        with open(path) as f:
            rec = json.load(f)
        counts[rec["surface"]].update(rec["counts"])
        violations[rec["surface"]].update(rec.get("violations") or {})
        if rec.get("family"):
            family_of[rec["surface"]] = rec["family"]
    if not counts:
        print(f"error: no fuzz reports in {folder}", file=sys.stderr)
        return 1
    print(f"{'surface':<24}" + "".join(f"{c:>16}" for c in COLUMNS) + f"{'inputs':>10}")
    families: collections.Counter = collections.Counter()
    for surface in sorted(counts):
        c = counts[surface]
        print(f"{surface:<24}" + "".join(f"{c[k]:>16}" for k in COLUMNS) + f"{sum(c.values()):>10}")
        if surface in family_of:
            families[family_of[surface]] += sum(c.values())
    total = collections.Counter()
    for c in counts.values():
        total.update(c)
    print(f"{'total':<24}" + "".join(f"{total[k]:>16}" for k in COLUMNS) + f"{sum(total.values()):>10}")
    if families:
        print("inputs per family: " + ", ".join(f"{k} {v}" for k, v in sorted(families.items())))
    if seconds:
        print(f"wall time: {int(seconds) // 60} min {int(seconds) % 60} s")
    for surface, v in violations.items():
        for sig, detail in v.items():
            print(f"VIOLATION {surface} at {sig}: {detail[:300]}")
    return 1 if total["internal_error"] or total["hang"] else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
