"""Where the suite's wall time goes, per xdist worker.

The controller sees every test report with the worker that ran it and the report's start and stop times. At the end
of the run it prints each worker's busy time and idle tail (a worker idle at the end is time a better order would
save) and the files that cost most; with ``VIDAX_TEST_TIMES=PATH`` it also writes every phase as JSON lines, the
input for cutting the suite down.
"""

from __future__ import annotations

import collections
import json
import os
from typing import Any

import pytest

TOP_FILES = 12


class SuiteTiming:
    """Collects (worker, test, phase, start, stop) from the reports the controller receives."""

    def __init__(self, path: str | None = None):
        self.path = path
        self.rows: list[dict[str, Any]] = []

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        start, stop = getattr(report, "start", None), getattr(report, "stop", None)
        if start is None or stop is None:
            return
        node = getattr(report, "node", None)
        worker = getattr(getattr(node, "gateway", None), "id", None) or "main"
        self.rows.append(dict(worker=worker, test=report.nodeid, phase=report.when, start=start, stop=stop))

    def summary(self) -> list[str]:
        if not self.rows:
            return []
        begin = min(r["start"] for r in self.rows)
        end = max(r["stop"] for r in self.rows)
        busy: dict[str, float] = collections.defaultdict(float)
        last: dict[str, float] = {}
        per_file: dict[str, float] = collections.defaultdict(float)
        for r in self.rows:
            took = r["stop"] - r["start"]
            busy[r["worker"]] += took
            last[r["worker"]] = max(last.get(r["worker"], 0.0), r["stop"])
            per_file[r["test"].split("::", 1)[0]] += took
        lines = [f"suite timing: {end - begin:.0f} s from the first test to the last"]
        for worker in sorted(busy):
            lines.append(
                f"  {worker}: busy {busy[worker]:.0f} s, idle at the end {end - last[worker]:.0f} s"
            )
        lines.append("  costliest files (s, all phases):")
        for name, took in sorted(per_file.items(), key=lambda kv: -kv[1])[:TOP_FILES]:
            lines.append(f"    {took:7.1f}  {name}")
        return lines

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter) -> None:
        for line in self.summary():
            terminalreporter.write_line(line)
        if self.path:
            with open(self.path, "w") as f:
                for r in self.rows:
                    f.write(json.dumps(r) + "\n")


def register(config: pytest.Config) -> None:
    """Install the collector on the controller (not on xdist workers, whose reports it already sees)."""
    if hasattr(config, "workerinput"):
        return
    config.pluginmanager.register(SuiteTiming(os.environ.get("VIDAX_TEST_TIMES")), "vidax-suite-timing")
