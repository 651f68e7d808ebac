"""Under ``pytest -n 2 --dist loadgroup`` a module-scoped fixture runs once: the kit's grouping keeps the module on
one worker. (With pytest 9.2 and pytest-xdist 3.8 loadgroup silently stopped grouping and every fake-device
fixture of the suite ran on both workers; this catches that again.)"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

CONFTEST = """
import pytest
from vidax_core.testing.grouping import group_shared_fixture_modules

@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    group_shared_fixture_modules(items)
"""

MODULE = """
import os
import pytest

@pytest.fixture(scope="module")
def shared():
    with open(os.environ["SETUPS"], "a") as f:
        f.write(os.environ.get("PYTEST_XDIST_WORKER", "-") + "\\n")

@pytest.mark.parametrize("i", range(8))
def test_uses_it(shared, i):
    pass

@pytest.mark.parametrize("i", range(8))
def test_free(i):
    pass
"""


def test_module_fixture_runs_once_over_two_workers(tmp_path):
    (tmp_path / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (tmp_path / "test_probe.py").write_text(textwrap.dedent(MODULE))
    setups = tmp_path / "setups.txt"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup", "-p",
                           "no:cacheprovider", str(tmp_path)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "SETUPS": str(setups)})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "16 passed" in proc.stdout
    assert len(setups.read_text().split()) == 1, setups.read_text()


def test_long_tests_then_larger_groups_come_first(tmp_path):
    """``order_for_balance``: tests marked ``long`` first, then groups by size, then single tests in their order;
    a group's tests stay together."""
    (tmp_path / "conftest.py").write_text(textwrap.dedent("""
        import pytest
        from vidax_core.testing.grouping import order_for_balance

        def pytest_configure(config):
            config.addinivalue_line("markers", "long: long")

        def pytest_collection_modifyitems(config, items):
            order_for_balance(items)
    """))
    (tmp_path / "test_order.py").write_text(textwrap.dedent("""
        import pytest

        def test_a():
            pass

        @pytest.mark.xdist_group("small")
        def test_small():
            pass

        @pytest.mark.long
        def test_slow():
            pass

        @pytest.mark.xdist_group("big")
        @pytest.mark.parametrize("i", range(2))
        def test_big(i):
            pass

        def test_z():
            pass
    """))
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           str(tmp_path)], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names = [line.split("::", 1)[1] for line in proc.stdout.splitlines() if "::" in line]
    assert names == ["test_slow", "test_big[0]", "test_big[1]", "test_a", "test_small", "test_z"]
