"""User feedback on long work: status lines and progress bars on stderr, silenced by ``--quiet``."""

from __future__ import annotations

import sys
import time
from typing import Any

from tqdm.auto import tqdm


class Reporter:
    """Status lines and tqdm bars on stderr; ``quiet`` turns all of them off (errors are not printed here)."""

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet

    def log(self, message: str) -> None:
        if not self.quiet:
            print(message, file=sys.stderr, flush=True)

    def bar(self, total: int, desc: str, unit: str = "it", **kwargs: Any) -> tqdm:
        return tqdm(total=total, desc=desc, unit=unit, disable=self.quiet, file=sys.stderr, leave=True,
                    dynamic_ncols=True, **kwargs)


class Timer:
    """Accumulates named wall-clock phases for the closing summary and the metrics file."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.phases: dict[str, float] = {}

    def add(self, name: str, seconds: float) -> None:
        self.phases[name] = self.phases.get(name, 0.0) + seconds

    def total(self) -> float:
        return time.perf_counter() - self.start
