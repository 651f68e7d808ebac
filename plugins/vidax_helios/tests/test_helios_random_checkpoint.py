"""The published layout of every helios id (assets/published, recorded by scripts/published_layouts.py) makes a
checkpoint (`vidax bench --write-random-checkpoint`, sparse zeros) that the family's own loaders accept key by key
and shape by shape; no torch."""

from __future__ import annotations

import pytest

from vidax_core.testing.config_folders import assert_layout_loads
from vidax_core.testing.reference import registered_models


@pytest.mark.parametrize("model_id", sorted(registered_models("helios")))
def test_the_published_layout_loads(model_id, tmp_path):
    assert assert_layout_loads(model_id, str(tmp_path / "c")) == ["transformer", "vae", "text encoder"]
