"""Keep a test module's shared work on one pytest-xdist worker.

A module-scoped fixture (a fake-device subprocess, a tiny checkpoint, a compiled pipeline) runs once per worker
that receives one of its tests: ``--dist loadgroup`` spreads a module's tests over both workers, so such a fixture
ran twice. :func:`group_shared_fixture_modules` gives every test that uses a module- or class-scoped fixture the
``xdist_group`` of its module (unless it names a group itself), so the fixture runs once per suite.
"""

from __future__ import annotations

import collections
from typing import Iterable

import pytest

SHARED_SCOPES = ("module", "class", "package")


def _uses_shared_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    for defs in info.name2fixturedefs.values():
        if defs and defs[-1].scope in SHARED_SCOPES:
            return True
    return False


def group_shared_fixture_modules(items: Iterable[pytest.Item]) -> int:
    """Mark each test that shares a fixture across its module with its module's group; returns how many."""
    n = 0
    for item in items:
        if item.get_closest_marker("xdist_group") is not None or not _uses_shared_fixture(item):
            continue
        item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
        n += 1
    return n


def _scope(item: pytest.Item) -> str:
    marker = item.get_closest_marker("xdist_group")
    return str(marker.args[0] if marker.args else marker.kwargs.get("name")) if marker else item.nodeid


def order_for_balance(items: list[pytest.Item]) -> None:
    """Reorder ``items`` (in place) so two workers finish together: xdist hands out whole groups in collection
    order, so a long test handed out last leaves the other worker idle. Tests marked ``long`` go first, then the
    groups by their number of tests (xdist's own ``--loadscope-reorder`` rule, which cannot see ``long``), then
    the single tests; run with ``--no-loadscope-reorder`` so xdist keeps this order."""
    scope = {item.nodeid: _scope(item) for item in items}
    sizes = collections.Counter(scope.values())
    first: dict[str, int] = {}
    for i, item in enumerate(items):
        first.setdefault(scope[item.nodeid], i)

    def rank(item: pytest.Item) -> tuple[bool, int, int]:
        group = scope[item.nodeid]
        return item.get_closest_marker("long") is None, -sizes[group], first[group]

    items.sort(key=rank)
