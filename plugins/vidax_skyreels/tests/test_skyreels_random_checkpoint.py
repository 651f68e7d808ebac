"""The published layout of every skyreels id (assets/published, recorded by scripts/published_layouts.py) makes a
checkpoint (`vidax bench --write-random-checkpoint`, written here as sparse zeros) that the family's own loaders
accept key by key and shape by shape; no torch."""

from __future__ import annotations

import pytest

from vidax_core.bench.random_checkpoint import check_with_loaders, write_random_checkpoint
from vidax_core.testing.reference import registered_models


@pytest.mark.parametrize("model_id", sorted(registered_models("skyreels")))
def test_the_published_layout_loads(model_id, tmp_path):
    summary = write_random_checkpoint(model_id, str(tmp_path / "c"), fill="zeros", log=lambda _: None)
    assert summary["components"]["transformer"]["bytes"] > 2e9  # bf16: 1.3B / 14B parameters
    assert check_with_loaders(model_id, str(tmp_path / "c")) == ["transformer", "vae", "text encoder"]
