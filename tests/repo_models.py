"""The model ids this repository's own plugins register (the distributions under ``plugins/``): what the core's
tests that enumerate the registry check. A third-party plugin installed beside them (the kit's toy family,
pip-installed) registers ids that have none of what the repository ships for its own families (a default config
under configs/, a published layout, a README row, a demo config), and the core's suite passes with it there
(tests/test_third_party_beside.py)."""

from __future__ import annotations

import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@functools.lru_cache(maxsize=None)
def repo_distributions() -> frozenset[str]:
    """The distribution names of ``plugins/*/pyproject.toml``."""
    names = set()
    for toml in ROOT.glob("plugins/*/pyproject.toml"):
        found = re.search(r'^name\s*=\s*"([^"]+)"', toml.read_text(encoding="utf-8"), re.M)
        if found:
            names.add(found.group(1))
    return frozenset(names)


def repo_specs(plugins=None) -> list:
    """The registered ModelSpecs of this repository's plugins, in registry order."""
    if plugins is None:
        from vidax_core.plugins import get_plugins

        plugins = get_plugins()
    return [s for s in plugins.registry if s.plugin in repo_distributions()]
