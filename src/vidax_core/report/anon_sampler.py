"""Sample a process's anonymous memory every few milliseconds from a child process, peaks kept in shared memory.

Linux reports the current ``RssAnon`` but no peak, so it has to be sampled often enough to catch a short-lived
copy. A thread of the measured process doing that every 5 ms asks for the GIL 200 times a second, and on a busy
machine each hand-over waits for the scheduler: the tiny LTX-2 end-to-end tests ran 23% slower with it (50.7 s
against 39.2 s on two cores). This child reads ``/proc/<pid>/status`` instead and never touches the measured
process's interpreter (it runs this file as a script: no package, ~10 MB).

Shared layout (float64, MiB): slot 0 the peak since the start, slots 1.. the windows' peaks; a window's slot is
live while its flag (a byte per slot after the floats) is 1. The child only raises peaks of live slots; the
parent opens a slot with its base, closes it by clearing its flag, and uses the slots round-robin so that a slot
the child may still be writing is not reused at once. The child exits when the measured process is gone.
"""

from __future__ import annotations

import mmap
import os
import subprocess
import sys
import tempfile
import time

SLOTS = 64
SIZE = 8 * (SLOTS + 1) + SLOTS


def read_anon(path: str) -> float | None:
    """``RssAnon`` of the ``status`` file at ``path``, in MiB (None where it is not there)."""
    try:
        with open(path, "rb") as f:
            for line in f:
                if line.startswith(b"RssAnon:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


class SharedPeaks:
    """The parent's side: starts the child and reads and writes the slots."""

    def __init__(self, period_s: float) -> None:
        self.pid = os.getpid()
        self._file = tempfile.TemporaryFile(prefix="vidax-anon-")
        self._file.write(bytes(SIZE))  # written, not truncated: a full disk is an OSError here, not a SIGBUS later
        self._file.flush()
        self.map = mmap.mmap(self._file.fileno(), SIZE)
        self.peaks = memoryview(self.map)[: 8 * (SLOTS + 1)].cast("d")
        self.live = memoryview(self.map)[8 * (SLOTS + 1):]
        self.peaks[0] = read_anon("/proc/self/status") or 0.0
        self._next = 0
        self.child = subprocess.Popen(
            [sys.executable, "-S", "-I", os.path.abspath(__file__), str(self._file.fileno()), str(self.pid),
             str(period_s)],
            pass_fds=(self._file.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True)  # a terminal's Ctrl-C is the measured process's

    def open(self, base: float) -> int:
        """A slot for a window starting at ``base`` MiB."""
        slot = 1 + self._next
        self._next = (self._next + 1) % SLOTS
        self.live[slot - 1] = 0
        self.peaks[slot] = base
        self.live[slot - 1] = 1
        return slot

    def close(self, slot: int) -> float:
        """The window's peak; the slot is free again."""
        self.live[slot - 1] = 0
        return self.peaks[slot]

    def peak(self) -> float:
        return self.peaks[0]


def main(fd: int, pid: int, period_s: float) -> None:
    """The child's loop: raise the live slots' peaks to ``pid``'s anonymous memory every ``period_s``."""
    m = mmap.mmap(fd, SIZE)
    peaks = memoryview(m)[: 8 * (SLOTS + 1)].cast("d")
    live = memoryview(m)[8 * (SLOTS + 1):]
    path = f"/proc/{pid}/status"
    while os.getppid() == pid:
        now = read_anon(path)
        if now is None:
            return
        if now > peaks[0]:
            peaks[0] = now
        for i in range(SLOTS):
            if live[i] and now > peaks[i + 1]:
                peaks[i + 1] = now
        time.sleep(period_s)


if __name__ == "__main__":  # the child: this file run as a script, no package imported
    main(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]))
