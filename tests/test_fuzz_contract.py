"""The contract every fuzz test asserts, and the per-surface outcome counts ``make fuzz`` prints.

An input either succeeds or raises exactly one :class:`UserError` whose message is one line; any other exception
is an internal error (a bug), any input over ``TIME_LIMIT_S`` a hang, and no input may take the resident memory
more than ``MEMORY_LIMIT_BYTES`` above where it started (a reader that allocates what a header claims; the
kernel's peak is reset before each input, so an earlier test in the same worker does not count).
``VIDAX_FUZZ_EXAMPLES`` sets the number of inputs per fuzz test (small by default, for ``make test``). With
``VIDAX_FUZZ_CAMPAIGN=1`` (``make fuzz``) a violation does not stop the campaign: it is counted, its first
instance per distinct (exception, code location) printed, and the module fails at its end.
"""

from __future__ import annotations

import collections
import json
import os
import re
import resource
import signal
import sys
import time
import traceback
from typing import Any, Callable

from hypothesis import HealthCheck, Phase

from vidax_core.errors import UserError

try:  # imported once here: its first import (seconds) belongs to no input (beta sigmas import it lazily)
    import scipy.stats  # noqa: F401
except ImportError:  # pragma: no cover - then beta sigmas are refused, quickly
    pass

CAMPAIGN = bool(os.environ.get("VIDAX_FUZZ_CAMPAIGN"))
TIME_LIMIT_S = 10.0
MEMORY_LIMIT_BYTES = 2 << 30


def fuzz_settings(default: int) -> dict[str, Any]:
    n = int(os.environ.get("VIDAX_FUZZ_EXAMPLES", default))
    phases = [Phase.explicit, Phase.generate] if CAMPAIGN else list(Phase)  # a campaign counts, it does not shrink
    return dict(max_examples=n, deadline=None, derandomize="VIDAX_FUZZ_EXAMPLES" not in os.environ,
                suppress_health_check=list(HealthCheck), database=None, phases=phases)


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kilobytes on Linux


def _status_bytes(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _start_input() -> int:
    """This process's resident bytes now, with the kernel's peak (VmHWM) reset to them where Linux allows it, so
    the peak read after the input is the input's own, not one an earlier test in this worker reached."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    return _status_bytes("VmRSS") or _peak_rss()


def _input_growth(start: int) -> int:
    """How far above ``start`` the resident memory peaked during the input."""
    return (_status_bytes("VmHWM") or _peak_rss()) - start


class _Timeout(BaseException):
    pass


class Outcomes:
    """Counts of ok / user_error / internal_error / hang for one surface, printed at the end of its module."""

    def __init__(self, surface: str) -> None:
        self.surface, self.counts = surface, collections.Counter()
        self.rss0 = _peak_rss()
        self.examples: dict[str, str] = {}
        self.signatures: dict[str, str] = {}
        self.slowest: tuple[float, str] = (0.0, "")

    def add(self, outcome: str, detail: str = "") -> None:
        self.counts[outcome] += 1
        if detail and outcome not in self.examples:
            self.examples[outcome] = detail

    def save(self, family: str | None = None) -> None:
        """With ``VIDAX_FUZZ_REPORT=DIR`` (``make fuzz``), write the counts to DIR as JSON, one file per surface
        and pytest-xdist worker: worker output never reaches the terminal, so tests/fuzz_report.py prints the
        campaign's table from these files."""
        folder = os.environ.get("VIDAX_FUZZ_REPORT")
        if not folder:
            return
        os.makedirs(folder, exist_ok=True)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.surface)
        with open(os.path.join(folder, f"{name}.{worker}.json"), "w") as f:
            json.dump({"surface": self.surface, "family": family, "counts": dict(self.counts),
                       "slowest_s": self.slowest[0], "violations": self.signatures}, f)

    def report(self) -> None:
        self.save()
        total = sum(self.counts.values())
        parts = ", ".join(f"{k}={self.counts[k]}" for k in ("ok", "user_error", "internal_error", "hang"))
        growth = (_peak_rss() - self.rss0) >> 20
        print(f"\nfuzz {self.surface}: {total} inputs: {parts}; peak memory growth {growth} MiB; slowest input "
              f"{self.slowest[0]:.2f} s {self.slowest[1][:200]}", file=sys.__stdout__)
        for k, v in self.examples.items():
            if k != "ok":
                print(f"  first {k}: {v[:300]}", file=sys.__stdout__)
        for sig, v in self.signatures.items():
            print(f"  VIOLATION at {sig}: {v[:300]}", file=sys.__stdout__)
        sys.__stdout__.flush()

    def assert_clean(self) -> None:
        bad = {k: self.counts[k] for k in ("internal_error", "hang") if self.counts[k]}
        assert not bad, f"fuzz {self.surface}: {bad} ({len(self.signatures)} distinct)"


def report_all(outcomes: Any) -> None:
    """The end of a module with several surfaces: each one that saw inputs reported (and saved), then any internal
    error or hang among them fails the module."""
    for o in outcomes:
        if sum(o.counts.values()):
            o.report()
    for o in outcomes:
        o.assert_clean()


def check_contract(outcomes: Outcomes, fn: Callable[[], Any], expect_error: str | None = None, label: str = "",
                   time_limit: float = TIME_LIMIT_S) -> str:
    """Run ``fn`` under the contract; record and return the outcome ("ok" or "user_error"). ``time_limit``: for a
    surface whose inputs are whole runs (a hang is still an input past it)."""

    def alarm(signum, frame):
        raise _Timeout()

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, time_limit + 5)
    rss0 = _start_input()
    t0 = time.perf_counter()
    try:
        fn()
        outcome, detail = "ok", ""
    except UserError as exc:
        msg = str(exc)
        lines = [ln for ln in msg.splitlines() if ln.strip()]
        outcome, detail = ("user_error", msg) if len(lines) == 1 else ("internal_error", f"multi-line: {msg!r}")
        if outcome == "internal_error":
            outcomes.signatures.setdefault("multi-line UserError", f"{detail[:200]} [input: {label}]")
    except _Timeout:
        outcome, detail = "hang", "alarm"
    except Exception as exc:  # noqa: BLE001 - exactly what the contract forbids
        outcome, detail = "internal_error", f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        sig = f"{type(exc).__name__} {os.path.relpath(frame.filename)}:{frame.lineno}"
        outcomes.signatures.setdefault(sig, f"{detail} [input: {label}]" if label else detail)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    elapsed = time.perf_counter() - t0
    if elapsed > outcomes.slowest[0]:
        outcomes.slowest = (elapsed, label)
    if outcome != "hang" and elapsed > time_limit:
        outcome, detail = "hang", f"{elapsed:.1f} s"
    growth = _input_growth(rss0)
    if growth >= MEMORY_LIMIT_BYTES:  # a reader that allocates what a header claims
        outcome, detail = "internal_error", f"peak memory grew by {growth >> 20} MiB during one input"
        outcomes.signatures.setdefault("memory blow-up", f"{detail} [input: {label}]")
    outcomes.add(outcome, detail)
    if outcome == "hang":
        outcomes.signatures.setdefault(f"hang {detail}", label or repr(fn))
    elif outcome == "internal_error" and label:
        detail = f"{detail} [input: {label}]"
    if CAMPAIGN:
        return outcome
    assert outcome in ("ok", "user_error"), f"{outcome}: {detail}"
    if expect_error is not None:
        assert outcome == "user_error" and expect_error in detail, detail
    return outcome
