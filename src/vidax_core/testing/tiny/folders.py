"""Tiny Wan checkpoints saved to disk in diffusers layout, for tests that go through ``model.checkpoint=DIR``."""

from __future__ import annotations

import os
from pathlib import Path

from vidax_core.testing.reference import torch_param_bytes  # noqa: F401 - re-exported for the tests
from vidax_core.testing.tiny.wan import build_tiny_wan_variant


def save_tiny_wan_variant(out_dir: str | os.PathLike, variant: str = "wan2.2-t2v-a14b", seed: int = 0):
    """``save_pretrained`` a tiny :data:`~vidax_core.testing.tiny.wan.VARIANTS` pipeline (e.g. Wan2.2 A14B: two experts,
    ``transformer`` and ``transformer_2``); returns (folder, the torch pipeline) so tests can count its parameters."""
    pipe = build_tiny_wan_variant(variant, seed=seed)
    pipe.save_pretrained(str(out_dir), safe_serialization=True)
    return Path(out_dir), pipe
