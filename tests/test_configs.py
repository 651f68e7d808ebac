"""Every shipped YAML config is valid for its model, and every model's default config exists."""

from __future__ import annotations

import glob
import os

import pytest

from repo_models import repo_specs
from vidax_core import config as config_mod
from vidax_core.plugins import get_plugins

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = sorted(glob.glob(os.path.join(ROOT, "configs", "*.yaml")))


@pytest.mark.parametrize("path", CONFIGS, ids=[os.path.basename(p) for p in CONFIGS])
def test_config_validates_and_passes_model_checks(path):
    plugins = get_plugins()
    cfg = config_mod.resolve(path, [], lambda mid: dict(plugins.registry.get(mid).preset))
    spec = plugins.registry.get(cfg.model.id)
    assert plugins.call("check_run", spec, run=cfg) == []
    assert cfg.model.checkpoint


def test_every_default_config_is_shipped():
    """Every id of the repository's plugins names a YAML under configs/ (a third-party plugin's default_config, if
    any, is a path of its own, not of this repository)."""
    missing = [f"{spec.id}: {spec.default_config}" for spec in repo_specs()
               if not spec.default_config or not os.path.exists(os.path.join(ROOT, spec.default_config))]
    assert not missing, missing
