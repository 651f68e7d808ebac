"""Counting what a call really does: XLA backend compiles, the files it opens and the checkpoint tensors it reads
(a test asserts that a second call of the same shape compiles nothing, opens no weight file and places no
weight)."""

from __future__ import annotations

import builtins
import collections

WEIGHT_SUFFIXES = (".safetensors", ".pt", ".pth", ".bin")
BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"


class Counters:
    """Counts from construction (or the last :meth:`reset`); ``monkeypatch`` undoes the ``open`` spy after the
    test. JAX keeps the event listener for the process's life: it only adds to this object's counters."""

    def __init__(self, monkeypatch) -> None:
        from jax import monitoring

        self.opens: list[str] = []
        self.events: collections.Counter = collections.Counter()
        real_open = builtins.open

        def counting_open(file, *a, **k):
            self.opens.append(str(file))
            return real_open(file, *a, **k)

        monkeypatch.setattr(builtins, "open", counting_open)
        monitoring.register_event_duration_secs_listener(self._on_event)
        self.tensor_reads = 0  # checkpoint tensors read to be placed (every weight goes through a lazy leaf)
        from vidax_core.io import lazy

        def counted(real):
            def read(*a, **k):
                self.tensor_reads += 1
                return real(*a, **k)

            return read

        monkeypatch.setattr(lazy.Part, "read", counted(lazy.Part.read))
        monkeypatch.setattr(lazy, "_rows", counted(lazy._rows))

    def _on_event(self, name: str, _secs: float, **_kw) -> None:
        self.events[name] += 1

    def reset(self) -> None:
        self.opens.clear()
        self.events.clear()
        self.tensor_reads = 0

    @property
    def weight_opens(self) -> list[str]:
        return [o for o in self.opens if o.endswith(WEIGHT_SUFFIXES)]

    @property
    def compiles(self) -> int:
        return self.events[BACKEND_COMPILE]
