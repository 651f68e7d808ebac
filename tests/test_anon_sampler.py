"""The anonymous-memory sampler: a child process, so the measured interpreter never hands its GIL to a sampling
thread, and still quick enough to see a short-lived copy."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import numpy as np
import psutil

from vidax_core.report import memory


def test_a_short_lived_copy_is_seen_by_the_window_and_the_process_peak():
    memory.start()
    with memory.window() as w:
        a = np.ones(256 * 2**20 // 8)  # 256 MiB, touched
        time.sleep(0.05)
        del a
        time.sleep(0.02)
    assert 250 <= w.growth_mb <= 300, w.growth_mb
    assert memory.peak_anon_mb() >= w.base + 250
    with memory.window() as later:  # a slot used before starts again from the new window's base
        time.sleep(0.02)
    assert later.growth_mb < 50, later.growth_mb


def test_the_sampler_is_a_child_process_not_a_thread():
    memory.start()
    sampler = memory._sampling()
    assert sampler is not None and psutil.Process(sampler.child.pid).ppid() == psutil.Process().pid
    assert not [t for t in threading.enumerate() if "memory" in t.name]


def test_a_ctrl_c_leaves_the_sampler_to_the_process_it_measures():
    """A terminal's Ctrl-C goes to its foreground process group; the sampler is in a session of its own, so the
    measured process alone decides what the interrupt means (a loaded pipe may catch it and go on)."""
    import os

    memory.start()
    assert os.getpgid(memory._sampling().child.pid) != os.getpgid(0)


def test_the_sampler_ends_with_the_process_it_measures():
    code = "from vidax_core.report import memory; memory.start(); print(memory._sampling().child.pid)"
    pid = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             timeout=60).stdout)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.02)
    else:
        raise AssertionError(f"the sampler {pid} outlived its process")
