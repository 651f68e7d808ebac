"""The kit's XLA flags: a fake-device subprocess keeps the suite's compile flags and gets exactly one device
count, and the suite really compiles with them (a subprocess's backend sees the flag)."""

from __future__ import annotations

import subprocess
import sys

from vidax_core.testing.devices import FAST_CPU_COMPILE_FLAGS, fake_device_env, xla_flags


def test_device_count_replaces_and_keeps_the_other_flags(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=8 --xla_cpu_foo=1")
    assert xla_flags(2) == "--xla_cpu_foo=1 --xla_force_host_platform_device_count=2"
    assert xla_flags() == "--xla_cpu_foo=1"
    assert fake_device_env(4)["XLA_FLAGS"] == "--xla_cpu_foo=1 --xla_force_host_platform_device_count=4"


def test_the_suite_and_its_subprocesses_compile_with_the_fast_flags():
    env = fake_device_env(3)
    for flag in FAST_CPU_COMPILE_FLAGS:
        assert flag in env["XLA_FLAGS"].split()
    out = subprocess.run([sys.executable, "-c", "import jax; print(jax.device_count())"], capture_output=True,
                         text=True, env=env, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "3", out.stderr[-2000:]
